"""The Ranks and Collectives panels of a multi-GPU session (drawn only when it has more than one rank).

Ranks: per rank, kernel time side by side (compute, communication, idle), overlap, time
spent waiting at collectives, and the compute imbalance across ranks. Collectives: each
collective with its per-rank arrival and wait, straggler and bandwidth, and the waits
written the methodology's way ("barrier: allreduce 0.85 ms GPU0 waits for GPU3").
Takes precomputed data (analyze/collectives.py, analyze/ranks.py) only.
"""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kernelscope.analyze.collectives import BUSBW_FORMULA, WAIT_FORMULA, WARMUP_RULE, CollectiveAnalysis, CollectiveRow
from kernelscope.analyze.ranks import IMBALANCE_FORMULA, OVERLAP_FORMULA, RanksSummary
from kernelscope.analyze.thresholds import BARRIER_MARK_MIN_NS
from kernelscope.render.fmt import duration, size_bytes
from kernelscope.render.text import visible

WAIT_MARK_MIN_NS = BARRIER_MARK_MIN_NS  # waits under it are launch jitter, not a straggler


def _pct(part: int, whole: int) -> str:
    return f"{part / whole * 100:.0f}%" if whole else "N/A"


class RanksPanel:
    def __init__(self, summary: RanksSummary) -> None:
        self.summary = summary

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        t = Table(box=None, pad_edge=False, header_style="bold")
        for name in ("Rank", "Host", "GPU", "Kernels", "Compute", "Comm.", "Idle", "Overlap", "Waiting"):
            t.add_column(name, justify="left" if name in ("Host", "GPU") else "right")
        for r in self.summary.ranks:
            i = r.info
            gpu = f"{i.device_index}" if i.device_index is not None else "N/A"
            if i.device_name:
                gpu += f" {visible(i.device_name).removeprefix('NVIDIA ')}"
            t.add_row(str(i.rank), visible(i.host) if i.host else "N/A (not in the trace)", gpu, f"{r.kernels:,}",
                      f"{duration(r.compute_ns)} {_pct(r.compute_ns, r.span_ns)}",
                      f"{duration(r.communication_ns)} {_pct(r.communication_ns, r.span_ns)}",
                      f"{duration(r.idle_ns)} {_pct(r.idle_ns, r.span_ns)}",
                      "N/A (no NCCL kernels)" if r.overlap_pct is None else f"{r.overlap_pct:.0f}%",
                      f"{duration(r.wait_ns)} at {r.collectives}")
        lines: list = [t]
        imb = self.summary.compute_imbalance_pct
        lines.append(Text(f"compute imbalance across ranks: {'N/A' if imb is None else f'{imb:.1f}%'} "
                          f"({IMBALANCE_FORMULA}); overlap = {OVERLAP_FORMULA}; % of each rank's span "
                          "(first kernel start to last kernel end)", style="dim"))
        world = {r.info.world_size for r in self.summary.ranks if r.info.world_size}
        nccl = {r.info.nccl_version for r in self.summary.ranks if r.info.nccl_version}
        aligned = [r.info for r in self.summary.ranks if r.info.alignment_error_ns is not None]
        facts = [f"world size {', '.join(map(str, sorted(world)))}" if world else "world size N/A"]
        if nccl:
            facts.append("NCCL " + ", ".join(sorted(nccl)))
        if aligned:
            facts.append("clocks aligned on collective ends: " + ", ".join(
                f"rank {i.rank} offset {duration(abs(i.clock_offset_ns))}{'' if i.clock_offset_ns >= 0 else ' back'}, "
                f"error {duration(i.alignment_error_ns)}" for i in aligned))
        lines.append(Text(" · ".join(facts), style="dim"))
        for note in self.summary.notes:
            lines.append(Text(f"note: {visible(note)}", style="yellow"))
        yield Panel(Group(*lines), title=f"Ranks ({len(self.summary.ranks)})", title_align="left")


def barrier_lines(row: CollectiveRow) -> list[str]:
    """'barrier: allreduce 0.85 ms GPU0 waits for GPU3' for each rank that waited at this collective."""
    return [f"barrier: {row.name} {duration(t.wait_ns)} GPU{t.rank} waits for GPU{row.straggler_rank}"
            for t in row.ranks if t.wait_ns >= WAIT_MARK_MIN_NS and t.rank != row.straggler_rank]


class CollectivesPanel:
    def __init__(self, analysis: CollectiveAnalysis, limit: int = 20) -> None:
        self.analysis, self.limit = analysis, limit

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        a = self.analysis
        if a.missing_reason:
            yield Panel(Text(f"N/A: {a.missing_reason}"), title="Collectives", title_align="left")
            return
        t = Table(box=None, pad_edge=False, header_style="bold")
        t.add_column("Group", justify="left")
        t.add_column("#", justify="right")
        t.add_column("Operation", justify="left")
        t.add_column("Bytes", justify="right")
        for r in a.ranks:
            t.add_column(f"r{r} start", justify="right")
            t.add_column(f"r{r} wait", justify="right")
        t.add_column("Straggler", justify="right")
        t.add_column("Bus bw", justify="right")
        origin = min(row.start_ns for row in a.rows) if a.rows else 0
        for row in a.rows[: self.limit]:
            by_rank = {x.rank: x for x in row.ranks}
            cells = [visible(row.process_group), str(row.index), visible(row.name),
                     size_bytes(row.bytes) if row.bytes is not None else "N/A"]
            for r in a.ranks:
                x = by_rank.get(r)
                cells += ["—", "—"] if x is None else [f"+{duration(x.start_ns - origin)}", duration(x.wait_ns)]
            cells.append("N/A" if row.straggler_rank is None else f"rank {row.straggler_rank}")
            cells.append("N/A" if row.busbw_gb_s is None else f"{row.busbw_gb_s:.1f} GB/s")
            t.add_row(*cells)
        lines: list = [t]
        if len(a.rows) > self.limit:
            lines.append(Text(f"... {len(a.rows) - self.limit} more collectives (show --json lists all)", style="dim"))
        lines.append(Text(f"wait = {WAIT_FORMULA}; bus bw = {BUSBW_FORMULA}, algbw = bytes / (latest end - last "
                          "arrival); start = since the first collective", style="dim"))
        s = a.run_straggler
        if s is not None and s.worst is not None:
            lines.append(Text(f"straggler of the run: rank {s.rank}, last to arrive at {s.collectives} of "
                              f"{len(a.rows)} collectives, others waited {duration(s.caused_wait_ns)} in all; worst: "
                              f"{s.sentence}", style="bold"))
            for other in a.stragglers[1:]:  # e.g. a slow first step on one rank, a steady straggler on another
                lines.append(Text(f"also last to arrive: rank {other.rank} at {other.collectives} collectives, others "
                                  f"waited {duration(other.caused_wait_ns)} in all"
                                  + (f"; worst: {other.sentence}" if other.worst is not None else "")))
        late_at_warmup = [x for x in a.stragglers if x.warmup_wait_ns > 0]
        for x in late_at_warmup:
            lines.append(Text(f"warm-up: rank {x.rank} last at {x.warmup_collectives} warm-up collectives, others "
                              f"waited {duration(x.warmup_wait_ns)} (left out of the run's straggler)", style="dim"))
        if late_at_warmup:
            lines.append(Text(f"warm-up = {WARMUP_RULE}", style="dim"))
        marks = [line for row in a.rows for line in barrier_lines(row)]
        for line in marks[: self.limit]:
            lines.append(Text(line))
        if len(marks) > self.limit:
            lines.append(Text(f"... {len(marks) - self.limit} more waits", style="dim"))
        for p in a.problems:
            lines.append(Text(f"note: {visible(p)}", style="yellow"))
        yield Panel(Group(*lines), title=f"Collectives ({len(a.rows)})", title_align="left")
