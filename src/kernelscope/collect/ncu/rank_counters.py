"""The counter pass under torchrun: one ncu per chosen rank, started inside that rank.

Why not one `ncu --target-processes all -- torchrun ...`: ncu 2025.3 can limit the processes it
profiles only by executable name (--target-processes-filter), and every rank is the same Python,
so it cannot pick ranks; its single report would also mix the ranks with nothing that names the
rank of a result. Instead `run` re-runs the torchrun command with the rank hook (collect/trace/
rank_hook/sitecustomize.py) first on PYTHONPATH and a spec file in $KERNELSCOPE_NCU_RANK_SPEC; in a
chosen rank the hook runs the rank's own command line (``sys.orig_argv``) under ncu (run_ncu, as
the one-process counter pass does) and exits with its exit code, so torchrun sees the rank as
before; ranks not chosen run unprofiled. Each chosen rank writes <session>.rank<R>.ncu-rep, merged
into that rank's launches.

NCCL kernels are never profiled: ncu replays a kernel on its own, and an NCCL kernel waits for its
peer ranks, which are not replaying it: it would never finish. ncu's filter (--kernel-name-base
function --kernel-name regex:...) names the kernels to profile exactly, from the rank's trace pass
with NCCL's left out; a rank whose trace pass saw no kernel gets a regex that refuses NCCL's names
(NO_NCCL_REGEX, a negative look-ahead).
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from kernelscope.collect.ncu.counter_pass import CounterRequest, device_arch, report_path_for
from kernelscope.collect.ncu.fields import SECTIONS
from kernelscope.model import CollectorStatus, Launch, Session
from kernelscope.model import collectors as collector
from kernelscope.model.names import short_kernel_name

SPEC_ENV = "KERNELSCOPE_NCU_RANK_SPEC"  # the spec file the rank hook reads
WRAPPED_ENV = "KERNELSCOPE_NCU_WRAPPED"  # set in a profiled rank: the Python ncu starts is not wrapped again
NCCL_NAME_REGEX = r"nccl(?:Dev)?Kernel"  # NCCL 2.x kernel function names: ncclDevKernel_..., ncclKernel_...
NO_NCCL_REGEX = rf"^(?!{NCCL_NAME_REGEX})"
NCCL_NOTE = ("NCCL kernels are never profiled: ncu's kernel replay re-runs one kernel alone, and an NCCL kernel "
             "waits for its peer ranks, which are not replaying it (it would deadlock); ncu's --kernel-name filter "
             "leaves them out")
MODE = "one ncu per chosen rank, started inside the rank by kernelscope's rank hook"


def rank_report_path(session_path: Path, rank: int) -> Path:
    base = report_path_for(session_path)
    return base.with_name(f"{base.name[: -len('.ncu-rep')]}.rank{rank}.ncu-rep")


def is_nccl(name: str) -> bool:
    return re.match(NCCL_NAME_REGEX, short_kernel_name(name)) is not None


def rank_kernel_filter(session: Session, rank: int, req: CounterRequest) -> tuple[str | None, str, list[str]]:
    """(ncu regex over function names, how the kernels were chosen, NCCL kernels left out) for one rank.

    The regex names the chosen kernels exactly (``^(?:a|b)$``): the top N by this rank's trace-pass time,
    or those --kernel matches (re.search, as ncu's regex: does), NCCL's never. None: nothing to profile."""
    totals: dict[str, int] = defaultdict(int)
    for x in session.launches:
        if (x.rank or 0) == rank:
            totals[short_kernel_name(x.kernel)] += x.duration_ns
    if not totals:
        return NO_NCCL_REGEX, "every kernel but NCCL's (the rank's trace pass saw no kernel to choose from)", []
    nccl = sorted(n for n in totals if is_nccl(n))
    if req.kernel_regex:
        matched = [n for n in totals if re.search(req.kernel_regex, n)]
        chosen = [n for n in matched if n not in nccl]
        nccl = [n for n in matched if n in nccl]
        how = f"--kernel {req.kernel_regex!r} over the rank's trace-pass kernels"
    else:
        chosen = sorted((n for n in totals if n not in nccl), key=lambda n: -totals[n])[: req.top]
        how = f"top {req.top} kernels by the rank's trace-pass time, NCCL's left out"
    if not chosen:
        return None, how, nccl
    return "^(?:" + "|".join(re.escape(n) for n in sorted(chosen)) + ")$", how, nccl


# -- inside a rank (called by the rank hook) ------------------------------------------------------------


def profile_this_rank() -> None:
    """In a chosen rank: run this process's command line under ncu and exit with its exit code.
    Returns (and the rank runs unprofiled) when this rank is not chosen."""
    spec = json.loads(Path(os.environ[SPEC_ENV]).read_text())
    entry = spec["ranks"].get(os.environ.get("RANK", ""))
    if entry is None:
        return
    from kernelscope.collect.ncu.runner import NcuOptions, NcuRunError, run_ncu

    os.environ[WRAPPED_ENV] = "1"  # inherited by the Python ncu starts (and its children): they run as they are
    # Ctrl-C reaches every process of the rank (torchrun signals the process group): ncu and the workload end,
    # this process waits for them and reports; a handler, not SIG_IGN, so the children keep the default action
    signal.signal(signal.SIGINT, lambda *_: None)
    command = [sys.executable, *sys.orig_argv[1:]]
    result: dict[str, Any] = {"rank": int(os.environ["RANK"]), "report": None, "error": None, "exit_code": None}
    t0 = time.perf_counter()

    def echo(line: str) -> None:
        sys.stdout.write(line)
        sys.stdout.flush()

    try:
        r = run_ncu(command, Path(entry["report"]), NcuOptions(**entry["options"]), log_path=Path(entry["log"]),
                    on_line=echo)
        result.update(report=str(r.report), exit_code=r.exit_code)
    except NcuRunError as e:
        result.update(error=str(e), exit_code=1)
    except Exception as e:  # never a traceback from inside the user's job: the parent says what happened
        result.update(error=f"the counter pass failed inside the rank ({type(e).__name__}: {e})", exit_code=1)
    result["wall_s"] = round(time.perf_counter() - t0, 3)
    Path(entry["result"]).write_text(json.dumps(result))
    sys.stdout.flush()
    rc = result["exit_code"]
    os._exit(128 - rc if rc < 0 else rc)


# -- in `kernelscope run` ---------------------------------------------------------------------------------


def run_rank_counter_pass(session: Session, command: list[str], session_path: Path, req: CounterRequest) -> bool:
    """Re-run the torchrun job with the chosen ranks under ncu and merge each rank's results into its launches.
    True when every chosen rank was profiled."""
    from kernelscope.collect.ncu.runner import NcuRunError, find_ncu
    from kernelscope.collect.trace.torchrun import hook_env

    present = sorted(r.rank for r in session.ranks) or [0]
    chosen = present if req.ranks is None else [r for r in req.ranks if r in present]
    absent = [] if req.ranks is None else [r for r in req.ranks if r not in present]
    details: dict[str, Any] = {"mode": MODE, "nccl": NCCL_NOTE, "sections": list(SECTIONS),
                               "ranks_requested": "all" if req.ranks is None else list(req.ranks),
                               "ranks_profiled": [], "region": req.region, "launch_skip": req.launch_skip,
                               "launch_count_per_config": req.launch_count, "clock_control": req.clock_control,
                               "per_rank": {}}
    notes = [f"rank {r} is not in the session (its ranks: {', '.join(map(str, present))}); not profiled"
             for r in absent]
    if not chosen:
        session.collectors[collector.COUNTERS] = CollectorStatus("failed", "; ".join(notes), details)
        return False
    try:
        ncu = find_ncu(req.ncu)
    except NcuRunError as e:
        session.collectors[collector.COUNTERS] = CollectorStatus("failed", str(e), details)
        return False
    arch = device_arch(session)
    work = Path(session_path).parent
    spec: dict[str, Any] = {"ranks": {}}
    for r in chosen:
        regex, how, nccl = rank_kernel_filter(session, r, req)
        report = rank_report_path(session_path, r)
        per = {"kernel_filter": regex, "chosen_by": how, "nccl_left_out": nccl, "report": str(report),
               "log": str(report.with_suffix(".ncu.log"))}
        details["per_rank"][str(r)] = per
        if regex is None:
            per["status"] = "not-run"
            notes.append(f"rank {r}: no kernel other than NCCL's to profile ({how})")
            continue
        options = {"kernel_regex": regex, "region": req.region, "launch_skip": req.launch_skip,
                   "launch_count": req.launch_count, "clock_control": req.clock_control, "arch": arch,
                   "timeout_s": req.timeout_s, "ncu": ncu, "source": req.source}
        spec["ranks"][str(r)] = {"report": str(report), "log": per["log"], "options": options,
                                 "result": str(work / f".{report.name}.{os.getpid()}.result.json")}
    if spec["ranks"]:
        exit_code = _run_job(command, spec, session_path, hook_env)
        details["torchrun_exit_code"] = exit_code
    for r_text, entry in spec["ranks"].items():
        _merge_rank(session, int(r_text), entry, details["per_rank"][r_text], req, notes)
    profiled = [int(r) for r, per in details["per_rank"].items() if per.get("status") in ("ok", "partial")]
    details["ranks_profiled"] = profiled
    details["kernels_profiled"] = sum(per.get("kernels_profiled", 0) for per in details["per_rank"].values())
    for r in profiled:
        session.artifacts[f"ncu_report_rank{r}"] = details["per_rank"][str(r)]["report"]
    if profiled:
        session.artifacts.setdefault("ncu_report", details["per_rank"][str(profiled[0])]["report"])
    status = "ok" if profiled and not notes else ("partial" if profiled else "failed")
    session.collectors[collector.COUNTERS] = CollectorStatus(status, "; ".join(notes) or None, details)
    return status == "ok"


def _run_job(command: list[str], spec: dict[str, Any], session_path: Path, hook_env) -> int:
    spec_path = Path(session_path).parent / f".{Path(session_path).name}.{os.getpid()}.ncu-ranks.json"
    spec_path.write_text(json.dumps(spec))
    env = hook_env()
    env[SPEC_ENV] = str(spec_path)
    env.pop(WRAPPED_ENV, None)
    try:
        proc = subprocess.Popen(command, env=env)
        while True:
            try:
                return _exit_code(proc.wait())
            except KeyboardInterrupt:  # torchrun passes Ctrl-C on to the ranks; what they wrote is merged
                continue
    finally:
        spec_path.unlink(missing_ok=True)


def _exit_code(rc: int) -> int:
    return 128 - rc if rc < 0 else rc


def _merge_rank(session: Session, rank: int, entry: dict[str, Any], per: dict[str, Any], req: CounterRequest,
                notes: list[str]) -> None:
    from kernelscope.collect.ncu.merge import merge
    from kernelscope.collect.ncu.report_reader import NcuReportError, read_report

    result_path = Path(entry["result"])
    try:
        result = json.loads(result_path.read_text())
    except (OSError, ValueError):
        per["status"] = "failed"
        notes.append(f"rank {rank}: its process left no counter-pass result (it did not start, or was killed)")
        return
    finally:
        result_path.unlink(missing_ok=True)
    per["wall_s"] = result.get("wall_s")
    if result.get("error"):
        per["status"] = "failed"
        notes.append(f"rank {rank}: {result['error'].rstrip('.')}")
        return
    try:
        parsed = read_report(Path(result["report"]), partial=True)
    except NcuReportError as e:
        per["status"] = "failed"
        notes.append(f"rank {rank}: {str(e).rstrip('.')}")
        return
    mine = [x for x in session.launches if (x.rank or 0) == rank]
    view = Session(command=session.command, device=session.device, launches=list(mine))
    stats = merge(view, parsed, launch_skip=req.launch_skip)
    added: list[Launch] = view.launches[len(mine):]  # results no trace-pass launch matched: launches of their own
    for x in added:
        x.rank = rank if session.ranks else x.rank
    session.launches.extend(added)
    per.update(status="ok", kernels_profiled=len(parsed.kernels), matched_by_config=stats.matched_by_config,
               matched_by_name=stats.matched_by_name, unmatched=stats.unmatched)
    if result.get("exit_code", 0) < 0 or parsed.partial_note:
        per["status"] = "partial"
        notes.append(f"rank {rank}: " + (parsed.partial_note or f"ncu was killed by signal {-result['exit_code']}"))
