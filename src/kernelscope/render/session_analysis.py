"""The session-wide analysis `show` adds after the per-kernel panels: the roofline
(when anything can be placed on it), the top recommendations across kernels, and
the timeline when asked for."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult

from kernelscope.analyze.analysis import SessionAnalysis
from kernelscope.analyze.recommend import SESSION_GAIN_FORMULA
from kernelscope.analyze.thresholds import SESSION_LIST_MIN_GAIN_PCT
from kernelscope.render.roofline_term import RooflineChart, placed
from kernelscope.render.kernel_analysis import RecommendationsTable
from kernelscope.render.timeline import TimelinePanel
from kernelscope.render.fit import fitted_panel
from kernelscope.render.fmt import plural


class SessionRecommendationsPanel:
    def __init__(self, analysis: SessionAnalysis, limit: int = 5) -> None:
        self.analysis, self.limit = analysis, limit

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        with_gain = tuple(r for r in self.analysis.ranked if r.session_gain_pct is not None)
        recs = tuple(r for r in with_gain if r.session_gain_pct >= SESSION_LIST_MIN_GAIN_PCT)
        left_out = len(with_gain) - len(recs)
        if not recs:
            if left_out:
                yield (f"[dim]Recommendations across the session: {plural(left_out, 'finding')}, "
                       f"{'each ' if left_out > 1 else ''}under "
                       f"{SESSION_LIST_MIN_GAIN_PCT:g}% of all kernel time; see each kernel's summary.[/]")
            return
        from dataclasses import replace

        as_session = tuple(replace(r, gain_pct=r.session_gain_pct) for r in recs)  # the Gain column shows session gain
        yield fitted_panel(
            RecommendationsTable(as_session, self.limit, show_kernel=True),
            "Recommendations across the session",
            options.max_width,
            subtitle=f"gain = {SESSION_GAIN_FORMULA}"
            + (f"; {left_out} under {SESSION_LIST_MIN_GAIN_PCT:g}% not listed" if left_out else ""),
            subtitle_align="left",
        )


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
