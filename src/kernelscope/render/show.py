"""What `kernelscope show` draws: header, kernel table, the panels of each selected kernel, the
session's analysis, GPU stats. Built from an analyze.report.Report only: every panel gets data
build_report computed; nothing here calls analyze/."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult

from kernelscope.analyze.report import Report
from kernelscope.render.kernel_analysis import SummaryPanel
from kernelscope.render.session_analysis import SessionPanels
from kernelscope.render.config_panel import KernelConfigPanel
from kernelscope.render.console import make_console  # noqa: F401  (its older home; tests import it here)
from kernelscope.render.counter_panels import CounterPanels
from kernelscope.render.gpu_stats import GpuStatsPanel
from kernelscope.render.header import SessionHeader
from kernelscope.render.kernel_phases import KernelPhasesPanel
from kernelscope.render.kernel_table import KernelTable
from kernelscope.render.operators_panel import OperatorsTable
from kernelscope.render.memory_panel import MemoryPanel
from kernelscope.render.ranks_panel import CollectivesPanel, RanksPanel
from kernelscope.render.sm_layout import SMLayoutPanel
from kernelscope.render.verdict import VerdictPanel
from kernelscope.render.warp_execution import WarpExecutionPanel

TABLE_LIMIT = 15  # kernel table rows unless --all-kernels
COLLECTIVES_ROWS = 20  # collectives table rows unless --all-kernels


class ShowView:
    def __init__(self, report: Report, table_limit: int = TABLE_LIMIT, banner: str | None = None,
                 timeline_limit: int | None = None, block: int | None = None, with_analysis: bool = True,
                 brief: bool = False, collectives_limit: int | None = COLLECTIVES_ROWS,
                 whole_run: bool = False) -> None:
        self.report = report
        self.block = block  # the block the warp-execution panel draws (None: the first recorded)
        self.table_limit, self.banner, self.timeline_limit = table_limit, banner, timeline_limit
        self.with_analysis = with_analysis  # False: leave out the analysis panels (summary, roofline, recommendations)
        self.brief = brief  # stop after the verdict
        self.collectives_limit = collectives_limit  # None: every collective
        self.whole_run = whole_run  # the timeline from the run's start, not from the verdict's window

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        r = self.report
        if self.banner:
            yield self.banner
        yield SessionHeader(r.session)
        if r.verdict is not None:
            yield VerdictPanel(r.verdict)
        if self.brief:
            return
        yield KernelTable(r.summary, self.table_limit)
        if r.operators is not None and r.operators.rows:
            yield OperatorsTable(r.operators, self.table_limit)
        for k in r.kernels:
            label = k.summary.label
            yield KernelConfigPanel(k.summary, operators=k.operators)
            yield SMLayoutPanel(k.sm_layout, label)
            if k.scoped is not None:  # Proton phase scopes: panels 4 (warp execution) and 8 (inside the kernel)
                yield WarpExecutionPanel(k.scoped, label, block=self.block,
                                         stalls=k.counters.warp_state if k.counters is not None else None)
                yield KernelPhasesPanel(k.scoped, label)
            if k.counters is not None:
                yield CounterPanels(k.counters, label)
            if self.with_analysis:
                yield SummaryPanel(k.analysis, in_verdict=r.verdict.for_kernel(k.summary.name) if r.verdict else ())
        if self.with_analysis:
            ranks = r.verdict.breakdown.ranks if r.verdict is not None else ()
            opens = None if self.whole_run or not ranks else min(b.window_start_ns for b in ranks)
            yield SessionPanels(r.analysis, self.timeline_limit, opens)
        if r.memory is not None:  # run --memory: the caching allocator's history
            yield MemoryPanel(r.memory)
        if r.gpu_stats is not None:
            yield GpuStatsPanel(r.session, r.gpu_stats)
        if r.ranks is not None and r.ranks.multi_rank:  # a multi-GPU session: the Ranks and Collectives panels
            rows = r.ranks.collectives.rows
            straggler = r.ranks.collectives.run_straggler
            yield RanksPanel(r.ranks.summary, straggler.rank if straggler is not None else None)
            yield CollectivesPanel(r.ranks.collectives, limit=len(rows) if self.collectives_limit is None
                                   else self.collectives_limit)
