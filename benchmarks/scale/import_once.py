"""One measured step of import_bench.py, run as its own process: prints "seconds peak_MiB" on stdout.

Modes: `json` (a bare json.load of the file; of each file in turn, none kept, for a directory), `import`
(`kernelscope import` of the tree on PYTHONPATH: the current one, or main before issue 40 unpacked by
import_bench.py; a file or a directory of per-rank traces), `show` (`kernelscope show` of a session, its output
discarded).
Usage: import_once.py json|import|show TRACE|DIR|SESSION [OUT.session.json]
"""
from __future__ import annotations

import json
import os
import resource
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    mode, trace = argv[0], argv[1]
    t0 = time.perf_counter()
    if mode == "json":
        files = sorted(Path(trace).iterdir()) if Path(trace).is_dir() else [Path(trace)]
        for name in files:
            with open(name, "rb") as f:
                doc = json.load(f)
            assert doc["traceEvents"]
            del doc
    elif mode == "show":
        from kernelscope.cli import main as ks

        out = sys.stdout
        sys.stdout = open(os.devnull, "w")
        try:
            code = ks(["show", trace])
        finally:
            sys.stdout.close()
            sys.stdout = out
        assert code in (0, None), code
    else:
        from kernelscope.cli import main as ks

        code = ks(["import", trace, "-o", argv[2], "-f"])
        assert code in (0, None), code
    secs = time.perf_counter() - t0
    print(f"{secs:.2f} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
