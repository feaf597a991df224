"""`learn marlin`'s hot lines: the W4A16 kernel's source lines ranked by warp samples from an Nsight Compute
counter pass with per-line counters, each labelled with the phase its SASS opcodes belong to (the loads, the
unpack, the MMA, the write-back).

On a GPU with ncu, one launch of the kernel, run as learn runs it, is profiled under ncu with the source sections
(`run --counters --source`'s pass). Without a GPU or ncu, or when that pass fails, the lines recorded on an H100
and bundled with kernelscope are shown, and a sentence says so. A --session that carries per-line counters for
the kernel is shown as it is.
"""
from __future__ import annotations

import gzip
import json
import os
import sys
import tempfile
from importlib import resources
from pathlib import Path
from typing import Any

from kernelscope.model import Session

BUNDLED_SOURCE = "marlin_source_h100.json.gz"  # `kernelscope import` of record_source.sh's w4a16_learn report
KERNEL = "w4a16"  # the kernel's name contains it (Triton's _w4a16_kernel)
TOP = 12


def _with_lines(session: Session):
    return next((x for x in session.detailed_launches() if x.source_lines is not None and KERNEL in x.kernel), None)


def bundled_session() -> Session:
    """The bundled pass, its kernelscope source files pointed at this installation's copies, so that `show`'s
    checksum test says when the shipped kernel changed since the pass was recorded."""
    import kernelscope

    raw = resources.files("kernelscope").joinpath("data", BUNDLED_SOURCE).read_bytes()
    session = Session.from_dict(json.loads(gzip.decompress(raw)))
    package = Path(kernelscope.__file__).parent
    for x in session.detailed_launches():
        for f in x.source_lines.files if x.source_lines is not None else []:
            if "/kernelscope/" in f.path:
                here = package / f.path.rsplit("/kernelscope/", 1)[1]
                f.path = os.path.relpath(here) if here.is_relative_to(Path.cwd()) else str(here)
    return session


def _installed_sha256(session: Session) -> dict[str, str]:
    """SHA-256 of the bundled pass's files that bundled_session pointed at this installation (kernelscope's own
    files, not paths a session chose), by path."""
    import kernelscope
    from kernelscope.analyze.source_lines import source_files
    from kernelscope.collect.source_files import files_sha256

    package = Path(kernelscope.__file__).resolve().parent
    own = [f.path for f in source_files(session) if Path(f.path).resolve().is_relative_to(package)]
    return files_sha256(own)[0]


def live_session(plan: Any) -> tuple[Session | None, str | None]:
    """(session with the kernel's per-line counters, None), or (None, why not) when the pass could not run."""
    from kernelscope.collect.child_python import isolated_code
    from kernelscope.collect.ncu.counter_pass import CounterRequest, run_counter_pass
    from kernelscope.collect.trace.api import new_session
    from kernelscope.kernels.marlin.plan import GEMM_REGION
    from kernelscope.model import collectors as collector

    code = ("from kernelscope.kernels.marlin.plan import GemmPlan\n"
            "from kernelscope.kernels.marlin.workload import main\n"
            f"main(GemmPlan.from_dict({plan.to_dict()!r}))\n")
    session = new_session(["kernelscope", "learn", "marlin", "(counter pass)"])
    print("kernelscope: profiling one W4A16 launch under ncu for its hot lines (source counters)...", file=sys.stderr)
    with tempfile.TemporaryDirectory() as d:
        req = CounterRequest(kernel_regex=KERNEL, region=GEMM_REGION, launch_count=1, source=True)
        ok = run_counter_pass(session, isolated_code(code), Path(d) / "learn.json", req)
    status = session.collectors.get(collector.COUNTERS)
    if ok and _with_lines(session) is not None:
        return session, None
    reason = status.reason if status is not None and status.reason else "the report had no per-line counters"
    return None, reason


def _shape(plan: Any) -> tuple[int, int, int]:
    return plan.m, plan.k, plan.n


def hot_lines_parts(plan: Any, live: bool, given: Session | None = None, bundled_plan: Any = None) -> list[Any]:
    """What learn prints after the phases: a sentence saying where the lines come from, and the lines' panel."""
    from kernelscope.analyze.source_lines import line_phase, rank_lines
    from kernelscope.model import collectors as collector
    from kernelscope.render.source_view import SourcePanel, plain

    session, why = (given, None) if given is not None and _with_lines(given) is not None else (None, None)
    if session is None and live:
        session, why = live_session(plan)
    note = None
    if session is None:
        if bundled_plan is not None and _shape(plan) != _shape(bundled_plan):
            m, k, n = _shape(bundled_plan)
            return [plain(f"Hot lines: none here; the bundled counter pass is of m={m}, k={k}, n={n} only"
                          + (f", and the live pass did not run ({why})." if why else "."))]
        session = bundled_session()
        device = session.device.name if session.device else "a GPU"
        status = session.collectors.get(collector.COUNTERS)
        when = str(status.details.get("report_created_utc") or "")[:10] if status is not None else ""
        note = ("Hot lines below: an Nsight Compute counter pass of one launch of this kernel at this shape, "
                f"recorded on {device}"
                + (f" on {when}" if when else "") + " and bundled with kernelscope"
                + (f"; the live pass did not run ({why})." if why else "."))
    x = _with_lines(session)
    k = rank_lines(x.kernel, 0, x.source_lines, top=TOP, disk_sha256=_installed_sha256(session) if note else None)
    k.notes.insert(0, "The W4A16 kernel's lines by share of warp samples; phase: what the opcodes of the line's "
                      "executed SASS instructions do.")
    panel = SourcePanel(k, tag=lambda r: line_phase(r.line), tag_name="phase (SASS)",
                        title=f"Hot lines · {x.kernel}")
    return ([plain(note)] if note else []) + [panel]
