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

import math
from dataclasses import dataclass
from itertools import islice
from operator import itemgetter, le
from typing import Iterable

from kernelscope.analyze.collectives import CollectiveAnalysis
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


@dataclass(frozen=True)
class _Busy:
    """One rank's kernel time from the launch columns: unions' lengths, first start to last end."""

    kernels: int = 0
    span_ns: int = 0
    communication_ns: int = 0  # union of its NCCL kernels' intervals
    compute_ns: int = 0  # union of its other kernels' intervals
    busy_ns: int = 0  # union of all its kernels' intervals


def _busy_by_rank(session: Session) -> dict[int, _Busy]:
    """Per rank (a rank is part of a launch's shape; a collective is a launch detail), the lengths of the unions
    of its communication, compute and all kernels, in one sweep by start: each union is merged as
    intervals.union merges it, keeping only its running end and length (no list of intervals per union)."""
    table = session.launch_table()
    collective = {i for i, d in table.details.items() if d.collective is not None}
    rank_of_shape = [s.rank or 0 for s in table.shapes]
    columns: dict[int, tuple[list[int], list[int], list[bool]]] = {}
    for i, (sid, start, d) in enumerate(zip(table.shape, table.start_ns, table.duration_ns)):
        if start is None:
            continue
        starts, ends, comm = columns.setdefault(rank_of_shape[sid], ([], [], []))
        starts.append(start)
        ends.append(start + d)
        comm.append(i in collective)
    out: dict[int, _Busy] = {}
    for rank, (starts, ends, comm) in columns.items():
        rows: Iterable[tuple[int, int, bool]] = zip(starts, ends, comm)
        if not all(map(le, starts, islice(starts, 1, None))):
            rows = sorted(rows, key=itemgetter(0, 1))
        # Per union, the end of its last piece and its covered length; a piece opens where an interval starts
        # after that end (the first interval: after -inf).
        all_end = comm_end = comp_end = -math.inf
        all_ns = comm_ns = comp_ns = 0
        first = None
        for st, e, c in rows:
            if first is None:
                first = st
            if st > all_end:
                all_ns += e - st
                all_end = e
            elif e > all_end:
                all_ns += e - all_end
                all_end = e
            if c:
                if st > comm_end:
                    comm_ns += e - st
                    comm_end = e
                elif e > comm_end:
                    comm_ns += e - comm_end
                    comm_end = e
            elif st > comp_end:
                comp_ns += e - st
                comp_end = e
            elif e > comp_end:
                comp_ns += e - comp_end
                comp_end = e
        out[rank] = _Busy(len(starts), int(all_end) - first if first is not None else 0, comm_ns, comp_ns, all_ns)
    return out


def summarize_ranks(session: Session, collectives: CollectiveAnalysis) -> RanksSummary:
    infos = session.ranks or [RankInfo(rank=0, world_size=1)]
    waits: dict[int, int] = {}
    counts: dict[int, int] = {}
    for row in collectives.rows:
        for t in row.ranks:
            waits[t.rank] = waits.get(t.rank, 0) + t.wait_ns
            counts[t.rank] = counts.get(t.rank, 0) + 1
    busy = _busy_by_rank(session)
    out = []
    for info in infos:
        b = busy.get(info.rank, _Busy())
        c, ov = b.communication_ns, b.compute_ns + b.communication_ns - b.busy_ns  # |A ∩ B| = |A| + |B| - |A ∪ B|
        out.append(RankTime(info=info, kernels=b.kernels, span_ns=b.span_ns, compute_ns=b.compute_ns,
                            communication_ns=c, idle_ns=b.span_ns - b.busy_ns, overlap_ns=ov,
                            overlap_pct=ov / c * 100 if c else None, wait_ns=waits.get(info.rank, 0),
                            collectives=counts.get(info.rank, 0)))
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
