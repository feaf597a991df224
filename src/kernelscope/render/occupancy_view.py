"""`kernelscope occupancy` in the terminal: the result and each factor's limit."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from kernelscope.analyze.occupancy import OccupancyResult
from kernelscope.render.fmt import plural

_LABEL = {
    "warps": "warps per SM",
    "registers": "registers",
    "shared_memory": "shared memory",
    "blocks": "blocks per SM cap",
}


class OccupancyView:
    def __init__(self, result: OccupancyResult) -> None:
        self.r = result

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        r = self.r
        t = Table(box=None, padding=(0, 2))
        t.add_column("Limit")
        t.add_column("Blocks/SM", justify="right")
        t.add_column("")
        for k, v in r.blocks_limit.items():
            t.add_row(_LABEL[k], str(v), "◀ limiter" if k in r.limiters else "")
        head = (
            f"[bold]{r.theoretical_occupancy_pct:.1f}%[/] theoretical occupancy on {r.arch}: "
            f"{plural(r.active_blocks_per_sm, 'block')} × {plural(r.warps_per_block, 'warp')} = "
            f"{r.active_warps_per_sm} of "
            f"{r.max_warps_per_sm} warps per SM\n"
            f"block {r.threads_per_block} threads · {r.registers_per_thread} registers/thread · "
            f"{r.shared_memory_per_block_bytes:,} B shared memory "
            f"(allocated {r.shared_memory_allocated_per_block_bytes:,} B "
            f"of a {r.shared_memory_config_bytes:,} B carveout)"
        )
        from rich.console import Group

        parts = [head, t]
        if r.active_blocks_per_sm == 0:
            limits = " and ".join(_LABEL[k] for k in r.limiters)
            parts.append(f"[bold red]No block of this configuration fits on one SM ({limits} allow 0): a launch "
                         "with it fails.[/]")
        if r.caveat:
            parts.append(f"[yellow]{escape(r.caveat)}[/]")
        yield Panel(Group(*parts), title="Theoretical occupancy (calculated)", title_align="left")
