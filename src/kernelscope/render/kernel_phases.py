"""Panel 8, the inside of a kernel: its phases (Proton scopes) with measured durations,
their share of a block's time, and how much phases overlapped across warps."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from kernelscope.analyze.phases import (
    OVERLAP_FORMULA,
    PER_WARP_FORMULA,
    SHARE_FORMULA,
    ScopedLaunchView,
)
from kernelscope.render.fmt import bar, plural
from kernelscope.render.warp_execution import no_scopes_panel, phase_letters
from kernelscope.render.fit import Column, fit_tables, fitted_panel


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
        letters = dict(zip(s.names, phase_letters(s.names)))
        span = "N/A" if v.block_span_median is None else f"{v.block_span_median:,.0f} {u}"
        head = Text(f"{plural(v.blocks, 'block')}, {plural(v.warps, 'warp')} recorded; median block span {span} "
                    f"(first to last scope record of a block)")
        cols = [Column("phase", "left")] + [Column(c) for c in (
            "scopes", "warps", f"per warp median ({u})", "min", "max", f"starts at ({u})")] + [
            Column("share of block", "left")]
        rows = []
        for p in v.phases:
            share = "N/A" if p.share_of_block_median is None else \
                f"{bar(100 * p.share_of_block_median, 12)} {100 * p.share_of_block_median:4.1f}%"
            rows.append((f"{letters.get(p.name, '?')} {p.name}", f"{p.scopes:,}", f"{p.warps:,}",
                         f"{p.per_warp_median:,.0f}", f"{p.per_warp_min:,}", f"{p.per_warp_max:,}",
                         f"{p.first_start_median:,.0f}", share))
        tables = fit_tables(options.max_width - 4, cols, rows)
        parts: list = [head, *tables]
        if v.overlaps:
            parts.append(Text("Overlap between phases (pipeline stages working at once):"))
            for o in v.overlaps[: self.overlap_limit]:
                parts.append(Text(f"  {o.a} ∥ {o.b}: {100 * o.fraction_median:.1f}% of the block span "
                                  f"(median over {plural(o.blocks, 'block')})"))
        else:
            parts.append(Text("Overlap between phases: none measured (no two phases ran at once in any block)"))
        parts.append(Text(f"derived: {PER_WARP_FORMULA}; share = {SHARE_FORMULA}; overlap = "
                          f"{OVERLAP_FORMULA}. Times in {u} ({s.clock}) from each block's first record.", style="dim"))
        parts += [Text(f"check: {c}", style="dim") for c in v.checks]
        parts += [Text(f"problem: {p}", style="yellow") for p in v.problems]
        yield fitted_panel(parts, title, options.max_width)
