"""The scale benchmark: sessions of 10^3 ... 10^6 launches, each CLI step timed as a subprocess with its peak memory.

For each size N it builds (build_sessions.py) two sessions from recorded launches (seeds 0 and 1) and a PyTorch
profiler trace of the first, then times: `run`'s conversion step (convert_trace.py: trace -> saved session),
`show`, `show --json`, `export --chrome`, `diff` of the two, and the session file's bytes per launch.
Wall time and peak RSS come from /usr/bin/time. Prints the Markdown table of RESULTS.md.
Usage: run_scale.py [--sizes 1000,10000,...] [--work DIR]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
PY = sys.executable


def timed(cmd: list[str]) -> tuple[float, float]:
    """(seconds, peak MiB) of one command, output discarded; raises if it fails."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as t:
        r = subprocess.run(["/usr/bin/time", "-f", "%e %M", "-o", t.name, *cmd], stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE, text=True)
        if r.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed: {r.stderr.strip()[-500:]}")
        secs, kib = Path(t.name).read_text().split()[-2:]
    return float(secs), int(kib) / 1024


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="1000,10000,100000,1000000")
    p.add_argument("--work", default=tempfile.gettempdir() + "/kernelscope-scale")
    a = p.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    ks = [PY, "-m", "kernelscope"]
    print("| launches | session B/launch | convert trace s (MiB) | show s (MiB) | show --json s (MiB) "
          "| export --chrome s (MiB) | diff s (MiB) |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for n in (int(x) for x in a.sizes.split(",")):
        sa, sb, tr, conv, chrome = (work / f"{n}_{x}" for x in ("a.json", "b.json", "trace.json", "conv.json",
                                                                "chrome.json"))
        for f in (sa, sb, tr, conv, chrome):
            f.unlink(missing_ok=True)
        subprocess.run([PY, str(HERE / "build_sessions.py"), str(n), str(sa)], check=True, stderr=subprocess.DEVNULL)
        subprocess.run([PY, str(HERE / "build_sessions.py"), str(n), str(sb), "--seed", "1"], check=True,
                       stderr=subprocess.DEVNULL)
        subprocess.run([PY, str(HERE / "build_sessions.py"), str(n), str(tr), "--kineto"], check=True,
                       stderr=subprocess.DEVNULL)
        row = [f"{n:,}", f"{os.path.getsize(sa) / n:.0f}"]
        for cmd in ([PY, str(HERE / "convert_trace.py"), str(tr), str(conv)],
                    [*ks, "show", str(sa), "--no-color", "--width", "120"],
                    [*ks, "show", "--json", str(sa)],
                    [*ks, "export", str(sa), "-o", str(chrome)],
                    [*ks, "diff", str(sa), str(sb), "--no-color", "--width", "120"]):
            s, mib = timed(cmd)
            row.append(f"{s:.2f} ({mib:.0f})")
        for f in (tr, conv, chrome):
            f.unlink(missing_ok=True)
        print("| " + " | ".join(row) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
