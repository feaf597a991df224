"""Calibrate kernelscope's diagnosis against the defect suite (needs a GPU, ncu and nvcc).

    PYTHONPATH=src python benchmarks/diagnosis/calibrate.py --out OUT [--work DIR] [--half tuning|check|all]
        [--cases a,b]

--half picks the suite half (default tuning: the issue-14 cases; check: the issue-35 variants the
rules were never tuned on; all: both, too long for one 10-minute GPU command); --cases a subset,
which must lie in --half when both are given. The table scores each half apart.

1. checks and times every case in this process: each variant's result against the torch
   reference and against the other variant, then CUDA-event medians of --repeats calls,
   defect and fixed interleaved, L2 flushed before each call where the case says so
   (kernelscope.collect.timing.time_cuda_interleaved);
2. records every case and variant with
   `python -m kernelscope run --counters --region CASE -- python suite/run_case.py CASE VARIANT`
   into WORK/sessions/CASE_VARIANT.json.gz (counter pass limited to the case's region);
3. analyses each session as `show --json` does and writes the table
   (OUT/diagnosis_table.json and .md; table.py), packs the sessions trimmed to the case's
   kernels and the run logs into OUT/diagnosis_sessions.tar.gz and the ncu reports into
   OUT/diagnosis_ncu_reports.tar.gz (left out if too large).
A case that fails anywhere (compile error, wrong result, ncu error) is a row saying so; the
run goes on. Progress goes to stdout with elapsed seconds.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import subprocess
import sys
import tarfile
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for p in (ROOT, ROOT / "src"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

from benchmarks.diagnosis.suite.config import CASE_BY_NAME, HALVES, CaseSpec, cases_of  # noqa: E402

RUN_CASE = HERE / "suite" / "run_case.py"
MAX_PACK_BYTES = 15 * 1024 * 1024  # what comes back from the GPU machine: 16 MiB per file
T0 = time.perf_counter()


def say(msg: str) -> None:
    print(f"[{time.perf_counter() - T0:7.1f}s] {msg}", flush=True)


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    parts = [str(ROOT / "src"), str(ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(parts))
    env["PYTHONUNBUFFERED"] = "1"
    return env


def _first_line(cmd: list[str]) -> str | None:
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    lines = [x for x in (r.stdout or "").strip().splitlines() if x.strip()]
    return lines[-1].strip() if r.returncode == 0 and lines else None


def environment() -> dict:
    import torch
    import triton

    return {"device": torch.cuda.get_device_name(), "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d"),
            "driver": _first_line(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"]),
            "torch": torch.__version__, "triton": triton.__version__, "ncu": _first_line(["ncu", "--version"]),
            "nvcc": _first_line(["nvcc", "--version"]),
            "kernelscope_commit": _first_line(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"])}


# ---------------------------------------------------------------- 1. check and time

def check_and_time(spec: CaseSpec, repeats: int) -> dict:
    """{variant: Timing dict | {"error": ...}} plus "check" notes; never raises."""
    import torch

    from benchmarks.diagnosis.suite.cases import prepare
    from kernelscope.collect.timing import time_cuda_interleaved

    out: dict = {}
    prepared = {}
    try:
        for v in spec.variants:
            p = prepare(spec, v, "cuda", "full")
            for _ in range(2):
                p.run()
            torch.cuda.synchronize()
            p.check()
            prepared[v] = p
        if len(prepared) == 2:  # defect and fixed: the same result, to the case's tolerance
            a, b = (prepared[v].result().float() for v in spec.variants)
            tol = prepared[spec.variants[0]]
            if not torch.allclose(a, b, atol=tol.atol, rtol=tol.rtol):
                raise AssertionError(f"defect and fixed differ by {(a - b).abs().max().item():.3g}")
        timings = time_cuda_interleaved({v: p.run for v, p in prepared.items()}, warmup=3, repeats=repeats,
                                        flush_l2=spec.flush_l2)
        for v, t in timings.items():
            out[v] = {**t.to_dict(), "info": {k: str(x) for k, x in prepared[v].info.items()}}
    except Exception as e:  # the case's row says what went wrong; the suite goes on
        err = f"{type(e).__name__}: {e}".strip()[:500]
        for v in spec.variants:
            out.setdefault(v, {"error": err})
        say(f"  {spec.name}: FAILED: {err}")
        traceback.print_exc(file=sys.stdout)
    finally:
        prepared.clear()
        torch.cuda.empty_cache()
    return out


# ---------------------------------------------------------------- 2. counter pass

def record(spec: CaseSpec, variant: str, work: Path, steps: int, ncu_timeout: float) -> tuple[Path | None, str]:
    """Run the case under `kernelscope run --counters`; (session path or None, one-line status)."""
    sessions, logs = work / "sessions", work / "logs"
    sessions.mkdir(parents=True, exist_ok=True)
    logs.mkdir(parents=True, exist_ok=True)
    out = sessions / f"{spec.name}_{variant}.json.gz"
    cmd = [sys.executable, "-m", "kernelscope", "run", "--counters", "--region", spec.name, "--top", "50",
           "--ncu-timeout", str(ncu_timeout), "-f", "-o", str(out), "--",
           sys.executable, str(RUN_CASE), spec.name, variant, "--repeats", str(steps)]
    t = time.perf_counter()
    with open(logs / f"{spec.name}_{variant}.log", "w") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        try:
            r = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=child_env(), cwd=str(ROOT),
                               timeout=ncu_timeout + 60)
            rc = r.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    took = time.perf_counter() - t
    tail = (logs / f"{spec.name}_{variant}.log").read_text(errors="replace").strip().splitlines()[-1:] or [""]
    status = f"rc={rc} in {took:.1f}s" + ("" if rc == 0 else f": {tail[0][:300]}")
    return (out if out.exists() else None), status


# ---------------------------------------------------------------- 3. table and packing

def load_sessions(cases: list[CaseSpec], work: Path, statuses: dict) -> dict:
    from kernelscope.model import Session, SessionFileError

    sessions: dict = {}
    for spec in cases:
        for v in spec.variants:
            path = work / "sessions" / f"{spec.name}_{v}.json.gz"
            status = statuses.get((spec.name, v))
            if (status or "").startswith("skipped") or not path.exists():
                sessions[(spec.name, v)] = f"no session written ({status or 'not recorded'})"
                continue
            try:
                s = Session.load(path)
            except SessionFileError as e:
                sessions[(spec.name, v)] = f"session unreadable: {e}"
                continue
            counters = s.collectors.get("counters")
            if counters is None or counters.status != "ok":
                statuses[(spec.name, v)] = (f"counter pass {counters.status}: {counters.reason}" if counters
                                            else "no counter pass in the session")
            sessions[(spec.name, v)] = s
    return sessions


def pack(out_file: Path, files: list[tuple[Path, str]]) -> str:
    with tarfile.open(out_file, "w:gz") as tar:
        for path, name in files:
            tar.add(path, arcname=name)
    size = out_file.stat().st_size
    if size > MAX_PACK_BYTES:
        out_file.unlink()
        return f"{out_file.name} left out: {size / 2**20:.1f} MiB is over {MAX_PACK_BYTES / 2**20:.0f} MiB"
    return f"{out_file.name}: {size / 2**20:.2f} MiB, {len(files)} files"


def write_outputs(cases: list[CaseSpec], work: Path, out: Path, timings: dict, statuses: dict, meta: dict,
                  ceilings_for) -> list:
    """Analyse the sessions in WORK/sessions, write the table (JSON, markdown) to OUT and pack
    the trimmed sessions, logs and timings (and the ncu reports) into OUT; the rows."""
    from benchmarks.diagnosis.table import Row, build_rows, diagnose, markdown, table_json, trim_session

    sessions = load_sessions(cases, work, statuses)
    rows = build_rows(cases, sessions, timings, ceilings_for)
    meta["wall_s"] = round(time.perf_counter() - T0, 1)
    meta["statuses"] = {f"{c}/{v}": s for (c, v), s in statuses.items()}
    trimmed_dir = work / "trimmed"
    trimmed_dir.mkdir(parents=True, exist_ok=True)
    files, reports = [], []
    for (case, v), s in sessions.items():
        if isinstance(s, str):
            continue
        t = trim_session(s, case)
        path = t.save(trimmed_dir / f"{case}_{v}.json.gz")
        files.append((path, f"sessions/{path.name}"))
        # the trimmed file must tell the same story as the full one: say so in the row when it does not
        spec = CASE_BY_NAME.get(case) or next(c for c in cases if c.name == case)
        full_row = next(r for r in rows if r.case == case and r.variant == v)
        again = diagnose(Row(case, v, spec.category, spec.expected_text), t, spec.expected_rules, ceilings_for(t))
        if (again.top_rule, again.top_gain_pct, again.bound) != (full_row.top_rule, full_row.top_gain_pct,
                                                                   full_row.bound):
            full_row.error = "; ".join(x for x in (full_row.error, f"trimmed session differs: top {again.top_rule} "
                                                   f"{again.top_gain_pct}, bound {again.bound}") if x)
        rep = work / "sessions" / f"{case}_{v}.ncu-rep"
        if rep.exists():
            reports.append((rep, f"ncu/{rep.name}"))
    files += [(p, f"logs/{p.name}") for p in sorted((work / "logs").glob("*.log"))]
    if (work / "timings.json").exists():
        files.append((work / "timings.json", "timings.json"))
    out.mkdir(parents=True, exist_ok=True)
    (out / "diagnosis_table.json").write_text(json.dumps(table_json(rows, meta), indent=1, default=str))
    (out / "diagnosis_table.md").write_text(markdown(rows, meta))
    say(pack(out / "diagnosis_sessions.tar.gz", files))
    if reports:
        say(pack(out / "diagnosis_ncu_reports.tar.gz", reports))
    return rows


def select_cases(cases_arg: str | None, half: str | None) -> list[CaseSpec]:
    """The cases --cases and --half name (ValueError with the reason for an unknown case or a case of
    another half); neither given: the tuning half, as before the suite had halves."""
    if half is None and not cases_arg:
        half = "tuning"
    pool = list(cases_of(None if half in (None, "all") else half))
    if not cases_arg:
        return pool
    names = [n.strip() for n in cases_arg.split(",") if n.strip()]
    unknown = [n for n in names if n not in CASE_BY_NAME]
    if unknown:
        raise ValueError(f"unknown case(s) {', '.join(unknown)}; cases: {', '.join(CASE_BY_NAME)}")
    in_pool = {c.name for c in pool}
    other = [n for n in names if n not in in_pool]
    if other:
        raise ValueError(f"case(s) {', '.join(other)} not in the {half} half")
    return [CASE_BY_NAME[n] for n in dict.fromkeys(names)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path, help="where the table and packed sessions go")
    ap.add_argument("--work", type=Path, default=Path("/tmp/ks_diagnosis"), help="raw sessions, reports, logs")
    ap.add_argument("--half", choices=(*HALVES, "all"), default=None,
                    help="suite half: tuning (default without --cases), check, or all")
    ap.add_argument("--cases", help=f"comma-separated subset of: {', '.join(CASE_BY_NAME)}")
    ap.add_argument("--repeats", type=int, default=30, help="timed repeats per variant (default 30)")
    ap.add_argument("--steps", type=int, default=3, help="steps inside the region in each recorded run (default 3)")
    ap.add_argument("--ncu-timeout", type=float, default=120.0, help="seconds per counter pass (default 120)")
    ap.add_argument("--budget-s", type=float, default=450.0,
                    help="stop starting counter runs when the next would end past this many seconds from the start "
                         "(default 450; the rest become rows saying so, and the table is still written)")
    ap.add_argument("--skip-timing", action="store_true")
    ap.add_argument("--skip-counters", action="store_true", help="build the table from sessions already in --work")
    args = ap.parse_args(argv)
    try:
        cases = select_cases(args.cases, args.half)
    except ValueError as e:
        print(f"calibrate: error: {e}.", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("calibrate: error: no CUDA device: the calibration harness needs a GPU.", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)
    meta = environment()
    say(f"device {meta['device']}, driver {meta['driver']}, torch {meta['torch']}, triton {meta['triton']}, "
        f"ncu {meta['ncu']}; {len(cases)} cases")

    timings_path = args.work / "timings.json"
    timings: dict = json.loads(timings_path.read_text()) if args.skip_timing and timings_path.exists() else {}
    if not args.skip_timing:
        say("== 1. check and time (CUDA events, interleaved)")
        for spec in cases:
            timings[spec.name] = check_and_time(spec, args.repeats)
            line = ", ".join(f"{v} {t['median_ms']:.4g} ms" if "median_ms" in t else f"{v} error"
                             for v, t in timings[spec.name].items())
            say(f"  {spec.name}: {line}")
        timings_path.write_text(json.dumps(timings, indent=1))

    statuses: dict = {}
    if not args.skip_counters:
        say("== 2. kernelscope run --counters --region CASE, per case and variant")
        took: list[float] = []
        for spec in cases:
            for v in spec.variants:
                elapsed = time.perf_counter() - T0
                expect = 1.5 * max(took) if took else 30.0
                if elapsed + expect > args.budget_s:
                    statuses[(spec.name, v)] = (f"skipped: time budget ({elapsed:.0f} s used, the next run would "
                                                f"end past --budget-s {args.budget_s:.0f}); run it with --cases "
                                                f"{spec.name}")
                else:
                    t = time.perf_counter()
                    _, statuses[(spec.name, v)] = record(spec, v, args.work, args.steps, args.ncu_timeout)
                    took.append(time.perf_counter() - t)
                say(f"  {spec.name} {v}: {statuses[(spec.name, v)]}")

    say("== 3. analysis and table")
    from benchmarks.diagnosis.table import markdown
    from kernelscope.cli.calibrate import ceilings_for_session

    rows = write_outputs(cases, args.work, args.out, timings, statuses, meta, ceilings_for_session)
    print(markdown(rows, meta))
    say(f"done: {args.out}/diagnosis_table.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
