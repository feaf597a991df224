"""One report of a session: the single place where a session is summarised, its kernels selected and
every analysis run. Every renderer (terminal, show --json, Chrome trace, roofline PNG, HTML) takes a
``Report`` and computes nothing of its own; a panel draws the precomputed data it is handed.

``Report`` is plain data (frozen dataclasses of model and analyze types), so it can be copied, compared
and made display-safe (render.text.display_copy) like any session data.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace

from kernelscope.analyze.verdict import SessionVerdict, session_verdict
from kernelscope.analyze.analysis import KernelAnalysis, SessionAnalysis, analyze_session
from kernelscope.analyze.counters import CounterViews, counter_launches, counter_views
from kernelscope.analyze.gpu_stats import GpuStatsSummary, summarize_gpu_stats
from kernelscope.analyze.memory import MemoryReport, MemoryUnavailable, memory_report
from kernelscope.analyze.kernel_table import KernelSummary, SessionSummary, select_kernels, summarize
from kernelscope.analyze.operators import OperatorRow, OperatorsReport, model_flops, operators_report
from kernelscope.analyze.phases import ScopedLaunchView, scoped_view
from kernelscope.analyze.ranks import RanksReport, ranks_report
from kernelscope.analyze.roofline import Ceilings
from kernelscope.analyze.sm_layout import SMLayoutData, sm_layout_data
from kernelscope.analyze.source_lines import KernelLines, source_lines_of
from kernelscope.model import Launch, Session
from kernelscope.model.launch_table import collector_paused


class ReportError(ValueError):
    """The selection asked of a report cannot be made (bad regex, no kernel matches): one sentence."""


@dataclass(frozen=True)
class KernelReport:
    """One selected kernel with everything its panels draw, computed."""

    summary: KernelSummary  # its row of the kernel table (analyze.kernel_table)
    analysis: KernelAnalysis  # analyze.analysis: bound, throughput, roofline, recommendations
    sm_layout: SMLayoutData  # panel 2: measured block -> SM layout, or waves computed from the launch
    counter_launches: tuple[Launch, ...]  # the launches the counter pass (ncu) measured
    scoped_launch: Launch | None  # the first launch with Proton phase scopes (panels 4 and 8)
    counters: CounterViews | None = None  # panels 3, 5, 7 and warp state, of counter_launches[0]
    scoped: ScopedLaunchView | None = None  # phases and per-warp idle time of scoped_launch
    operators: tuple[OperatorRow, ...] = ()  # the aten ops that launched it (analyze.operators), most time first


@dataclass(frozen=True)
class Report:
    session: Session
    summary: SessionSummary
    kernels: tuple[KernelReport, ...]  # the selected kernels, in table order
    analysis: SessionAnalysis  # every kernel of the session; the run's timeline is analysis.timeline
    gpu_stats: GpuStatsSummary | None  # None: the session holds no GPU samples
    ceilings: Ceilings
    kernel_regex: str | None = None  # the selection asked for (None: the top kernels by time)
    verdict: SessionVerdict | None = None  # the session's answer first: where the time goes, largest gains
    ranks: RanksReport | None = None  # per-rank time and collectives (one rank for a one-process session)
    memory: MemoryReport | MemoryUnavailable | None = None  # run --memory (analyze.memory); None: not asked for
    source_lines: tuple[KernelLines, ...] = ()  # hot lines of the launches with per-line counters (run --source)
    operators: OperatorsReport | None = None  # aten ops, shapes and Python lines behind the kernels (analyze.operators)

    def kernel(self, name: str) -> KernelReport:
        for k in self.kernels:
            if k.summary.name == name:
                return k
        raise KeyError(name)


def kernel_report(session: Session, summary: SessionSummary, k: KernelSummary,
                  analysis: SessionAnalysis) -> KernelReport:
    profiled = tuple(counter_launches(session, k.name))
    scoped = next(iter(session.detailed_launches(k.name, "scopes")), None)
    return KernelReport(k, analysis.kernel(k.name), sm_layout_data(session, k, summary.sm_count), profiled, scoped,
                        counter_views(profiled), None if scoped is None else scoped_view(scoped))


@collector_paused()  # every analysis builds rows per launch; see model/launch_table.collector_paused
def build_report(session: Session, kernel_regex: str | None = None, top: int | None = 3,
                 ceilings: Ceilings | None = None, disk_sha256: Mapping[str, str] | None = None) -> Report:
    """Summarise ``session``, select kernels (those matching ``kernel_regex``, else the ``top`` by time;
    ``top=None``: every kernel) and run every analysis. ``disk_sha256``: SHA-256 of the session's source files as
    read on this machine, by path (source_lines.file_notes); no file is read here. Raises ReportError for a
    selection that cannot be made."""
    summary = summarize(session)
    try:
        selected = select_kernels(summary, kernel_regex, len(summary.kernels) if top is None else top)
    except re.error as e:
        raise ReportError(f"--kernel {kernel_regex!r} is not a valid regular expression ({e})") from None
    if kernel_regex is not None and not selected:
        n = len(summary.kernels)
        raise ReportError(f"no kernel matches --kernel {kernel_regex!r}; {n} kernel{'s are' if n != 1 else ' is'} in "
                          "the session")
    ceilings = ceilings if ceilings is not None else Ceilings.none()
    ranks = ranks_report(session)
    analysis = analyze_session(session, ceilings, summary, ranks.collectives)
    ops = operators_report(session, analysis.ceilings)
    kernels = tuple(replace(kernel_report(session, summary, k, analysis),
                            operators=tuple(r for r in ops.rows if k.name in r.kernels)) for k in selected)
    stats = summarize_gpu_stats(session) if session.samples else None
    verdict = session_verdict(session, analysis, ranks)
    if session.operators is not None:
        b = verdict.breakdown.ranks[0] if len(verdict.breakdown.ranks) == 1 else None
        ops = replace(ops, model=model_flops(session, None if b is None else (b.window_start_ns, b.window_end_ns),
                                             0 if b is None else b.steps, analysis.ceilings))
    return Report(session, summary, kernels, analysis, stats, analysis.ceilings, kernel_regex, verdict, ranks,
                  memory_report(session), tuple(source_lines_of(session, kernel_regex, disk_sha256=disk_sha256)), ops)
