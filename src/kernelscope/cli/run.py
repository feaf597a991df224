"""`kernelscope run`: profile a workload and write a session file.

Parsed by hand rather than argparse: everything after ``--`` or ``-m MODULE``
belongs to the workload, dashes included.
"""
from __future__ import annotations

import datetime as _dt
import sys
from pathlib import Path

from kernelscope.cli.common import fail

RAW_ARGS = True  # main() takes the raw argument list

RUN_USAGE = """usage: kernelscope run [-o FILE] [-f] [--keep-trace FILE] -- python SCRIPT [ARGS...]
       kernelscope run [-o FILE] [-f] -m MODULE [ARGS...]

Run a Python workload under the trace pass (PyTorch profiler / CUPTI) and write
a session file. The workload's output and exit code pass through; if it fails
or is interrupted, the partial session is still written.

options:
  -o, --output FILE       session file (default: kernelscope-YYYYmmdd-HHMMSS.json)
  -f, --force-overwrite   overwrite FILE if it exists
  --keep-trace FILE       also keep the raw PyTorch profiler trace (Chrome JSON)
  -m MODULE               run a module, like python -m
  -q, --quiet             do not print the summary line after the run"""


def _parse_run(argv: list[str]) -> dict:
    opts: dict = {"output": None, "force": False, "keep_trace": None, "module": None, "command": [], "quiet": False}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            print(RUN_USAGE)
            raise SystemExit(0)
        if a == "--":
            opts["command"] = argv[i + 1:]
            break
        if a in ("-o", "--output", "--keep-trace", "-m"):
            if i + 1 >= len(argv):
                fail(f"{a} needs a value")
            key = {"-o": "output", "--output": "output", "--keep-trace": "keep_trace", "-m": "module"}[a]
            opts[key] = argv[i + 1]
            if a == "-m":
                opts["command"] = argv[i + 2:]
                break
            i += 2
            continue
        if a.startswith("--output="):
            opts["output"] = a.split("=", 1)[1]
        elif a in ("-f", "--force-overwrite"):
            opts["force"] = True
        elif a in ("-q", "--quiet"):
            opts["quiet"] = True
        elif a.startswith("-"):
            fail(f"unknown run option {a!r} (put the workload after '--')")
        else:
            opts["command"] = argv[i:]
            break
        i += 1
    return opts


def main(argv: list[str]) -> int:
    from kernelscope.collect.runner import RunError, run

    o = _parse_run(argv)
    out = Path(o["output"] or _dt.datetime.now().strftime("kernelscope-%Y%m%d-%H%M%S.json"))
    if out.exists() and not o["force"]:
        fail(f"{out} already exists; use -f to overwrite it or -o to choose another file")
    if not out.parent.exists():
        fail(f"the directory {out.parent} does not exist")
    try:
        result = run(o["command"], out, module=o["module"], keep_trace=o["keep_trace"])
    except RunError as e:
        fail(str(e))
    if not o["quiet"]:
        s = result.session
        trace = s.collectors.get("trace")
        what = f"{len(s.launches)} kernel launches" if trace and trace.status in ("ok", "partial") else (
            f"no trace: {trace.reason}" if trace else "no trace")
        print(f"kernelscope: session written to {out} ({what}; {s.outcome}, exit code {result.exit_code}). "
              f"View it with: kernelscope show {out}", file=sys.stderr)
    return result.exit_code
