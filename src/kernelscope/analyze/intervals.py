"""Time intervals (start_ns, end_ns): their union, covered length and intersection. Shared by the
warp phases of one kernel (analyze/phases.py) and the compute / communication time of ranks (analyze/ranks.py)."""
from __future__ import annotations

Interval = tuple[int, int]


def union(intervals: list[Interval]) -> list[Interval]:
    """The intervals merged where they touch or overlap, sorted. Intervals that already come by start (launch
    columns are in start order) are merged in one pass without sorting; the result is the same."""
    in_order = all(a[0] <= b[0] for a, b in zip(intervals, intervals[1:]))
    out: list[Interval] = []
    for s, e in (intervals if in_order else sorted(intervals)):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def total(intervals: list[Interval]) -> int:
    """Summed length (of a union: the covered time)."""
    return sum(e - s for s, e in intervals)


def intersect(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """The parts covered by both (the inputs need not be unions)."""
    return intersect_unions(union(a), union(b))


def intersect_unions(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """The parts covered by both of two unions (sorted, disjoint), in one sweep."""
    out: list[Interval] = []
    i = j = 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out
