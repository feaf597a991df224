"""Time intervals (start_ns, end_ns): their union, covered length and intersection. Shared by the
warp phases of one kernel (analyze/phases.py) and the compute / communication time of ranks (analyze/ranks.py)."""
from __future__ import annotations

Interval = tuple[int, int]


def union(intervals: list[Interval]) -> list[Interval]:
    """The intervals merged where they touch or overlap, sorted."""
    out: list[Interval] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], e))
        else:
            out.append((s, e))
    return out


def total(intervals: list[Interval]) -> int:
    """Summed length (of a union: the covered time)."""
    return sum(e - s for s, e in intervals)


def intersect(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """The parts covered by both (the inputs need not be unions)."""
    a, b = union(a), union(b)
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
