"""The session-wide analysis `show` adds after the per-kernel panels: the roofline
(when anything can be placed on it), the top recommendations across kernels, and
the timeline when asked for."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.panel import Panel

from kernelscope.analyze.profiling_summary import SessionAnalysis
from kernelscope.analyze.recommend import SESSION_GAIN_FORMULA
from kernelscope.render.roofline_term import RooflineChart, placed
from kernelscope.render.summary import RecommendationsTable
from kernelscope.render.timeline import TimelinePanel


class SessionRecommendationsPanel:
    def __init__(self, analysis: SessionAnalysis, limit: int = 5) -> None:
        self.analysis, self.limit = analysis, limit

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        recs = tuple(r for r in self.analysis.ranked if r.session_gain_pct is not None)
        if not recs:
            return
        from dataclasses import replace

        as_session = tuple(replace(r, gain_pct=r.session_gain_pct) for r in recs)  # the Gain column shows session gain
        yield Panel(RecommendationsTable(as_session, self.limit, show_kernel=True),
                    title="Recommendations across the session", title_align="left",
                    subtitle=f"gain = {SESSION_GAIN_FORMULA}", subtitle_align="left")


class SessionPanels:
    def __init__(self, analysis: SessionAnalysis, timeline_limit: int | None = None) -> None:
        self.analysis, self.timeline_limit = analysis, timeline_limit

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        a = self.analysis
        points = tuple(k.roofline for k in a.kernels) + a.regions
        if placed(points):
            yield RooflineChart(points, a.ceilings)
        yield SessionRecommendationsPanel(a)
        if self.timeline_limit:
            yield TimelinePanel(a.timeline, self.timeline_limit)
