"""What `kernelscope show` draws: header, kernel table, configuration panels."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult

from kernelscope.analyze.gpu_stats import summarize_gpu_stats
from kernelscope.analyze.kernel_table import KernelSummary, SessionSummary
from kernelscope.model import Session
from kernelscope.analyze.counters import counter_launches
from kernelscope.render.config_panel import KernelConfigPanel
from kernelscope.render.counter_panels import CounterPanels
from kernelscope.render.gpu_stats import GpuStatsPanel
from kernelscope.render.header import SessionHeader
from kernelscope.render.kernel_table import KernelTable
from kernelscope.render.analysis_view import SessionPanels
from kernelscope.render.analysis_panel import SummaryPanel
from kernelscope.render.sm_layout import SMLayoutPanel
from kernelscope.render.kernel_phases import KernelPhasesPanel
from kernelscope.render.warp_execution import WarpExecutionPanel


class ShowView:
    def __init__(self, session: Session, summary: SessionSummary, selected: tuple[KernelSummary, ...],
                 table_limit: int = 15, banner: str | None = None, analysis=None,
                 timeline_limit: int | None = None, block: int | None = None) -> None:
        self.session, self.summary, self.selected = session, summary, selected
        self.block = block  # the block the warp-execution panel draws (None: the first recorded)
        self.table_limit, self.banner = table_limit, banner
        self.analysis, self.timeline_limit = analysis, timeline_limit  # analyze.analysis.SessionAnalysis

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if self.banner:
            yield self.banner
        yield SessionHeader(self.session)
        yield KernelTable(self.summary, self.table_limit)
        for k in self.selected:
            yield KernelConfigPanel(k)
            yield SMLayoutPanel(self.session, k, self.summary.sm_count)
            profiled = counter_launches(self.session, k.name)
            scoped = next((x for x in self.session.detailed_launches(k.name) if x.scopes is not None), None)
            if scoped is not None:  # Proton phase scopes: panels 4 (warp execution) and 8 (inside the kernel)
                yield WarpExecutionPanel(scoped, k.label, block=self.block,
                                         counters=profiled[0] if profiled else None)
                yield KernelPhasesPanel(scoped, k.label)
            if profiled:
                yield CounterPanels(profiled[0], k.label, len(profiled))
            if self.analysis is not None:
                yield SummaryPanel(self.analysis.kernel(k.name))
        if self.analysis is not None:
            yield SessionPanels(self.analysis, self.timeline_limit)
        stats = summarize_gpu_stats(self.session) if self.session.samples else None
        if stats is not None:
            yield GpuStatsPanel(self.session, stats)


def make_console(width: int | None = None, file=None, color: bool | None = None) -> Console:
    """A console for the CLI; a fixed width and no colour make output testable as text."""
    kwargs = {"width": width, "file": file, "soft_wrap": False, "highlight": False}
    if color is False:
        kwargs.update(color_system=None, force_terminal=False)
    return Console(**kwargs)
