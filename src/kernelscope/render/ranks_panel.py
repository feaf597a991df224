"""The Ranks and Collectives panels of a multi-GPU session (drawn only when it has more than one rank).

Ranks: per rank, kernel time side by side (compute, communication, idle), overlap, time
spent waiting at collectives, and the compute imbalance across ranks. Collectives: each
collective with its per-rank arrival and wait, straggler and bandwidth, and the waits
written the methodology's way ("barrier: allreduce 0.85 ms GPU0 waits for GPU3").
Takes precomputed data (analyze/collectives.py, analyze/ranks.py) only.
"""
from __future__ import annotations

from itertools import islice
from typing import Container, Sequence

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kernelscope.analyze.collectives import BUSBW_FORMULA, WAIT_FORMULA, WARMUP_RULE, CollectiveAnalysis, CollectiveRow
from kernelscope.analyze.ranks import IMBALANCE_FORMULA, OVERLAP_FORMULA, RanksSummary
from kernelscope.analyze.thresholds import BARRIER_MARK_MIN_NS
from kernelscope.render.fmt import duration, plural, size_bytes
from kernelscope.render.text import visible

WAIT_MARK_MIN_NS = BARRIER_MARK_MIN_NS  # waits under it are launch jitter, not a straggler
RANKS_SHOWN = 16  # ranks drawn one by one on the terminal; past it, the ranks that matter and a count of the rest


def _pct(part: int, whole: int) -> str:
    return f"{part / whole * 100:.0f}%" if whole else "N/A"


# -- what both the terminal and the HTML report show (the same words and numbers) -------------------

RANK_HEADERS = ("Rank", "Host", "GPU", "Kernels", "Compute", "Comm.", "Idle", "Overlap", "Waiting")
RANK_TEXT_COLUMNS = (1, 2)  # Host and GPU: text; the rest numbers


def rank_rows(summary: RanksSummary, positions: Sequence[int] | None = None) -> list[tuple[str | tuple[str, str], ...]]:
    """One row per rank (or per rank at ``positions`` in ``summary.ranks``), in RANK_HEADERS' order; a time with
    its share of the span (or the collectives it was waited at) is a pair, which the terminal prints on one line."""
    rows = []
    for r in (summary.ranks if positions is None else [summary.ranks[k] for k in positions]):
        i = r.info
        gpu = f"{i.device_index}" if i.device_index is not None else "N/A"
        if i.device_name:
            gpu += f" {visible(i.device_name).removeprefix('NVIDIA ')}"
        rows.append((str(i.rank), visible(i.host) if i.host else "N/A (not in the trace)", gpu, f"{r.kernels:,}",
                     (duration(r.compute_ns), _pct(r.compute_ns, r.span_ns)),
                     (duration(r.communication_ns), _pct(r.communication_ns, r.span_ns)),
                     (duration(r.idle_ns), _pct(r.idle_ns, r.span_ns)),
                     "N/A (no NCCL kernels)" if r.overlap_pct is None else f"{r.overlap_pct:.0f}%",
                     (duration(r.wait_ns), f"at {r.collectives}")))
    return rows


def ranks_that_matter(summary: RanksSummary, straggler_rank: int | None = None) -> dict[int, list[str]]:
    """Position in ``summary.ranks`` -> why that rank stands out: the run's straggler (when given), the most and
    the least compute (the ends of the compute imbalance), the longest wait at collectives, the most idle time.
    The first rank wins a tie."""
    ranks = summary.ranks
    out: dict[int, list[str]] = {}
    if not ranks:
        return out
    positions = range(len(ranks))
    if straggler_rank is not None:
        k = next((k for k in positions if ranks[k].info.rank == straggler_rank), None)
        if k is not None:
            out.setdefault(k, []).append("the run's straggler")
    for why, key, sign in (("most compute", "compute_ns", -1), ("least compute", "compute_ns", 1),
                           ("longest wait", "wait_ns", -1), ("most idle", "idle_ns", -1)):
        k = min(positions, key=lambda k: sign * getattr(ranks[k], key))
        out.setdefault(k, []).append(why)
    return out


def rank_selection(summary: RanksSummary, first: int = RANKS_SHOWN,
                   straggler_rank: int | None = None) -> tuple[list[int], str | None]:
    """The positions in ``summary.ranks`` to draw, in rank order, and the line that says what was left out (None:
    every rank is drawn): every rank up to ``first`` of them; past that, the first ``first`` and the ranks that
    matter (ranks_that_matter)."""
    n = len(summary.ranks)
    if n <= first:
        return list(range(n)), None
    extra = {k: why for k, why in ranks_that_matter(summary, straggler_rank).items() if k >= first}
    shown = list(range(first)) + sorted(extra)
    named = "; past the first {}: {}".format(first, ", ".join(
        f"rank {summary.ranks[k].info.rank} ({', '.join(extra[k])})" for k in sorted(extra))) if extra else ""
    return shown, f"… and {plural(n - len(shown), 'more rank')} (show --json has every rank){named}"


def rank_notes(summary: RanksSummary) -> list[tuple[str, str]]:
    """The lines under the ranks table, each (text, kind): kind 'formula', 'fact' or 'note'."""
    imb = summary.compute_imbalance_pct
    out = [(f"compute imbalance across ranks: {'N/A' if imb is None else f'{imb:.1f}%'} ({IMBALANCE_FORMULA}); "
            f"overlap = {OVERLAP_FORMULA}; waiting = the rank's waits for the last rank to arrive, summed over the "
            f"collectives it took part in (at N: N collectives); % of each rank's span (first kernel start to last "
            "kernel end)", "formula")]
    world = {r.info.world_size for r in summary.ranks if r.info.world_size}
    nccl = {r.info.nccl_version for r in summary.ranks if r.info.nccl_version}
    aligned = [r.info for r in summary.ranks if r.info.alignment_error_ns is not None]
    facts = [f"world size {', '.join(map(str, sorted(world)))}" if world else "world size N/A"]
    if nccl:
        facts.append("NCCL " + ", ".join(sorted(nccl)))
    if aligned:
        more = (f" and {plural(len(aligned) - RANKS_SHOWN, 'more rank')} (show --json has every rank)"
                if len(aligned) > RANKS_SHOWN else "")
        facts.append("clocks aligned on collective ends: " + ", ".join(
            f"rank {i.rank} offset {duration(abs(i.clock_offset_ns))}{'' if i.clock_offset_ns >= 0 else ' back'}, "
            f"error {duration(i.alignment_error_ns)}" for i in aligned[:RANKS_SHOWN]) + more)
    out.append((" · ".join(facts), "fact"))
    out += [(f"note: {visible(n)}", "note") for n in summary.notes]
    return out


def barrier_lines(row: CollectiveRow) -> list[str]:
    """'barrier: allreduce 0.85 ms GPU0 waits for GPU3' for each rank that waited at this collective."""
    return [f"barrier: {row.name} {duration(t.wait_ns)} GPU{t.rank} waits for GPU{row.straggler_rank}"
            for t in row.ranks if t.wait_ns >= WAIT_MARK_MIN_NS and t.rank != row.straggler_rank]


def _waits_marked(row: CollectiveRow) -> int:
    """How many lines barrier_lines gives for ``row``, without writing them."""
    return sum(1 for t in row.ranks if t.wait_ns >= WAIT_MARK_MIN_NS and t.rank != row.straggler_rank)


COLLECTIVE_HEADERS = ("Group", "#", "Operation", "Bytes")  # then start and wait per rank, then COLLECTIVE_TAIL
COLLECTIVE_TAIL = ("Straggler", "Bus bw")


def collective_origin(a: CollectiveAnalysis) -> int:
    """Starts are shown since the first collective."""
    return min(row.start_ns for row in a.rows) if a.rows else 0


def collective_cells(row: CollectiveRow, origin: int, ranks: Container[int] | None = None
                     ) -> tuple[list[str], list[tuple[int, str, str] | None], list[str]]:
    """A collective's cells: the head (group, #, operation, bytes), per rank of ``row.ranks`` (only those in
    ``ranks`` when given: rank, start since the first collective, wait) and the tail (straggler, bus bandwidth)."""
    head = [visible(row.process_group), str(row.index), visible(row.name),
            size_bytes(row.bytes) if row.bytes is not None else "N/A"]
    per_rank = [(x.rank, f"+{duration(x.start_ns - origin)}", duration(x.wait_ns)) for x in row.ranks
                if ranks is None or x.rank in ranks]
    tail = ["N/A" if row.straggler_rank is None else f"rank {row.straggler_rank}",
            "N/A" if row.busbw_gb_s is None else f"{row.busbw_gb_s:.1f} GB/s"]
    return head, per_rank, tail


def collective_notes(a: CollectiveAnalysis, limit: int) -> list[tuple[str, str]]:
    """The lines under the collectives table, each (text, kind): 'more', 'formula', 'straggler', 'also', 'warmup',
    'barrier' or 'note'."""
    out: list[tuple[str, str]] = []
    if len(a.rows) > limit:
        out.append((f"… {plural(len(a.rows) - limit, 'more collective')} (show --json lists all)", "more"))
    out.append((f"wait = {WAIT_FORMULA}; bus bw = {BUSBW_FORMULA}, algbw = bytes / (latest end - last arrival); "
                "start = since the first collective", "formula"))
    s = a.run_straggler
    if s is not None and s.worst is not None:
        out.append((f"straggler of the run: rank {s.rank}, last to arrive at {s.collectives} of {len(a.rows)} "
                    f"collectives, others waited {duration(s.caused_wait_ns)} in all; worst: {s.sentence}",
                    "straggler"))
        also = [x for x in a.stragglers[1:] if x.collectives]
        for other in also[:RANKS_SHOWN]:  # e.g. a slow first step on one rank, a steady straggler on another; a rank
            # last only at warm-up collectives has its warm-up line alone
            out.append((f"also last to arrive: rank {other.rank} at {plural(other.collectives, 'collective')}, "
                        f"others waited "
                        f"{duration(other.caused_wait_ns)} in all"
                        + (f"; worst: {other.sentence}" if other.worst is not None else ""), "also"))
        if len(also) > RANKS_SHOWN:
            out.append((f"… {plural(len(also) - RANKS_SHOWN, 'more rank')} last to arrive somewhere (show --json lists "
                        "all)", "more"))
    late_at_warmup = [x for x in a.stragglers if x.warmup_wait_ns > 0]
    for x in late_at_warmup[:RANKS_SHOWN]:
        out.append((f"warm-up: rank {x.rank} last at {plural(x.warmup_collectives, 'warm-up collective')}, "
                    f"others waited {duration(x.warmup_wait_ns)} (left out of the run's straggler)", "warmup"))
    if len(late_at_warmup) > RANKS_SHOWN:
        out.append((f"… {plural(len(late_at_warmup) - RANKS_SHOWN, 'more rank')} last at warm-up collectives", "more"))
    if late_at_warmup:
        out.append((f"warm-up = {WARMUP_RULE}", "formula"))
    marks = list(islice((line for row in a.rows for line in barrier_lines(row)), limit))  # the rest only counted
    out += [(line, "barrier") for line in marks]
    rest = sum(_waits_marked(row) for row in a.rows) - len(marks) if len(marks) == limit else 0
    if rest > 0:
        out.append((f"… {plural(rest, 'more wait')}", "more"))
    out += [(f"note: {visible(p)}", "note") for p in a.problems]
    return out


# -- the terminal ------------------------------------------------------------------------------------

STYLE = {"formula": "dim", "fact": "dim", "more": "dim", "warmup": "dim", "note": "yellow", "straggler": "bold",
         "also": "", "barrier": ""}
GAP = 2  # columns between two table columns (padding 1 on each side)


def stacked(headers: list[str], left: set[int], mains: list[list[str]], subs: list[list[str]], width: int,
            caption: str) -> list[Text]:
    """A table too wide for the terminal, as lines: each row's ``mains`` in aligned columns (``left``: the
    left-aligned ones), its ``subs`` under it, joined by ' · ' as many to a line as fit ``width``."""
    widths = [max(cell_len(r[i]) for r in [headers, *mains]) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        return (" " * GAP).join(c.ljust(w) if i in left else c.rjust(w)
                                for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    out = [Text(line(headers), style="bold"), Text(f"  {caption}", style="dim")]
    indent = " " * (widths[0] + GAP)
    for cells, parts in zip(mains, subs):
        out.append(Text(line(cells)))
        current = ""
        for p in parts:
            if current and cell_len(indent + current + " · " + p) > width:
                out.append(Text(indent + current, style="dim"))
                current = p
            else:
                current = f"{current} · {p}" if current else p
        if current:
            out.append(Text(indent + current, style="dim"))
    return out


class RanksPanel:
    """A row per rank where the table fits the terminal; else each rank's own columns on a line and its
    compute, communication and idle time under them."""

    def __init__(self, summary: RanksSummary, straggler_rank: int | None = None, first: int = RANKS_SHOWN) -> None:
        self.summary, self.straggler_rank, self.first = summary, straggler_rank, first

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        t = Table(box=None, pad_edge=False, header_style="bold")
        for i, name in enumerate(RANK_HEADERS):
            t.add_column(name, justify="left" if i in RANK_TEXT_COLUMNS else "right", no_wrap=True)
        positions, left_out = rank_selection(self.summary, self.first, self.straggler_rank)
        rows = [tuple(" ".join(c) if isinstance(c, tuple) else c for c in row)
                for row in rank_rows(self.summary, positions)]
        for row in rows:
            t.add_row(*row)
        inner = options.max_width - 4  # the panel's border and padding
        if console.measure(t).maximum <= inner:
            lines: list = [t]
        else:
            main, sub = (0, 1, 2, 3, 7, 8), (4, 5, 6)
            lines = stacked([RANK_HEADERS[i] for i in main], {1, 2}, [[r[i] for i in main] for r in rows],
                            [[f"{RANK_HEADERS[i].lower()} {r[i]}" for i in sub] for r in rows], inner,
                            "compute, communication and idle time of each rank, under it")
        if left_out is not None:
            lines.append(Text(left_out, style=STYLE["more"]))
        lines += [Text(text, style=STYLE[kind]) for text, kind in rank_notes(self.summary)]
        yield Panel(Group(*lines), title=f"Ranks ({len(self.summary.ranks)})", title_align="left")


class CollectivesPanel:
    """A table with a start and a wait column per rank where it fits the terminal; where it does not (80
    columns, or many ranks), each collective is a line of its own columns and, under it, its ranks' starts and
    waits, as many to a line as fit: nothing is cut."""

    def __init__(self, analysis: CollectiveAnalysis, limit: int = 20, first: int = RANKS_SHOWN) -> None:
        self.analysis, self.limit, self.first = analysis, limit, first

    def _table(self, rows: list) -> Table:
        a = self.analysis
        t = Table(box=None, pad_edge=False, header_style="bold")
        for name in COLLECTIVE_HEADERS:
            t.add_column(name, justify="left" if name in ("Group", "Operation") else "right")
        for r in a.ranks:
            t.add_column(f"r{r} start", justify="right")
            t.add_column(f"r{r} wait", justify="right")
        for name in COLLECTIVE_TAIL:
            t.add_column(name, justify="right")
        for head, per_rank, tail in rows:
            by_rank = {r: (start, wait) for r, start, wait in per_rank}
            cells = list(head)
            for r in a.ranks:
                cells += list(by_rank.get(r, ("—", "—")))
            t.add_row(*cells, *tail)
        return t

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        a = self.analysis
        if a.missing_reason:
            yield Panel(Text(f"N/A: {a.missing_reason}"), title="Collectives", title_align="left")
            return
        origin = collective_origin(a)
        inner = options.max_width - 4  # the panel's border and padding
        if len(a.ranks) > self.first:  # a column pair per rank would not fit: each row's first ranks and those
            # that matter at it (its straggler, and its first to arrive, who waited longest), under it
            first = set(a.ranks[: self.first])
            shown = [first | {row.straggler_rank, row.first_rank} for row in a.rows[: self.limit]]
            rows = [collective_cells(row, origin, ranks) for row, ranks in zip(a.rows, shown)]
            subs = [[f"r{r} {start} wait {wait}" for r, start, wait in per_rank]
                    + ([f"… {plural(len(row.ranks) - len(per_rank), 'more rank')}"]
                       if len(row.ranks) > len(per_rank) else [])
                    for row, (_, per_rank, _) in zip(a.rows, rows)]
            lines: list = stacked(list(COLLECTIVE_HEADERS + COLLECTIVE_TAIL), {0, 2},
                                  [head + tail for head, _, tail in rows], subs, inner,
                                  f"start and wait of the first {self.first} ranks, the straggler and the first to "
                                  "arrive, under it (show --json has every rank)")
        else:
            rows = [collective_cells(row, origin) for row in a.rows[: self.limit]]
            table = self._table(rows)
            if console.measure(table).maximum <= inner:
                lines = [table]
            else:
                lines = stacked(list(COLLECTIVE_HEADERS + COLLECTIVE_TAIL), {0, 2},
                                [head + tail for head, _, tail in rows],
                                [[f"r{r} {start} wait {wait}" for r, start, wait in per_rank]
                                 for _, per_rank, _ in rows], inner, "start and wait of each rank, under it")
        lines += [Text(text, style=STYLE[kind]) for text, kind in collective_notes(a, self.limit)]
        yield Panel(Group(*lines), title=f"Collectives ({len(a.rows)})", title_align="left")
