"""Panel 7, Tensor cores: tensor pipe utilization (ncu's % of peak) and MMA instructions by kind."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table

from kernelscope.analyze.counters import TensorView
from kernelscope.render.fmt import bar, metric_cell
from kernelscope.render.fit import fitted_panel


class TensorCoresPanel:
    def __init__(self, view: TensorView, title: str) -> None:
        self.view, self.title = view, title

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        v = self.view
        pct = v.tensor_pipe_pct
        head = (
            f"Tensor pipe utilization  {bar(float(pct.value), 24)} {float(pct.value):.1f}% of peak "
            f"[dim]({pct.raw_name})[/]"
            if not pct.is_missing
            else f"Tensor pipe utilization  N/A ({pct.missing_reason})"
        )
        t = Table(box=None, padding=(0, 1))
        t.add_column("MMA kind")
        t.add_column("Instructions", justify="right", no_wrap=True)
        t.add_column("Rate", justify="right", no_wrap=True)
        for label, n, rate in v.mma_instructions:
            if n.is_missing:
                t.add_row(label, "N/A", "[dim]not in this report[/]")
            else:
                t.add_row(label, metric_cell(n), "" if rate.is_missing else f"{float(rate.value):.3g} inst/s")
        notes = ["[dim]Rate = instructions / kernel duration (derived).[/]"]
        if v.hmma_includes_gmma:
            notes.append("[dim]HMMA and GMMA counts are equal: ncu counts the wgmma instructions on the HMMA "
                         "pipe too, so they are the same instructions, not two kinds.[/]")
        yield fitted_panel([head, t, *notes], f"Tensor cores · {self.title}", options.max_width)
