"""The Memory panel: the caching allocator's history (`run --memory`) from analyze.memory's MemoryReport:
allocated and reserved over time, the peak and the largest allocations live at it with their Python stack,
and the peak per region. Draws precomputed data only."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kernelscope.analyze.memory import (ALLOCATED_FORMULA, BASELINE_FORMULA, RESERVED_FORMULA, MemoryPoint,
                                        MemoryReport, MemoryUnavailable)
from kernelscope.render.fmt import duration, size_bytes

TITLE = "Memory · caching allocator"
_BLOCKS = "▁▂▃▄▅▆▇█"
STACK_FRAMES = 3  # frames of each top allocation's stack shown (innermost first)


def columns_max(points: tuple[MemoryPoint, ...], start_ns: int, end_ns: int, width: int,
                key: str = "allocated_bytes") -> list[int | None]:
    """The largest value of each of ``width`` time columns (None: no event in it; the previous value holds).
    Points may come in any order; one outside ``start_ns``..``end_ns`` counts in the nearest column."""
    span = max(end_ns - start_ns, 1)
    cols: list[int | None] = [None] * width
    for p in points:
        c = min(width - 1, max(0, (p.t_ns - start_ns) * width // span))
        v = getattr(p, key)
        cols[c] = v if cols[c] is None else max(cols[c], v)  # type: ignore[type-var]
    last = None
    for i, v in enumerate(cols):  # between events the allocator's state stays what it was
        cols[i] = last = v if v is not None else last
    return cols


def sparkline(cols: list[int | None], lo: int, hi: int) -> str:
    span = max(hi - lo, 1)
    return "".join(" " if v is None else _BLOCKS[min(7, (v - lo) * 8 // span)] for v in cols)


def stack_text(stack: tuple[str, ...], frames: int = STACK_FRAMES) -> str:
    if not stack:
        return "no Python stack (allocated from C++ or another thread, e.g. autograd's backward)"
    more = f" (+{len(stack) - frames} outer)" if len(stack) > frames else ""
    return " ← ".join(stack[:frames]) + more


class MemoryPanel:
    def __init__(self, memory: MemoryReport | MemoryUnavailable, top: int = 5, regions: int = 8) -> None:
        self.memory, self.top, self.regions = memory, top, regions

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        m = self.memory
        if isinstance(m, MemoryUnavailable):
            yield Panel(f"N/A: {m.reason}.", title=TITLE, title_align="left")
            return
        head = Table.grid(padding=(0, 2))
        head.add_column(style="bold", no_wrap=True)
        head.add_column(overflow="fold")
        head.add_row("Peak allocated", f"{size_bytes(m.peak_allocated_bytes)} at {duration(m.peak_allocated_ns)} "
                     f"on the session clock; {m.live_at_peak} allocations live then "
                     f"({size_bytes(m.live_at_peak_bytes)} made while recording, "
                     f"{size_bytes(m.untraced_at_peak_bytes)} from before)")
        head.add_row("Peak reserved", f"{size_bytes(m.peak_reserved_bytes)} at {duration(m.peak_reserved_ns)}")
        head.add_row("Before recording", f"{size_bytes(m.baseline_allocated_bytes)} allocated, "
                     f"{size_bytes(m.baseline_reserved_bytes)} reserved ({BASELINE_FORMULA})")
        head.add_row("History", f"{m.events:,} allocator events over {duration(m.end_ns - m.start_ns)}, "
                     f"device {m.device_index}")
        width = max(10, min(100, options.max_width - 4 - 9 - 1 - 1))  # panel border and padding, label, gap
        lo = 0
        hi = max(m.peak_reserved_bytes, m.peak_allocated_bytes)
        chart = Table.grid(padding=(0, 1))
        chart.add_column(no_wrap=True)
        chart.add_column(no_wrap=True)
        for label, key, style in (("allocated", "allocated_bytes", "cyan"), ("reserved", "reserved_bytes", "blue")):
            cols = columns_max(m.points, m.start_ns, m.end_ns, width, key)
            chart.add_row(f"{label:>9}", f"[{style}]{sparkline(cols, lo, hi)}[/]")
        scale = Text(f"{'':9} 0 .. {size_bytes(hi)}, {duration(m.end_ns - m.start_ns)} left to right (the largest "
                     "value of each column)", style="dim")  # under the chart, wrapping at its spaces
        top = Table(title="Largest allocations live at the peak", title_justify="left", expand=True)
        top.add_column("Size", justify="right", no_wrap=True)
        top.add_column("Allocated at", justify="right", no_wrap=True)
        top.add_column("Python stack (innermost first)", overflow="fold")
        for a in m.top_at_peak[: self.top]:
            top.add_row(size_bytes(a.size_bytes), duration(a.allocated_at_ns), stack_text(a.stack))
        parts: list = [head, chart, scale, top]
        if m.region_peaks:
            reg = Table(title="Peak allocated per region", title_justify="left")
            reg.add_column("Region", overflow="fold")  # a long region name wraps, never cut
            reg.add_column("Entries", justify="right")
            reg.add_column("Peak allocated", justify="right")
            reg.add_column("Largest growth", justify="right")
            for r in m.region_peaks[: self.regions]:
                reg.add_row(r.name, str(r.occurrences), size_bytes(r.peak_allocated_bytes), size_bytes(r.growth_bytes))
            parts.append(reg)
        for p in m.problems:
            parts.append(f"[yellow]! {p}[/]")
        parts.append(f"[dim]allocated = {ALLOCATED_FORMULA}; reserved = {RESERVED_FORMULA}. Region peaks use the "
                     "regions' CPU spans (the allocator runs on the host); growth = peak inside - allocated at "
                     "entry.[/]")
        yield Panel(Group(*parts), title=TITLE, title_align="left")
