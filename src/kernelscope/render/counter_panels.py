"""The counter-fed panels for one kernel, composed: memory hierarchy, memory
transactions, tensor cores, warp state, and NVIDIA's findings."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult

from kernelscope.analyze.counters import memory_hierarchy, tensor_cores, transactions
from kernelscope.analyze.warp_state import warp_state
from kernelscope.model import Launch
from kernelscope.render.memory_hierarchy import MemoryHierarchyPanel
from kernelscope.render.memory_transactions import MemoryTransactionsPanel
from kernelscope.render.ncu_findings import NcuFindingsPanel
from kernelscope.render.tensor_cores import TensorCoresPanel
from kernelscope.render.warp_state import WarpStatePanel


class CounterPanels:
    def __init__(self, launch: Launch, short_name: str, profiled: int) -> None:
        self.launch, self.short_name, self.profiled = launch, short_name, profiled

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        x = self.launch
        title = self.short_name + (f" (1st of {self.profiled} profiled launches)" if self.profiled > 1 else "")
        yield MemoryHierarchyPanel(memory_hierarchy(x), title)
        yield MemoryTransactionsPanel(transactions(x), title)
        yield TensorCoresPanel(tensor_cores(x), title)
        yield WarpStatePanel(warp_state(x), title)
        yield NcuFindingsPanel(x.findings, title)
