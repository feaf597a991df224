"""The counter-fed panels for one kernel, composed: memory hierarchy, memory
transactions, tensor cores, warp state, and NVIDIA's findings."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult

from kernelscope.analyze.counters import CounterViews
from kernelscope.render.memory_hierarchy import MemoryHierarchyPanel
from kernelscope.render.memory_transactions import MemoryTransactionsPanel
from kernelscope.render.ncu_findings import NcuFindingsPanel
from kernelscope.render.tensor_cores import TensorCoresPanel
from kernelscope.render.warp_state import WarpStatePanel


class CounterPanels:
    def __init__(self, views: CounterViews, short_name: str) -> None:
        self.views, self.short_name = views, short_name

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        v = self.views
        title = self.short_name + (f" (1st of {v.profiled} profiled launches)" if v.profiled > 1 else "")
        yield MemoryHierarchyPanel(v.memory, title)
        yield MemoryTransactionsPanel(v.transactions, title)
        yield TensorCoresPanel(v.tensor, title)
        yield WarpStatePanel(v.warp_state, title)
        yield NcuFindingsPanel(v.launch.findings, title)
