"""Align the clocks of sessions recorded on different hosts on their collectives' ends.

A collective finishes together on every rank (each leaves once all have contributed), so
the k-th collective of a process group ends at the same instant on all ranks. For each
session after the first, the clock offset is the median over the collectives both hold of

    end on the first session's ranks - end on this session's ranks        (absolute clocks, ns)

and the alignment error is the largest disagreement left after that offset,
max |difference - offset|, which is shown beside the merged ranks.
"""
from __future__ import annotations

import statistics
from collections import defaultdict

from kernelscope.collect.ranks import RankPart

Key = tuple[str, int]  # (process group, occurrence)


def collective_ends(parts: list[RankPart]) -> dict[Key, list[int]]:
    """Absolute end times of each collective (process group, k-th in it) on these ranks."""
    ends: dict[Key, list[int]] = defaultdict(list)
    for p in parts:
        per_group: dict[str, list[tuple[int, int]]] = defaultdict(list)
        for x in p.session.launches:
            if x.collective is not None and x.start_ns is not None:
                per_group[x.collective.process_group or "?"].append((x.start_ns, x.start_ns + x.duration_ns))
        for pg, spans in per_group.items():
            for k, (_, end) in enumerate(sorted(spans)):
                ends[(pg, k)].append(p.session.time_origin_ns + end)
    return ends


def clock_offset(reference: list[RankPart], other: list[RankPart]) -> tuple[int, int, int] | None:
    """(offset to add to ``other``'s times, alignment error, collectives used), or None with none in common."""
    ref, mine = collective_ends(reference), collective_ends(other)
    diffs = [statistics.median(ref[k]) - statistics.median(mine[k]) for k in sorted(set(ref) & set(mine))]
    if not diffs:
        return None
    offset = int(round(statistics.median(diffs)))
    return offset, int(round(max(abs(d - offset) for d in diffs))), len(diffs)
