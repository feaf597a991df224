"""Which GPU gaps the host caused by synchronizing: the trace pass's host-blocking calls
(model.HostSync: explicit synchronizes, and implicit ones such as a blocking copy or
``.item()``) matched to the GPU's idle gaps.

A gap that follows a synchronize is a sync wait whatever its length: nothing new reaches the
GPU until the host, released, launches again, and a loop that synchronizes cannot queue work
ahead (nor be captured in a CUDA graph), so even a gap as short as launch overhead is the
sync's. A call belongs to the gap in which it returned (``gaps_after_syncs``); the
breakdown (analyze/breakdown.py), the verdict's sync and launch-bound findings and the kernel
rules' host waits all match calls to gaps with this one function, so they cannot disagree.
"""
from __future__ import annotations

import bisect
from typing import Sequence

from kernelscope.analyze.thresholds import BACK_TO_BACK_GAP_NS
from kernelscope.analyze.timeline import Timeline
from kernelscope.model import HostSync, Session

SYNC_WAIT_FORMULA = ("host time blocked in the synchronize calls that returned in the GPU-idle gap before this launch "
                     "(from the end of the GPU's previous work, less the clocks' offset, to this launch's start)")


def gaps_after_syncs(syncs: Sequence[HostSync], gap_starts: Sequence[int], gap_ends: Sequence[int]
                     ) -> dict[int, list[HostSync]]:
    """Gap index -> the synchronize calls that returned in it, in the order they returned. ``gap_starts`` are
    sorted; a call belongs to the last gap that starts no later than BACK_TO_BACK_GAP_NS after its return (the CPU
    and GPU clocks' small offset), when it returned before that gap ended. Whether the call waited (began before
    the GPU ran dry) does not matter: the gap after it is the sync's either way."""
    out: dict[int, list[HostSync]] = {}
    for h in sorted(syncs, key=lambda h: h.cpu_end_ns):
        k = bisect.bisect_right(gap_starts, h.cpu_end_ns + BACK_TO_BACK_GAP_NS) - 1
        if k >= 0 and gap_starts[k] - BACK_TO_BACK_GAP_NS <= h.cpu_end_ns <= gap_ends[k]:
            out.setdefault(k, []).append(h)
    return out


def sync_waits_by_kernel(session: Session, timeline: Timeline) -> dict[str, tuple[int, ...]] | None:
    """Per kernel, per launch that has a gap before it (in the order of ``timeline.gaps_before``): the host's
    time (ns) blocked in the synchronize calls that returned in that gap (gaps_after_syncs), 0 where none. One
    pass over the timeline for every kernel. None when the session recorded no such calls (older sessions, or a
    run that never synchronized)."""
    if not session.host_syncs:
        return None
    rows = [r for r in timeline.rows if r.kind != "region"]
    gapped = [r for r in rows if r.gap_before_ns]  # a gap of 0 is no gap: nothing to wait in
    matched = gaps_after_syncs(session.host_syncs, [r.start_ns - r.gap_before_ns for r in gapped],
                               [r.start_ns for r in gapped])
    wait_of = {id(gapped[k]): sum(h.cpu_duration_ns for h in hs) for k, hs in matched.items()}
    out: dict[str, list[int]] = {}
    for r in rows:
        if r.kind == "kernel" and r.gap_before_ns is not None:
            out.setdefault(r.name, []).append(wait_of.get(id(r), 0))
    return {k: tuple(v) for k, v in out.items()}
