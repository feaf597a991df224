"""Table of kernels by total GPU time."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table

from kernelscope.analyze.summary import SessionSummary
from kernelscope.render.fmt import dim3_compact, duration


class KernelTable:
    def __init__(self, summary: SessionSummary, limit: int = 15) -> None:
        self.summary = summary
        self.limit = limit

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        s = self.summary
        if not s.kernels:
            yield "No kernel launches were recorded."
            return
        t = Table(title=f"Kernels by total GPU time ({s.launch_count} launches, {duration(s.total_kernel_ns)})",
                  title_justify="left", expand=False)
        t.add_column("#", justify="right")
        t.add_column("Kernel", overflow="ellipsis", no_wrap=True, min_width=16,
                     max_width=max(16, options.max_width - 70))
        t.add_column("Calls", justify="right", no_wrap=True, min_width=5)
        t.add_column("Total", justify="right", no_wrap=True)
        t.add_column("%", justify="right", no_wrap=True, min_width=5)
        t.add_column("Mean", justify="right", no_wrap=True)
        t.add_column("Grid / Block", overflow="fold")
        for i, k in enumerate(s.kernels[: self.limit], 1):
            c = k.configs[0].config
            cfg = f"{dim3_compact(c.grid)} / {dim3_compact(c.block)}"
            if len(k.configs) > 1:
                cfg += f" +{len(k.configs) - 1}"
            t.add_row(str(i), k.label, str(k.launches), duration(k.total_ns),
                      f"{100 * k.share_of_kernel_time:.1f}", duration(k.mean_ns), cfg)
        yield t
        if len(s.kernels) > self.limit:
            yield f"… and {len(s.kernels) - self.limit} more kernels (show --all-kernels, or --json)"
