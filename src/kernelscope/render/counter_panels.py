"""The counter-fed panels of one kernel (Nsight Compute): memory hierarchy, memory transactions, tensor cores,
warp state and NVIDIA's own findings, each a Rich renderable of analyze.counters' views, and CounterPanels, which
draws them in that order."""
from __future__ import annotations

import re

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table

from kernelscope.analyze.counters import (SECTOR_BYTES, WIDEST_ACCESS_WAVEFRONTS, CounterViews, MemoryHierarchyView,
                                          TensorView, TransactionsView)
from kernelscope.analyze.warp_state import WarpStateView
from kernelscope.model import VendorRuleResult
from kernelscope.render.fit import Column, fit_tables, fitted_panel
from kernelscope.render.fmt import bar, metric_cell, short_cell


# -- Panel 3, Memory hierarchy: throughput (% of peak, ncu's own), bytes and hit rates per level.
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


# -- Panel 5, Memory transactions: sectors per request, coalescing, wasted bytes, bank conflicts.
def shared_na_reasons(view: TransactionsView) -> list[str]:
    """Why a shared row's wavefronts per instruction is N/A: no shared instruction of that kind ran, or the
    counters' own reason."""
    out = []
    for r in view.shared_access:
        m = r.wavefronts_per_instruction
        if not m.is_missing:
            continue
        inst = r.instructions
        why = (f"wavefronts/inst: no shared-memory {r.kind} instruction ran ({inst.raw_name} = 0)"
               if not inst.is_missing and float(inst.value) == 0 else m.missing_reason)
        out.append(f"shared {r.kind}: {why}")
    return out


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
            [(r.kind, short_cell(r.requests), short_cell(r.sectors), short_cell(r.sectors_per_request),
              short_cell(r.bytes_used_per_sector), short_cell(r.efficiency_pct), short_cell(r.wasted_bytes))
             for r in self.view.global_access], title="Global memory", title_justify="left", expand=True)
        s = fit_tables(inner, [Column("", "left")] + [Column(c) for c in (
            "Instructions", "Wavefronts", "Bank conflicts", "Wavefronts/inst")],
            [(r.kind, short_cell(r.instructions), short_cell(r.wavefronts), short_cell(r.bank_conflicts),
              short_cell(r.wavefronts_per_instruction)) for r in self.view.shared_access],
            title="Shared memory", title_justify="left", expand=True)
        reasons: list[str] = []
        for r in self.view.global_access:
            m = r.bytes_used_per_sector if r.bytes_used_per_sector.is_missing else r.efficiency_pct
            if m.is_missing and f"global {r.kind}: {m.missing_reason}" not in reasons:
                reasons.append(f"global {r.kind}: {m.missing_reason}")
        notes = [f"[dim]N/A {text}[/]" for text in reasons + shared_na_reasons(self.view)]
        notes += [f"[dim]{text}[/]" for text in shared_wavefront_notes(self.view)]
        note = (f"[dim]Efficiency = bytes used per {SECTOR_BYTES}-byte sector / {SECTOR_BYTES} (ncu's "
                "smsp__sass_average_data_bytes_per_sector ratio); wasted = sectors x unused bytes. "
                "A warp's 4-byte coalesced access needs 4 sectors per request.[/]")
        yield fitted_panel([*g, *s, *notes, note], f"Memory transactions · {self.title}", options.max_width)


# -- Panel 7, Tensor cores: tensor pipe utilization (ncu's % of peak) and MMA instructions by kind.
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


# -- Warp state: stall reasons as a ranked bar chart, each with its meaning.
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


# -- NVIDIA's own guided-analysis findings from the report, largest estimated speedup first.
_SECTION = re.compile(r"@section:[^:@]*:([^@]*)@")
_URL = re.compile(r"@url:([^:@]*):([^@]*)@")


def plain(message: str, sentences: int | None = None) -> str:
    """ncu's rule markup (@section:Id:Label@, @url:Text:Link@) as plain text, optionally its first sentences."""
    text = _URL.sub(r"\1 (\2)", _SECTION.sub(r"\1", message))
    if sentences is not None:
        parts = re.split(r"(?<=[.!?])\s+(?=[A-Z])", text)
        text = " ".join(parts[:sentences]) + (" …" if len(parts) > sentences else "")
    return text


class NcuFindingsPanel:
    def __init__(self, findings: list[VendorRuleResult], title: str, limit: int = 5) -> None:
        self.findings, self.title, self.limit = findings, title, limit

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        # ncu's notes about optional metrics it lacked are about the report, not the kernel
        shown = sorted((f for f in self.findings if f.severity in ("optimization", "warning", "error")
                        and not f.message.startswith("The optional metric")),
                       key=lambda f: -(f.speedup_pct or 0.0))[: self.limit]
        if not shown:
            return
        t = Table(box=None, padding=(0, 1), expand=True, show_header=True)
        t.add_column("Est. speedup", justify="right", no_wrap=True)
        t.add_column("Rule", no_wrap=True, style="bold")
        t.add_column("Finding", overflow="fold")
        for f in shown:
            speed = f"{f.speedup_pct:.1f}% ({f.speedup_type})" if f.speedup_pct is not None else "—"
            t.add_row(speed, f.name or f.rule_id, plain(f.message, sentences=2))
        yield fitted_panel(
            t,
            f"Nsight Compute rules · {self.title}",
            options.max_width,
            subtitle="NVIDIA's guided analysis as recorded in the report (full text: show --json)",
            subtitle_align="left",
        )


# -- the panels together
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
