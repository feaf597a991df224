"""Panel 8, the inside of a kernel: its phases (Proton scopes) with measured durations,
their share of a block's time, and how much phases overlapped across warps."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from kernelscope.analyze.phases import (
    OVERLAP_FORMULA,
    PER_WARP_FORMULA,
    SHARE_FORMULA,
    PhaseSummary,
    ScopedLaunchView,
)
from kernelscope.render.fmt import bar, plural
from kernelscope.render.warp_execution import OTHER, drawn_phases, no_scopes_panel
from kernelscope.render.fit import Column, fit_tables, fitted_panel


def not_shown(v: PhaseSummary, shown: int) -> str:
    """The sentence counting the phases a panel leaves out (empty when it shows them all)."""
    rest = len(v.phases) - shown
    if rest <= 0:
        return ""
    scopes = sum(p.scopes for p in v.phases) - sum(p.scopes for p in v.busiest)
    return (f"{OTHER} {rest:,} more phases ({scopes:,} scopes) not listed: the {shown} with the most time over all "
            "warps are shown")


def overlap_among(v: PhaseSummary) -> str:
    """Which phases the overlaps were measured between, when not all of them."""
    return f" among the {v.overlap_phases} busiest of {len(v.phases):,} phases" \
        if v.overlap_phases < len(v.phases) else ""


class KernelPhasesPanel:
    """Draws the phase summary of a ``ScopedLaunchView`` (computed by analyze.report.build_report)."""

    def __init__(self, view: ScopedLaunchView, title: str, overlap_limit: int = 6) -> None:
        self.view, self.title, self.overlap_limit = view, title, overlap_limit

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        s = self.view.launch.scopes
        title = f"Kernel timeline (inside) · {self.title}"
        if (na := no_scopes_panel(s, title, options.max_width)) is not None:
            yield na
            return
        v = self.view.phases
        assert s is not None and v is not None  # scopes with warps: analyze.phases.scoped_view summarised them
        u = v.unit
        marks = drawn_phases(s, v)
        letters = {s.names[i]: ch for i, ch in marks.items()}
        shown = v.busiest
        span = "N/A" if v.block_span_median is None else f"{v.block_span_median:,.0f} {u}"
        head = Text(f"{plural(v.blocks, 'block')}, {plural(v.warps, 'warp')} recorded; median block span {span} "
                    f"(first to last scope record of a block)")
        cols = [Column("phase", "left")] + [Column(c) for c in (
            "scopes", "warps", f"per warp median ({u})", "min", "max", f"starts at ({u})")] + [
            Column("share of block", "left")]
        rows = []
        for p in shown:
            share = "N/A" if p.share_of_block_median is None else \
                f"{bar(100 * p.share_of_block_median, 12)} {100 * p.share_of_block_median:4.1f}%"
            rows.append((f"{letters.get(p.name, OTHER)} {p.name}", f"{p.scopes:,}", f"{p.warps:,}",
                         f"{p.per_warp_median:,.0f}", f"{p.per_warp_min:,}", f"{p.per_warp_max:,}",
                         f"{p.first_start_median:,.0f}", share))
        tables = fit_tables(options.max_width - 4, cols, rows)
        parts: list = [head, *tables]
        if (rest := not_shown(v, len(shown))):
            parts.append(Text(rest, style="dim"))
        if v.overlaps:
            parts.append(Text(f"Overlap between phases (pipeline stages working at once){overlap_among(v)}:"))
            for o in v.overlaps[: self.overlap_limit]:
                parts.append(Text(f"  {o.a} ∥ {o.b}: {100 * o.fraction_median:.1f}% of the block span "
                                  f"(median over {plural(o.blocks, 'block')})"))
        else:
            parts.append(Text(f"Overlap between phases{overlap_among(v)}: none measured (no two phases ran at once "
                              "in any block)"))
        parts.append(Text(f"derived: {PER_WARP_FORMULA}; share = {SHARE_FORMULA}; overlap = "
                          f"{OVERLAP_FORMULA}. Times in {u} ({s.clock}) from each block's first record.", style="dim"))
        parts += [Text(f"check: {c}", style="dim") for c in v.checks]
        parts += [Text(f"problem: {p}", style="yellow") for p in v.problems]
        yield fitted_panel(parts, title, options.max_width)
