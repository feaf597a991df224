"""Run a command under Nsight Compute (`ncu`) as a subprocess.

Only the sections the panels need, only the kernels that matter, clocks left
alone by default (--clock-control none). Failures become NcuRunError with one
sentence saying what happened and what to do.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from kernelscope.collect.ncu.fields import EXTRA_METRICS, SECTIONS, SOURCE_SECTIONS
from kernelscope.model.files import OutputFileError, place_file, write_atomic

PERMISSION_MARKER = "ERR_NVGPUCTRPERM"


class NcuRunError(Exception):
    """The counter pass could not run or produced no report; one sentence for the user."""


@dataclass
class NcuOptions:
    kernel_regex: str | None = None  # matched against ncu's "function" name base
    region: str | None = None  # NVTX push/pop range (kernelscope.region)
    launch_skip: int = 0
    launch_count: int | None = 1
    per_launch_config: bool = True  # skip/count apply per (kernel, grid, block, smem)
    clock_control: str = "none"  # "none" keeps the clocks as found; "base" locks base clocks
    arch: str | None = None  # picks the extra metrics the chip has
    timeout_s: float | None = None
    ncu: str | None = None  # path to ncu; default: on PATH
    extra_args: list[str] = field(default_factory=list)
    profile_from_start: bool = True  # False: only between cudaProfilerStart and cudaProfilerStop (run --steps)
    env: dict[str, str] = field(default_factory=dict)  # added to the workload's environment
    source: bool = False  # also SourceCounters (per-line counters) with the source imported (run --source)


def find_ncu(explicit: str | None = None) -> str:
    if explicit:
        if shutil.which(explicit) or os.path.isfile(explicit):
            return explicit
        raise NcuRunError(f"ncu was not found at {explicit!r}")
    found = shutil.which("ncu")
    if found is None:
        for cand in ("/usr/local/cuda/bin/ncu", "/opt/nvidia/nsight-compute/ncu"):
            if os.path.isfile(cand):
                return cand
        raise NcuRunError("ncu (Nsight Compute) is not on PATH; install Nsight Compute or pass --ncu PATH")
    return found


def build_command(ncu: str, report: Path, command: list[str], opts: NcuOptions) -> list[str]:
    argv = [ncu, "--clock-control", opts.clock_control, "--import-source", "yes" if opts.source else "no",
            "-f", "-o", str(report)]
    for s in dict.fromkeys(SECTIONS + (SOURCE_SECTIONS if opts.source else ())):
        argv += ["--section", s]
    extra = EXTRA_METRICS.get(opts.arch or "", ())
    if extra:
        argv += ["--metrics", ",".join(extra)]
    if opts.kernel_regex:
        argv += ["--kernel-name-base", "function", "--kernel-name", f"regex:{opts.kernel_regex}"]
    if opts.region:
        argv += ["--nvtx", "--nvtx-include", f"{opts.region}/"]
    if not opts.profile_from_start:
        argv += ["--profile-from-start", "off"]
    if opts.per_launch_config:
        argv += ["--filter-mode", "per-launch-config"]
    if opts.launch_skip:
        argv += ["--launch-skip", str(opts.launch_skip)]
    if opts.launch_count is not None:
        argv += ["--launch-count", str(opts.launch_count)]
    return argv + list(opts.extra_args) + ["--", *command]


@dataclass
class NcuRunResult:
    report: Path
    exit_code: int
    log: str


def run_ncu(command: list[str], report: Path, opts: NcuOptions, log_path: Path | None = None,
            on_line: Callable[[str], None] | None = None) -> NcuRunResult:
    """Run; every output line (ncu's ==PROF== progress and the workload's own
    output) goes to ``log_path`` and, one by one, to ``on_line``."""
    ncu = find_ncu(opts.ncu)
    rep = report if report.name.endswith(".ncu-rep") else report.with_suffix(".ncu-rep")
    # ncu writes a temporary report beside the real one, renamed over it only once ncu wrote something:
    # a counter pass that fails before then leaves the previous report as it was (model/files.py's rule).
    temp_base = rep.parent / f".{rep.stem}.{os.getpid()}.partial"
    temp_rep = temp_base.with_name(temp_base.name + ".ncu-rep")
    try:
        return _run_ncu(ncu, command, rep, temp_base, temp_rep, opts, log_path, on_line)
    finally:
        temp_rep.unlink(missing_ok=True)


def _run_ncu(ncu: str, command: list[str], rep: Path, temp_base: Path, temp_rep: Path, opts: NcuOptions,
             log_path: Path | None, on_line: Callable[[str], None] | None) -> NcuRunResult:
    argv = build_command(ncu, temp_base, command, opts)
    try:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                errors="replace", bufsize=1, env={**os.environ, **opts.env} if opts.env else None)
    except OSError as e:
        raise NcuRunError(f"ncu could not start ({e.strerror})") from None
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        proc.kill()

    timer = threading.Timer(opts.timeout_s, kill) if opts.timeout_s else None
    if timer:
        timer.start()
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if on_line:
                on_line(line)
        rc = proc.wait()
    finally:
        if timer:
            timer.cancel()
    log = "".join(lines)
    _write(log_path, log)
    where = f" (log: {log_path})" if log_path else ""
    if timed_out.is_set():
        raise NcuRunError(f"ncu did not finish within {opts.timeout_s:g} s and was stopped; narrow it with --kernel, "
                          f"--top or --launch-count, or raise --ncu-timeout{where}")
    if PERMISSION_MARKER in log:
        raise NcuRunError("ncu has no permission to read the GPU performance counters (ERR_NVGPUCTRPERM); run as "
                          "root or allow it with the nvidia driver option NVreg_RestrictProfilingToAdminUsers=0")
    if not temp_rep.exists() or temp_rep.stat().st_size == 0:
        if "No kernels were profiled" in log:
            raise NcuRunError(f"ncu profiled no kernels: nothing matched the filters{where}")
        why = f"was killed by signal {-rc}" if rc < 0 else f"exited with code {rc}"
        raise NcuRunError(f"ncu {why} and wrote no report{where}")
    try:
        with open(temp_rep, "rb") as f:  # on disk before the name points at it, as model.files does
            os.fsync(f.fileno())
        place_file(temp_rep, rep, force=True)  # run checked the name; a device or FIFO there is still refused
    except (OSError, OutputFileError) as e:
        raise NcuRunError(f"the ncu report could not be moved to {rep} ({getattr(e, 'strerror', None) or e})") from None
    return NcuRunResult(report=rep, exit_code=rc, log=log)


def _write(path: Path | None, text: str) -> None:
    if path is not None:
        write_atomic(path, text.encode())
