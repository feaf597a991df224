"""Per-rank kernel time side by side: compute, communication, idle, their overlap, and the
imbalance across ranks. Plain data; the Ranks panel and `show --json` draw it.

For each rank, over its span (first kernel start to last kernel end on the session clock):
    communication = union of its NCCL kernels' intervals (waiting in them included)
    compute       = union of its other kernels' intervals
    idle          = span - union of all its kernels
    overlap %     = |compute ∩ communication| / communication * 100  (communication hidden under compute)
    wait          = sum of its waits at collectives (analyze/collectives.py)
Across ranks:
    imbalance %   = (max compute - mean compute) / mean compute * 100  (max/mean - 1, the usual load-imbalance)
"""
from __future__ import annotations

from dataclasses import dataclass

from kernelscope.analyze.collectives import CollectiveAnalysis
from kernelscope.analyze.intervals import Interval, total, union
from kernelscope.model import RankInfo, Session
from kernelscope.model.launch_table import collector_paused

OVERLAP_FORMULA = "|compute ∩ communication| / communication * 100"
IMBALANCE_FORMULA = "(max compute - mean compute) / mean compute * 100"

@dataclass(frozen=True)
class RankTime:
    info: RankInfo
    kernels: int
    span_ns: int
    compute_ns: int
    communication_ns: int
    idle_ns: int
    overlap_ns: int
    overlap_pct: float | None  # None: no communication
    wait_ns: int  # at collectives
    collectives: int


@dataclass(frozen=True)
class RanksSummary:
    ranks: tuple[RankTime, ...]
    compute_imbalance_pct: float | None  # None: fewer than 2 ranks or no compute
    notes: tuple[str, ...]  # what the join left out or could not match (the session's `ranks` collector)


def _spans_by_rank(session: Session) -> dict[int, tuple[list[Interval], list[Interval]]]:
    """Per rank, the (start, end) of its communication kernels and of its other kernels, read from the launch
    columns (a rank is part of a launch's shape; a collective is a launch detail)."""
    table = session.launch_table()
    collective = {i for i, d in table.details.items() if d.collective is not None}
    rank_of_shape = [s.rank or 0 for s in table.shapes]
    out: dict[int, tuple[list[Interval], list[Interval]]] = {}
    for i, (sid, start, d) in enumerate(zip(table.shape, table.start_ns, table.duration_ns)):
        if start is None:
            continue
        comm, comp = out.setdefault(rank_of_shape[sid], ([], []))
        (comm if i in collective else comp).append((start, start + d))
    return out


def _one_rank_no_collectives(session: Session, infos: list[RankInfo]) -> tuple[int, int, int] | None:
    """For a session of one rank whose launches run no collective: (union of its kernels' intervals, first start
    to last end, timed kernels), in one pass over the columns (the same numbers as union/total of the
    intervals); None for any other session."""
    table = session.launch_table()
    if len(infos) != 1 or any(d.collective is not None for d in table.details.values()) \
            or {s.rank or 0 for s in table.shapes} - {infos[0].rank}:
        return None
    start, dur = table.start_ns, table.duration_ns
    if None in start:
        pairs = [(st, d) for st, d in zip(start, dur) if st is not None]
        start, dur = [p[0] for p in pairs], [p[1] for p in pairs]
    if not start:
        return 0, 0, 0
    if not all(a <= b for a, b in zip(start, start[1:])):
        order = sorted(range(len(start)), key=start.__getitem__)
        start, dur = [start[k] for k in order], [dur[k] for k in order]
    first, end, busy = start[0], start[0], 0
    for st, d in zip(start, dur):  # intervals by start: merged as union() merges them
        e = st + d
        if st > end:
            busy += e - st
            end = e
        elif e > end:
            busy += e - end
            end = e
    return busy, end - first, len(start)


def summarize_ranks(session: Session, collectives: CollectiveAnalysis) -> RanksSummary:
    infos = session.ranks or [RankInfo(rank=0, world_size=1)]
    waits: dict[int, int] = {}
    counts: dict[int, int] = {}
    for row in collectives.rows:
        for t in row.ranks:
            waits[t.rank] = waits.get(t.rank, 0) + t.wait_ns
            counts[t.rank] = counts.get(t.rank, 0) + 1
    fast = _one_rank_no_collectives(session, infos)
    spans = {} if fast is not None else _spans_by_rank(session)
    out = []
    for info in infos:
        if fast is not None:  # the usual one-GPU session: compute is every kernel, no interval list needed
            busy_ns, span, n_kernels = fast
            out.append(RankTime(info=info, kernels=n_kernels, span_ns=span, compute_ns=busy_ns, communication_ns=0,
                                idle_ns=span - busy_ns, overlap_ns=0, overlap_pct=None,
                                wait_ns=waits.get(info.rank, 0), collectives=counts.get(info.rank, 0)))
            continue
        comm_raw, comp_raw = spans.get(info.rank, ([], []))
        comm, comp = union(comm_raw), union(comp_raw)
        n_kernels = len(comm_raw) + len(comp_raw)
        busy = union(comm + comp)  # two sorted runs: the sort merges them
        span = (busy[-1][1] - busy[0][0]) if busy else 0
        c, busy_ns, compute_ns = total(comm), total(busy), total(comp)
        ov = compute_ns + c - busy_ns  # |A ∩ B| = |A| + |B| - |A ∪ B|: no second sweep over the unions
        out.append(RankTime(info=info, kernels=n_kernels, span_ns=span, compute_ns=compute_ns, communication_ns=c,
                            idle_ns=span - busy_ns, overlap_ns=ov, overlap_pct=ov / c * 100 if c else None,
                            wait_ns=waits.get(info.rank, 0), collectives=counts.get(info.rank, 0)))
    computes = [r.compute_ns for r in out]
    mean = sum(computes) / len(computes) if computes else 0
    imbalance = (max(computes) - mean) / mean * 100 if len(computes) > 1 and mean > 0 else None
    status = session.collectors.get("ranks")
    listed = status.details.get("notes") if status else None  # free-form details: a list only if it is one
    notes = tuple(str(n) for n in (listed if isinstance(listed, list) else [])) + collectives.problems
    return RanksSummary(tuple(out), imbalance, notes)


@dataclass(frozen=True)
class RanksReport:
    """What the Ranks and Collectives panels and `show --json` draw."""

    collectives: CollectiveAnalysis
    summary: RanksSummary

    @property
    def multi_rank(self) -> bool:
        return len(self.summary.ranks) > 1


@collector_paused()
def ranks_report(session: Session) -> RanksReport:
    from kernelscope.analyze.collectives import analyze_collectives

    c = analyze_collectives(session)
    return RanksReport(c, summarize_ranks(session, c))
