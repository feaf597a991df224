"""The counter pass: re-run the workload under ncu and merge what it measured.

Failures never lose the trace pass: they are recorded in
``session.collectors["counters"]`` with one sentence saying what to do.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from kernelscope.collect import driver
from kernelscope.collect.ncu.merge import merge, session_from_report, top_kernel_regex
from kernelscope.collect.ncu.fields import SECTIONS, SOURCE_SECTIONS
from kernelscope.collect.ncu.report_reader import NcuReportError, read_report
from kernelscope.collect.ncu.runner import NcuOptions, NcuRunError, run_ncu
from kernelscope.model import CollectorStatus, Session
from kernelscope.model import collectors as collector


@dataclass
class CounterRequest:
    top: int = 5
    kernel_regex: str | None = None
    region: str | None = None
    launch_skip: int = 0
    launch_count: int = 1
    clock_control: str = "none"
    ncu: str | None = None
    timeout_s: float | None = None
    steps: str | None = None  # "FIRST-LAST": only kernels launched in those steps (cudaProfilerStart/Stop)
    ranks: list[int] | None = None  # under torchrun: the ranks ncu profiles (None: all); rank_counters.py
    source: bool = False  # also per-line counters (SourceCounters, source imported): run --source


def device_arch(session: Session) -> str | None:
    """The session's GPU architecture (ncu's --arch wants it), else device 0's from the driver, else None."""
    if session.device and session.device.arch:
        return session.device.arch
    try:
        return driver.query_device(0).arch
    except driver.DriverUnavailable:
        return None


def report_path_for(session_path: Path) -> Path:
    name = session_path.name
    for suffix in (".json.gz", ".json"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return session_path.with_name(name + ".ncu-rep")


def run_counter_pass(session: Session, command: list[str], session_path: Path, req: CounterRequest,
                     on_line: Callable[[str], None] | None = None) -> bool:
    """Profile ``command`` under ncu and merge into ``session``; True when it worked, False when it failed or
    ncu died midway (then the results it wrote are merged and the status is "partial")."""
    regex = req.kernel_regex
    chose = "--kernel" if regex else None
    if regex is None and session.launches:
        regex = top_kernel_regex(session, req.top)
        chose = f"top {req.top} kernels by trace-pass time"
    arch = device_arch(session)
    opts = NcuOptions(kernel_regex=regex, region=req.region, launch_skip=req.launch_skip,
                      launch_count=req.launch_count, clock_control=req.clock_control, arch=arch,
                      timeout_s=req.timeout_s, ncu=req.ncu, source=req.source)
    if req.steps:
        from kernelscope.collect.trace.steps import STEPS_ENV, parse_steps

        # kernelscope.step() in the re-run workload brackets the window with cudaProfilerStart/Stop; ncu waits
        # for the start (a window from step 0 is profiled from the program's start instead).
        opts.env[STEPS_ENV] = req.steps
        opts.profile_from_start = parse_steps(req.steps)[0] == 0
    report = report_path_for(session_path)
    log = report.with_suffix(".ncu.log")
    details = {"sections": list(dict.fromkeys(SECTIONS + (SOURCE_SECTIONS if req.source else ()))),
               "kernel_filter": regex, "chosen_by": chose, "region": req.region,
               "launch_skip": req.launch_skip, "launch_count_per_config": req.launch_count,
               "clock_control": req.clock_control, "log": str(log),
               **({"steps": req.steps, "capture": "cudaProfilerStart/Stop around the steps"} if req.steps else {})}
    t0 = time.perf_counter()
    try:
        result = run_ncu(command, report, opts, log_path=log, on_line=on_line)
        parsed = read_report(result.report, partial=True)  # what ncu wrote before a crash still counts
    except (NcuRunError, NcuReportError) as e:
        session.collectors[collector.COUNTERS] = CollectorStatus("failed", str(e), details)
        return False
    details["wall_s"] = round(time.perf_counter() - t0, 3)
    details["kernels_profiled"] = len(parsed.kernels)
    details["report"] = str(result.report)
    session.artifacts["ncu_report"] = str(result.report)
    if session.launches:
        stats = merge(session, parsed, launch_skip=req.launch_skip)
        details.update(matched_by_config=stats.matched_by_config, matched_by_name=stats.matched_by_name,
                       unmatched=stats.unmatched)
    else:  # only ncu ran the program: its exit code is the workload's
        session_from_report(session, parsed)
        session.exit_code = result.exit_code
    lost = ([f"ncu was killed by signal {-result.exit_code} before it finished"] if result.exit_code < 0 else [])
    lost += [parsed.partial_note] if parsed.partial_note else [f"the {len(parsed.kernels)} results it wrote were kept"]
    if (
        result.exit_code < 0 or parsed.partial_note
    ):  # what ncu wrote before it died is kept, and the session says the rest is missing
        session.collectors[collector.COUNTERS] = CollectorStatus(
            "partial", "; ".join(lost), details)
        return False
    session.collectors[collector.COUNTERS] = CollectorStatus("ok", None, details)
    return True
