"""Table of kernels by total GPU time."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.box import HEAVY_HEAD
from rich.text import Text

from kernelscope.analyze.kernel_table import SessionSummary
from kernelscope.render.fit import Column, fit_tables
from kernelscope.render.fmt import dim3_compact, duration, plural


class KernelTable:
    def __init__(self, summary: SessionSummary, limit: int = 15) -> None:
        self.summary = summary
        self.limit = limit

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        s = self.summary
        if not s.kernels:
            yield "No kernel launches were recorded."
            return
        rows = []
        more_configs = False
        for i, k in enumerate(s.kernels[: self.limit], 1):
            c = k.configs[0].config
            cfg = f"{dim3_compact(c.grid)} / {dim3_compact(c.block)}"
            if len(k.configs) > 1:
                cfg += f" +{len(k.configs) - 1}"
                more_configs = True
            rows.append((str(i), k.label, str(k.launches), duration(k.total_ns),
                         f"{100 * k.share_of_kernel_time:.1f}", duration(k.mean_ns), cfg))
        # a long name folds onto more lines rather than losing its end (where templated names differ);
        # at 80 columns Mean (= Total / Calls) is left out before anything is cut
        cols = [Column("#"), Column("Kernel", "left", wrap=True, min_width=20), Column("Calls"), Column("Total"),
                Column("%"), Column("Mean", droppable=True), Column("Grid / Block", "left")]
        yield from fit_tables(options.max_width, cols, rows, keys=2, box=HEAVY_HEAD, expand=False,
                              title=f"Kernels by total GPU time ({plural(s.launch_count, 'launch', 'launches')}, "
                                    f"{duration(s.total_kernel_ns)})", title_justify="left")
        if more_configs:
            # summary.launch_config groups launches by grid, block, registers and shared memory
            yield Text("+N: the kernel also ran with N other launch configurations (grid, block, registers or "
                       "shared memory); the one shown took the most time. show --kernel NAME lists them all.",
                       style="dim")
        if len(s.kernels) > self.limit:
            yield f"… and {len(s.kernels) - self.limit} more kernels (show --all-kernels, or --json)"
