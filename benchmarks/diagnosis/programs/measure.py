"""Time each program's defect and fixed variants as plain processes (the real gain of the fix) and record a
kernelscope session of each variant; write OUT/program_timings.json, OUT/sessions.tar.gz, OUT/measure.log and
OUT/program_timings.md, and print the table last. Run on a GPU machine from the repository root:

    OUT=/tmp/programs PYTHONPATH=src python benchmarks/diagnosis/programs/measure.py
    ... measure.py --single-only --part 1/2      (then --part 2/2: each part stays under 10 minutes)
    ... measure.py --ranks-only --nproc 2        (needs 2 GPUs; --nproc 2,4 needs 4)

Results are rewritten after every program, so a run stopped part-way still leaves what it measured.
"""
from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]


def _load_config():
    """config.py of this directory, by path (a bare `import config` could find another module)."""
    name = "kernelscope_diagnosis_programs_config"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, HERE / "config.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name]


PROGRAMS = _load_config().PROGRAMS
Program = _load_config().Program

# The machine has NVLink multicast off and it must stay off.
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
RECORD_STEPS = 10  # timed steps of a recorded run (after the program's warm-up)
WARMUP = 5


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(NO_MULTICAST)
    src = str(ROOT / "src")
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    if src not in parts:
        parts.insert(0, src)
    env["PYTHONPATH"] = os.pathsep.join(parts)
    return env


TINY: list[str] = []  # ["--tiny"] with measure.py --tiny (a CPU smoke run of the pipeline, not a measurement)


def workload(prog: Program, variant: str, nproc: int, steps: int | None) -> list[str]:
    args = [str(HERE / "run.py"), prog.name, "--variant", variant, "--warmup", str(WARMUP), *TINY]
    if steps is not None:
        args += ["--steps", str(steps)]
    if prog.distributed:
        return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc), *args]
    return [sys.executable, *args]


def record_command(prog: Program, variant: str, nproc: int, session: Path) -> list[str]:
    """`kernelscope run` (flags as in src/kernelscope/cli/run.py): a single process records only the timed
    steps (--steps, after the warm-up); under torchrun --steps is not supported, so the whole run is recorded."""
    cmd = [sys.executable, "-m", "kernelscope", "run", "-f", "-o", str(session)]
    if not prog.distributed:
        cmd += ["--steps", f"{WARMUP}-{WARMUP + RECORD_STEPS - 1}"]
    return cmd + ["--", *workload(prog, variant, nproc, RECORD_STEPS)]


class Log:
    def __init__(self, path: Path) -> None:
        self.path = path

    def write(self, text: str) -> None:
        with self.path.open("a") as f:
            f.write(text if text.endswith("\n") else text + "\n")


def run_logged(cmd: list[str], log: Log, timeout: float) -> tuple[int, str]:
    log.write(f"$ {' '.join(cmd)}")
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=child_env(), capture_output=True, text=True, timeout=timeout)
        rc, out, err = p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired as e:
        rc, out, err = 124, _text(e.stdout), _text(e.stderr) + f"\n(timed out after {timeout:.0f} s)"
    log.write(f"(rc {rc}, {time.perf_counter() - t0:.1f} s)\n{out[-3000:]}\n{err[-3000:]}")
    return rc, out


def _text(b: bytes | str | None) -> str:
    if b is None:
        return ""
    return b if isinstance(b, str) else b.decode(errors="replace")


def parse_result(stdout: str) -> dict | None:
    """The program's one JSON line ({"step_ms": [...], ...}); the last one wins."""
    found = None
    for line in stdout.splitlines():
        i = line.find('{"program"')
        if i >= 0:
            try:
                found = json.loads(line[i:])
            except json.JSONDecodeError:
                continue
    return found


def median(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def real_gain_pct(t_defect: float | None, t_fixed: float | None) -> float | None:
    if not t_defect or t_fixed is None:
        return None
    return round(100.0 * (1.0 - t_fixed / t_defect), 2)


def time_variants(prog: Program, nproc: int, repeats: int, log: Log, timeout: float) -> dict:
    runs: dict[str, list[dict]] = {v: [] for v in prog.variants}
    for _ in range(repeats):  # interleaved: defect, fixed, defect, fixed
        for v in prog.variants:
            rc, out = run_logged(workload(prog, v, nproc, None), log, timeout)
            res = parse_result(out)
            runs[v].append(res if rc == 0 and res else {"error": f"exit {rc}"})
    variants = {}
    for v, rs in runs.items():
        ok = [r for r in rs if "median_ms" in r]
        entry = {"step_ms": median([r["median_ms"] for r in ok]), "runs_median_ms": [r.get("median_ms") for r in rs],
                 "errors": [r["error"] for r in rs if "error" in r]}
        if ok and "allreduce_median_ms" in ok[0]:
            entry["allreduce_ms"] = median([r["allreduce_median_ms"] for r in ok])
        if ok:
            entry["step_ms_all"] = ok[-1]["step_ms"]
        variants[v] = entry
    return variants


def entry_name(prog: Program, nproc: int) -> str:
    return f"{prog.name}@{nproc}" if prog.distributed else prog.name


def session_name(prog: Program, nproc: int, variant: str) -> str:
    rank_part = f"_n{nproc}" if prog.distributed else ""
    return f"{prog.name}{rank_part}_{variant}.json.gz"


def measure_one(prog: Program, nproc: int, a: argparse.Namespace, sessions: Path, log: Log, device: str) -> dict:
    t0 = time.perf_counter()
    entry: dict = {"program": prog.name, "category": prog.category, "expected_rule": prog.expected_rule,
                   "nproc": nproc, "half": prog.half, "device": device, "date": dt.date.today().isoformat()}
    if not a.no_timing:
        entry["variants"] = time_variants(prog, nproc, a.repeats, log, a.timeout)
        if "defect" in entry["variants"]:
            entry["real_gain_pct"] = real_gain_pct(entry["variants"]["defect"]["step_ms"],
                                                   entry["variants"]["fixed"]["step_ms"])
            ad, af = (entry["variants"][v].get("allreduce_ms") for v in ("defect", "fixed"))
            if ad is not None and af is not None:
                entry["others_wait_ms"] = round(ad - af, 4)  # rank 0's extra all-reduce time: its wait
    if not a.no_record:
        entry["sessions"] = {}
        for v in prog.variants:
            name = session_name(prog, nproc, v)
            rc, _ = run_logged(record_command(prog, v, nproc, sessions / name), log, a.timeout)
            entry["sessions"][v] = name if (sessions / name).exists() else None
            if rc != 0:
                entry.setdefault("record_errors", {})[v] = f"kernelscope run exit {rc}"
    entry["wall_s"] = round(time.perf_counter() - t0, 1)
    return entry


def select(a: argparse.Namespace) -> list[Program]:
    progs = list(PROGRAMS)
    if a.programs:
        wanted = [n.strip() for n in a.programs.split(",") if n.strip()]
        unknown = sorted(set(wanted) - {p.name for p in progs})
        if unknown:
            raise SystemExit(f"unknown program(s) {', '.join(unknown)}; known: {', '.join(p.name for p in progs)}")
        progs = [p for p in progs if p.name in wanted]
    if a.ranks_only:
        progs = [p for p in progs if p.distributed]
    if a.single_only:
        progs = [p for p in progs if not p.distributed]
    if a.part:
        k, n = (int(x) for x in a.part.split("/"))
        progs = [p for i, p in enumerate(progs) if i % n == k - 1]
    return progs


def device_info(log: Log) -> tuple[str, int]:
    code = "import torch; print(torch.cuda.get_device_name(0)); print(torch.cuda.device_count())"
    rc, out = run_logged([sys.executable, "-c", code], log, 120)
    lines = out.strip().splitlines()
    if rc != 0 or len(lines) < 2:
        return "unknown (no CUDA)", 0
    return lines[-2], int(lines[-1])


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)


def tar_sessions(sessions: Path, out: Path) -> None:
    tmp = out / "sessions.tar.gz.tmp"
    with tarfile.open(tmp, "w:gz") as tar:
        for f in sorted(sessions.iterdir()):
            tar.add(f, arcname=f"sessions/{f.name}")
    tmp.replace(out / "sessions.tar.gz")


def table(results: dict) -> str:
    rows = ["| program | ranks | category | defect ms | fixed ms | real gain % | other ranks' wait ms | wall s |",
            "|---|---|---|---|---|---|---|---|"]
    for name, e in results["programs"].items():
        v = e.get("variants", {})

        def ms(key: str) -> str:
            t = v.get(key, {}).get("step_ms")
            return f"{t:.3f}" if t is not None else "-"

        first = "control" if "control" in v else "defect"
        gain = e.get("real_gain_pct")
        wait = e.get("others_wait_ms")
        rows.append(f"| {name} | {e['nproc']} | {e['category']} | {ms(first)} | {ms('fixed')} | "
                    f"{'-' if gain is None else f'{gain:.1f}'} | {'-' if wait is None else f'{wait:.3f}'} | "
                    f"{e.get('wall_s', '-')} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT"), help="output directory (default: $OUT)")
    ap.add_argument("--programs", help="comma-separated program names (default: all)")
    ap.add_argument("--ranks-only", action="store_true")
    ap.add_argument("--single-only", action="store_true")
    ap.add_argument("--part", help="K/N: only every N-th selected program starting at the K-th")
    ap.add_argument("--nproc", default="2,4", help="torchrun world sizes for the ranks programs (default 2,4)")
    ap.add_argument("--repeats", type=int, default=2, help="timing runs per variant, interleaved (default 2)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per process")
    ap.add_argument("--no-timing", action="store_true")
    ap.add_argument("--no-record", action="store_true")
    ap.add_argument("--tiny", action="store_true", help="tiny sizes: a smoke run of the pipeline (CPU), no numbers")
    a = ap.parse_args(argv)
    if a.tiny:
        TINY.append("--tiny")
    if not a.out:
        print("give --out DIR (or set OUT)", file=sys.stderr)
        return 2
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    log = Log(out / "measure.log")
    device, gpus = device_info(log)
    results = {"device": device, "gpus": gpus, "date": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
               "programs": {}}
    sessions = Path(tempfile.mkdtemp(prefix="kernelscope-program-sessions-"))
    try:
        for prog in select(a):
            for nproc in (tuple(int(n) for n in a.nproc.split(",")) if prog.distributed else (1,)):
                if nproc > max(gpus, 1):
                    results["programs"][entry_name(prog, nproc)] = {
                        "program": prog.name, "category": prog.category, "nproc": nproc,
                        "skipped": f"needs {nproc} GPUs, this machine has {gpus}"}
                    continue
                print(f"[measure] {entry_name(prog, nproc)} ...", flush=True)
                results["programs"][entry_name(prog, nproc)] = measure_one(prog, nproc, a, sessions, log, device)
                write_atomic(out / "program_timings.json", json.dumps(results, indent=1))
                if any(sessions.iterdir()):
                    tar_sessions(sessions, out)
    finally:
        write_atomic(out / "program_timings.json", json.dumps(results, indent=1))
        md = f"Device: {device} ({gpus} GPUs), {results['date']}\n\n{table(results)}\n"
        write_atomic(out / "program_timings.md", md)
        shutil.rmtree(sessions, ignore_errors=True)
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
