"""Warp state: stall reasons as a ranked bar chart, each with its meaning."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table

from kernelscope.analyze.warp_state import WarpStateView
from kernelscope.render.fmt import bar
from kernelscope.render.fit import fitted_panel


class WarpStatePanel:
    def __init__(self, view: WarpStateView, title: str, limit: int = 8) -> None:
        self.view, self.title, self.limit = view, title, limit

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        v = self.view
        if v.total_cycles_per_issue is None:
            yield fitted_panel("N/A: no warp-state counters in this report (WarpStateStats section)",
                               f"Warp state · {self.title}", options.max_width)
            return
        t = Table(box=None, padding=(0, 1), expand=True)
        t.add_column("Stall reason", no_wrap=True, style="bold")
        t.add_column("Cycles/issue", justify="right", no_wrap=True)
        t.add_column("Share", no_wrap=True)
        t.add_column("Meaning", overflow="fold", style="dim")
        for s in v.stalls[: self.limit]:
            t.add_row(s.reason, f"{float(s.cycles_per_issue.value):.2f}",
                      f"{bar(s.share_pct, 12)} {s.share_pct:4.1f}%", s.meaning)
        rest = len(v.stalls) - self.limit
        foot = (f"[dim]{v.total_cycles_per_issue:.1f} warp cycles per issued instruction in all; share = "
                f"{v.share_formula}.{f' {rest} smaller reasons not shown.' if rest > 0 else ''}[/]")
        yield fitted_panel([t, foot], f"Warp state · {self.title}", options.max_width)
