"""Panel 3, Memory hierarchy: throughput (% of peak, ncu's own), bytes and hit rates per level."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table

from kernelscope.analyze.counters import MemoryHierarchyView
from kernelscope.render.fmt import bar, metric_cell, short_cell
from kernelscope.render.fit import fitted_panel


class MemoryHierarchyPanel:
    def __init__(self, view: MemoryHierarchyView, title: str) -> None:
        self.view, self.title = view, title

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        v = self.view
        t = Table(box=None, padding=(0, 1), expand=True)
        t.add_column("Level", style="bold", no_wrap=True, min_width=6)
        t.add_column("Throughput (% of peak)", no_wrap=True, min_width=23)
        t.add_column("Bytes", justify="right", no_wrap=True)
        t.add_column("Hit rate", justify="right", no_wrap=True)
        for lv in v.levels:
            pct = lv.throughput_pct
            tp = f"{bar(float(pct.value), 16)} {float(pct.value):5.1f}%" if not pct.is_missing else "N/A"
            t.add_row(lv.name, tp, short_cell(lv.bytes) if lv.bytes else "",
                      short_cell(lv.hit_rate_pct) if lv.hit_rate_pct else "")
        notes = Table.grid(padding=(0, 2))
        notes.add_column(style="dim")
        notes.add_column()
        notes.add_row("DRAM read / write", f"{metric_cell(v.dram_read_bytes)} / {metric_cell(v.dram_write_bytes)}")
        notes.add_row("Shared mem / block", f"static {metric_cell(v.shared_memory_static_bytes)} · "
                                            f"dynamic {metric_cell(v.shared_memory_dynamic_bytes)}")
        notes.add_row("Registers / thread", metric_cell(v.registers_per_thread))
        parts: list = [t, notes]
        for lv in v.levels:
            for what, m in (("throughput", lv.throughput_pct), ("bytes", lv.bytes), ("hit rate", lv.hit_rate_pct)):
                if m is not None and m.is_missing:
                    parts.append(f"[dim]N/A {lv.name} {what}: {m.missing_reason}[/]")
        parts.append(
            "[dim]% of peak are ncu's own pct_of_peak_sustained metrics; bytes and hit rates are ncu counters.[/]"
        )
        yield fitted_panel(parts, f"Memory hierarchy · {self.title}", options.max_width)
