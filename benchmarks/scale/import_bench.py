"""Importing realistic PyTorch profiler traces: the streaming `kernelscope import` against the importer before it
(whole document, json.loads then parse_trace, Launch objects: the tree at commit OLD_COMMIT) and a bare
`json.load` of the same file, in one run.

For each size N (kernels) it writes a trace with realistic_trace.py, then runs each step as its own process
(import_once.py), which reports its wall time and peak RSS (resource.getrusage), and checks that both imports
wrote the same session. Prints the Markdown table of RESULTS.md. `--no-old` leaves the old importer out (its
columns say "not run"). With `--ranks R --rank-kernels N` it measures a job of R ranks of N kernels each instead:
one directory of R per-rank traces (realistic_trace.py --rank r --world-size R), `json.load` of each file in turn,
`kernelscope import` of the directory and `kernelscope show` of its session.
Usage: import_bench.py [--sizes 10000,100000,200000] [--work DIR] [--no-old] [--ranks R --rank-kernels N]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import io
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
OLD_COMMIT = "6438a75"  # main before issue 40
PY = sys.executable


def old_tree(work: Path) -> Path:
    """src/ of OLD_COMMIT, unpacked under work (git archive: no worktree, the repository is left alone)."""
    out = work / f"old-{OLD_COMMIT}"
    if not (out / "src").is_dir():
        data = subprocess.run(["git", "-C", str(ROOT), "archive", OLD_COMMIT, "src"], check=True,
                              capture_output=True).stdout
        with tarfile.open(fileobj=io.BytesIO(data)) as t:
            t.extractall(out)
    return out / "src"


def step(mode: str, trace: Path, out: Path, src: Path) -> tuple[float, float]:
    env = {**os.environ, "PYTHONPATH": str(src), "KERNELSCOPE_MAX_INPUT_MB": "8192"}
    r = subprocess.run([PY, str(HERE / "import_once.py"), mode, str(trace), str(out)], env=env,
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{mode} on {trace} failed: {r.stderr.strip()[-800:]}")
    secs, mib = r.stdout.split()[-2:]
    return float(secs), float(mib)


def same_session(a: Path, b: Path) -> bool:
    da, db = json.loads(a.read_bytes()), json.loads(b.read_bytes())
    for d in (da, db):
        d.pop("created_utc", None)
    return da == db


def ranks_job(work: Path, ranks: int, n: int) -> str:
    """The row of a job of ``ranks`` ranks of ``n`` kernels each: json.load of the files, import, show."""
    job = work / f"ranks_{ranks}x{n}"
    job.mkdir(exist_ok=True)
    for f in job.iterdir():
        f.unlink()
    events = 0
    for r in range(ranks):  # tensorboard_trace_handler's names: <host>_<pid>.<ms>.pt.trace.json
        events += int(subprocess.run([PY, str(HERE / "realistic_trace.py"), str(n),
                                      str(job / f"node0_{2418 + r}.1764150000000.pt.trace.json"), "--rank", str(r),
                                      "--world-size", str(ranks)], check=True, capture_output=True, text=True).stdout)
    mb = sum(f.stat().st_size for f in job.iterdir()) / 1e6
    src = ROOT / "src"
    session = work / f"ranks_{ranks}x{n}.session.json"
    j = step("json", job, work / "unused.json", src)
    s = step("import", job, session, src)
    v = step("show", session, work / "unused.json", src)
    row = (f"| {ranks} x {n:,} | {events:,} | {mb:,.0f} | {j[0]:.2f} ({j[1]:,.0f}) | {s[0]:.2f} ({s[1]:,.0f}) | "
           f"{s[0] / j[0]:.2f}x | {v[0]:.2f} ({v[1]:,.0f}) |")
    for f in job.iterdir():
        f.unlink()
    job.rmdir()
    session.unlink()
    return ("| ranks x kernels | events | traces MB | json.load s (MiB) | import s (MiB) | import / json.load time "
            "| show s (MiB) |\n|---|---:|---:|---:|---:|---:|---:|\n" + row)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default=None, help="kernels per trace, comma-separated (default 10000,100000,200000; "
                   "none with --ranks alone)")
    p.add_argument("--work", default=tempfile.gettempdir() + "/kernelscope-import-bench")
    p.add_argument("--no-old", action="store_true", help="leave the old importer out (slow and 7 GB at 10^6)")
    p.add_argument("--ranks", type=int, default=0)
    p.add_argument("--rank-kernels", type=int, default=125_000)
    a = p.parse_args()
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    sizes = a.sizes if a.sizes is not None else ("" if a.ranks else "10000,100000,200000")
    if sizes:
        print(sizes_table(work, [int(n) for n in sizes.split(",")], a.no_old))
    if a.ranks:  # after the sizes: both tables from one run
        print(ranks_job(work, a.ranks, a.rank_kernels))
    return 0


def sizes_table(work: Path, sizes: list[int], no_old: bool) -> str:
    """The table of one trace per size: json.load, the old import (unless ``no_old``) and the streaming import."""
    old_src, new_src = old_tree(work), ROOT / "src"
    rows = ["| kernels | events | trace MB | json.load s (MiB) | old import s (MiB) | streaming import s (MiB) "
            "| new / json.load time | same session |", "|---:|---:|---:|---:|---:|---:|---:|:---:|"]
    for n in sizes:
        trace = work / f"trace_{n}.json"
        events = int(subprocess.run([PY, str(HERE / "realistic_trace.py"), str(n), str(trace)], check=True,
                                    capture_output=True, text=True).stdout)
        mb = trace.stat().st_size / 1e6
        j = step("json", trace, work / "unused.json", new_src)
        s = step("import", trace, work / f"new_{n}.session.json", new_src)
        if no_old:
            old, same = "not run", "not run"
        else:  # the old tree's import is the old path
            o = step("import", trace, work / f"old_{n}.session.json", old_src)
            old = f"{o[0]:.2f} ({o[1]:,.0f})"
            same = "yes" if same_session(work / f"old_{n}.session.json", work / f"new_{n}.session.json") else "NO"
            (work / f"old_{n}.session.json").unlink()
        rows.append(f"| {n:,} | {events:,} | {mb:,.0f} | {j[0]:.2f} ({j[1]:,.0f}) | {old} | "
                    f"{s[0]:.2f} ({s[1]:,.0f}) | {s[0] / j[0]:.2f}x | {same} |")
        print(rows[-1], file=sys.stderr, flush=True)
        trace.unlink()
        (work / f"new_{n}.session.json").unlink()
    return "\n".join(rows)


if __name__ == "__main__":
    raise SystemExit(main())
