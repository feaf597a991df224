"""Panel 8, Timeline: the run in time order, one row per kernel, copy and region,
with the GPU-idle gaps between them called out."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.panel import Panel
from rich.markup import escape
from rich.table import Table

from kernelscope.analyze.collectives import WAIT_FORMULA
from kernelscope.analyze.thresholds import BACK_TO_BACK_GAP_NS, BARRIER_MARK_MIN_NS, HOST_WAIT_GAP_NS
from kernelscope.analyze.timeline import GAP_FORMULA, HOST_WAIT, LAUNCH_GAP, MarkRow, Timeline
from kernelscope.model.names import distinct_short_names
from kernelscope.render.fit import Column, fit_tables
from kernelscope.render.fmt import duration, size_bytes

_GAP_STYLE = {LAUNCH_GAP: "yellow", HOST_WAIT: "red"}


def _offset(ns: int) -> str:
    return f"{ns / 1e6:,.3f}"


def mark_text(m: MarkRow) -> str:
    """A mark's step, allocator bytes (or why they are absent) and values, as one line of plain text."""
    parts = [] if m.step is None else [f"step {m.step}"]
    if m.allocated_bytes is not None:
        parts.append(f"allocated {size_bytes(m.allocated_bytes)}, reserved {size_bytes(m.reserved_bytes)}")
    else:
        parts.append(f"memory N/A ({m.memory_missing_reason})")
    parts += [f"{k}={v}" for k, v in m.values]
    return " · ".join(parts)


def barrier_text(b) -> str:
    """'barrier: allreduce 0.85 ms GPU0 waits for GPU3': a timeline row's wait inside a collective."""
    return f"barrier: {b.collective} {duration(b.wait_ns)} GPU{b.rank} waits for GPU{b.straggler_rank}"


def multi_rank_note(tl) -> str:
    """What the timeline of several ranks adds under its table."""
    return (f"Several ranks: idle before is measured on the row's own rank; barrier = a rank waiting inside a "
            f"collective for the last to arrive (wait = {WAIT_FORMULA}; GPU<n> is rank n; {len(tl.barriers)} marked, "
            f"waits under {duration(BARRIER_MARK_MIN_NS)} are not).")



def gap_text(g, multi: bool) -> str:
    """A kind of gap: how many, their total (summed over the ranks' own timelines where there are several, so it
    may exceed the span), the largest and what it means."""
    what = ("CPU launching the next kernel" if g.kind == LAUNCH_GAP else
            "host doing other work (Python, synchronize, data preparation)")
    over = ", summed over the ranks" if multi else ""
    return f"{g.count:,} totalling {duration(g.total_ns)}{over}, largest {duration(g.largest_ns)}: {what}"

class TimelinePanel:
    """The run in time order on the session clock; ``from_ns``: the verdict's window start, where the rows open
    (earlier rows counted, not drawn; None: from the run's start)."""

    def __init__(self, timeline: Timeline, limit: int = 200, from_ns: int | None = None) -> None:
        self.timeline, self.limit, self.from_ns = timeline, limit, from_ns

    def _rows(self, tl: Timeline, multi: bool, labels: dict[str, str], origin: int) -> tuple[list[tuple], int]:
        """The table rows, kernels, regions and marks in time order, at most ``limit`` of them all (a million
        marks drew a million lines, quadratically); and how many rows and marks were left out."""
        rows = []
        marks, m_next, shown = tl.marks, 0, 0  # marks in time order among the rows; the limit counts both

        def mark_row(m) -> tuple:
            return (("",) if multi else ()) + (f"[magenta]{_offset(m.t_ns - origin)}[/]", "", "", "[magenta]mark[/]",
                                               f"[magenta]◆ {m.name}[/]", mark_text(m))

        before = 0
        if self.from_ns is not None:  # open on the window: earlier rows and marks are counted, not drawn
            while m_next < len(marks) and marks[m_next].t_ns < self.from_ns:
                m_next += 1
            before = m_next
        for r in tl.rows:
            if self.from_ns is not None and r.start_ns < self.from_ns:
                before += 1
                shown += 1
                continue
            while m_next < len(marks) and marks[m_next].t_ns < r.start_ns and len(rows) < self.limit:
                rows.append(mark_row(marks[m_next]))
                m_next += 1
            if len(rows) >= self.limit:
                break
            shown += 1
            if r.kind == "region":
                where = "" if r.on_gpu else " [dim](CPU span: no GPU work seen)[/]"
                rows.append(((str(r.rank),) if multi else ()) + (
                    f"[dim]{_offset(r.start_ns - origin)}[/]", f"[dim]{duration(r.duration_ns)}[/]", "",
                    "[dim]region[/]", f"[dim]▸ {r.name}[/]", where))
                continue
            gap = ""
            if r.gap_before_ns is not None and r.gap_kind in _GAP_STYLE:
                gap = f"[{_GAP_STYLE[r.gap_kind]}]{duration(r.gap_before_ns)} {r.gap_kind}[/]"
            notes = " · ".join(f"{label} {float(m.value):.0f}%" for label, m in r.notes)
            if r.barrier is not None:
                b = r.barrier
                said = barrier_text(b)
                notes = f"[magenta]{escape(said)}[/]" + (f" · {notes}" if notes else "")
            rows.append(((str(r.rank),) if multi else ()) + (
                _offset(r.start_ns - origin), duration(r.duration_ns), gap, r.kind,
                labels.get(r.name, r.short_name), notes))
        while shown == len(tl.rows) and m_next < len(marks) and len(rows) < self.limit:  # marks after the last row
            rows.append(mark_row(marks[m_next]))
            m_next += 1
        hidden = len(tl.rows) - shown + len(marks) - m_next  # rows and marks past the limit: counted, not drawn
        self.before = before
        return rows, hidden

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        tl = self.timeline
        if tl.missing_reason is not None:
            yield Panel(f"N/A: {tl.missing_reason}.", title="Timeline", title_align="left")
            return
        head = Table.grid(padding=(0, 2))
        head.add_column(style="bold", no_wrap=True)
        head.add_column(overflow="fold")
        busy_pct = 100.0 * tl.gpu_busy_ns / tl.span_ns if tl.span_ns else 0.0
        multi = any(r.rank is not None for r in tl.rows)  # several ranks: a Rank column, barriers in the notes
        head.add_row("GPU busy", f"{duration(tl.gpu_busy_ns)} of a {duration(tl.span_ns)} span ({busy_pct:.1f}%), "
                     "kernels and copies" + (" of any rank (the Ranks panel has each rank's)" if multi else ""))
        for g in tl.gaps:
            head.add_row(g.kind.capitalize() + "s", gap_text(g, multi))
        if not tl.gaps:
            head.add_row("Gaps", "none: every kernel started within "
                         f"{duration(BACK_TO_BACK_GAP_NS)} of the previous one ending")
        cols = [Column("Start ms"), Column("Duration"), Column("Idle before"), Column("Kind", "left"),
                Column("Name", "left", wrap=True, min_width=20), Column("Notes (counter pass)", "left", wrap=True)]
        if multi:
            cols.insert(0, Column("Rank"))
            cols[-1] = Column("Notes (barriers, counter pass)", "left", wrap=True)
        labels = distinct_short_names(tl.kernel_names())
        origin = 0  # the session clock, which marks, regions and the memory panel share
        rows, hidden = self._rows(tl, multi, labels, origin)
        if self.before:
            head.add_row("Opens on", f"the verdict's window at {_offset(self.from_ns)} ms: {self.before:,} earlier "
                         "rows not drawn (show --timeline N --whole-run draws the run from its start)")
        # at 80 columns the notes go to a second table, of the launches that have them
        tables = fit_tables(options.max_width - 4, cols, rows, skip_empty=True, expand=True)
        parts: list = [head, *tables]
        if hidden:
            parts.append(f"[dim]… {hidden:,} more rows (show --timeline N to see more)[/]")
        parts.append(f"[dim]Idle before = {GAP_FORMULA}; up to {duration(BACK_TO_BACK_GAP_NS)} is back-to-back "
                     f"(not shown), under {duration(HOST_WAIT_GAP_NS)} a launch gap, longer a host wait. Notes are "
                     "ncu's % of peak for the launches the counter pass measured (SM, memory, DRAM, tensor pipe, "
                     "achieved occupancy)" + ("; ◆ rows are kernelscope.mark() points (CPU time) with "
                     "torch.cuda.memory_allocated()/memory_reserved() then and the values given" if tl.marks else "")
                     + ".[/]")
        if multi:
            parts.append(f"[dim]{escape(multi_rank_note(tl))}[/]")
        yield Panel(Group(*parts), title="Timeline", title_align="left")
