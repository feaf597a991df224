"""Panel 5, Memory transactions: sectors per request, coalescing, wasted bytes, bank conflicts."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult

from kernelscope.analyze.counters import SECTOR_BYTES, WIDEST_ACCESS_WAVEFRONTS, TransactionsView
from kernelscope.render.fit import Column, fit_tables, fitted_panel
from kernelscope.render.fmt import short_cell as _short


def shared_wavefront_notes(view: TransactionsView) -> list[str]:
    """Many wavefronts per instruction with few conflicts, said why (the terminal and the HTML report)."""
    out = []
    for r in view.shared_access:
        plain = r.unconflicted_per_instruction
        if plain is not None and float(plain.value) > WIDEST_ACCESS_WAVEFRONTS:
            out.append(f"Shared {r.kind}s: {float(plain.value):,.1f} wavefronts per instruction without the bank "
                       f"conflicts ((wavefronts - bank conflicts) / instructions), more than the "
                       f"{WIDEST_ACCESS_WAVEFRONTS} a warp's widest per-thread access (32 x 16 B) needs: on average an "
                       "instruction moves more than 512 B of shared memory (as bulk copies do), which the "
                       "bank-conflict count does not explain.")
    return out


class MemoryTransactionsPanel:
    def __init__(self, view: TransactionsView, title: str) -> None:
        self.view, self.title = view, title

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        inner = options.max_width - 4  # panel border and padding
        g = fit_tables(inner, [Column("", "left")] + [Column(c) for c in (
            "Requests", "Sectors", "Sectors/req", "Bytes used/sector", "Efficiency", "Wasted")],
            [(r.kind, _short(r.requests), _short(r.sectors), _short(r.sectors_per_request),
              _short(r.bytes_used_per_sector), _short(r.efficiency_pct), _short(r.wasted_bytes))
             for r in self.view.global_access], title="Global memory", title_justify="left", expand=True)
        s = fit_tables(inner, [Column("", "left")] + [Column(c) for c in (
            "Instructions", "Wavefronts", "Bank conflicts", "Wavefronts/inst")],
            [(r.kind, _short(r.instructions), _short(r.wavefronts), _short(r.bank_conflicts),
              _short(r.wavefronts_per_instruction)) for r in self.view.shared_access],
            title="Shared memory", title_justify="left", expand=True)
        reasons: list[str] = []
        for r in self.view.global_access:
            m = r.bytes_used_per_sector if r.bytes_used_per_sector.is_missing else r.efficiency_pct
            if m.is_missing and f"global {r.kind}: {m.missing_reason}" not in reasons:
                reasons.append(f"global {r.kind}: {m.missing_reason}")
        notes = [f"[dim]N/A {text}[/]" for text in reasons]
        notes += [f"[dim]{text}[/]" for text in shared_wavefront_notes(self.view)]
        note = (f"[dim]Efficiency = bytes used per {SECTOR_BYTES}-byte sector / {SECTOR_BYTES} (ncu's "
                "smsp__sass_average_data_bytes_per_sector ratio); wasted = sectors x unused bytes. "
                "A warp's 4-byte coalesced access needs 4 sectors per request.[/]")
        yield fitted_panel([*g, *s, *notes, note], f"Memory transactions · {self.title}", options.max_width)
