"""Panel 5, Memory transactions: sectors per request, coalescing, wasted bytes, bank conflicts."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.panel import Panel
from rich.table import Table

from kernelscope.analyze.counters import SECTOR_BYTES, TransactionsView
from kernelscope.render.fmt import short_cell as _short


class MemoryTransactionsPanel:
    def __init__(self, view: TransactionsView, title: str) -> None:
        self.view, self.title = view, title

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        g = Table(box=None, padding=(0, 1), expand=True, title="Global memory", title_justify="left")
        for col in ("", "Requests", "Sectors", "Sectors/req", "Bytes used/sector", "Efficiency", "Wasted"):
            g.add_column(col, justify="right" if col else "left", no_wrap=True)
        for r in self.view.global_access:
            g.add_row(r.kind, _short(r.requests), _short(r.sectors), _short(r.sectors_per_request),
                      _short(r.bytes_used_per_sector), _short(r.efficiency_pct), _short(r.wasted_bytes))
        s = Table(box=None, padding=(0, 1), expand=True, title="Shared memory", title_justify="left")
        for col in ("", "Instructions", "Wavefronts", "Bank conflicts", "Wavefronts/inst"):
            s.add_column(col, justify="right" if col else "left", no_wrap=True)
        for r in self.view.shared_access:
            s.add_row(r.kind, _short(r.instructions), _short(r.wavefronts), _short(r.bank_conflicts),
                      _short(r.wavefronts_per_instruction))
        reasons: list[str] = []
        for r in self.view.global_access:
            m = r.bytes_used_per_sector if r.bytes_used_per_sector.is_missing else r.efficiency_pct
            if m.is_missing and f"global {r.kind}: {m.missing_reason}" not in reasons:
                reasons.append(f"global {r.kind}: {m.missing_reason}")
        notes = [f"[dim]N/A {text}[/]" for text in reasons]
        note = (f"[dim]Efficiency = bytes used per {SECTOR_BYTES}-byte sector / {SECTOR_BYTES} (ncu's "
                "smsp__sass_average_data_bytes_per_sector ratio); wasted = sectors x unused bytes. "
                "A warp's 4-byte coalesced access needs 4 sectors per request.[/]")
        yield Panel(Group(g, s, *notes, note), title=f"Memory transactions · {self.title}", title_align="left")


