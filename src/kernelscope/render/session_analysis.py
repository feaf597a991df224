"""The session-wide analysis `show` adds after the per-kernel panels: the roofline
(when anything can be placed on it) and the timeline when asked for. The findings across the session are the
verdict's one list (render/verdict.py); each kernel's panel shows those that name it."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult

from kernelscope.analyze.analysis import SessionAnalysis
from kernelscope.render.roofline_term import RooflineChart, placed
from kernelscope.render.timeline import TimelinePanel


class SessionPanels:
    def __init__(self, analysis: SessionAnalysis, timeline_limit: int | None = None,
                 timeline_from_ns: int | None = None) -> None:
        self.analysis, self.timeline_limit, self.timeline_from_ns = analysis, timeline_limit, timeline_from_ns

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        a = self.analysis
        points = tuple(k.roofline for k in a.kernels) + a.regions
        if placed(points):
            yield RooflineChart(points, a.ceilings)
        if self.timeline_limit:
            yield TimelinePanel(a.timeline, self.timeline_limit, self.timeline_from_ns)
