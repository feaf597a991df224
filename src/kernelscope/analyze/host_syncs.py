"""Which GPU gaps the host caused by synchronizing: the trace pass's host-blocking calls
(model.HostSync) matched to the idle gaps before a kernel's launches.

A synchronize returns when the GPU has run dry, and nothing new reaches the GPU until the
host launches again, so the gap after it is a host wait however short it is. A call is
counted for a launch when it returned after the previous GPU activity began and before the
launch began (CPU and GPU times share the session clock; the previous activity's start,
not its end, leaves room for the two clocks' small offset).
"""
from __future__ import annotations

import bisect

from kernelscope.analyze.timeline import Timeline
from kernelscope.model import Session

SYNC_WAIT_FORMULA = ("host time blocked in synchronize calls that returned between the previous GPU activity's "
                     "start and this launch's start")


def sync_waits_by_kernel(session: Session, timeline: Timeline) -> dict[str, tuple[int, ...]] | None:
    """Per kernel, per launch that has a gap before it (in the order of ``timeline.gaps_before``): the host's
    time (ns) blocked in synchronize calls before it, 0 where none. One pass over the timeline for every
    kernel. None when the session recorded no such calls (older sessions, or a run that never synchronized)."""
    if not session.host_syncs:
        return None
    syncs = sorted(session.host_syncs, key=lambda h: h.cpu_end_ns)
    ends = [h.cpu_end_ns for h in syncs]
    out: dict[str, list[int]] = {}
    prev_start: int | None = None
    for r in timeline.rows:
        if r.kind == "region":
            continue
        if r.kind == "kernel" and r.gap_before_ns is not None and prev_start is not None:
            lo, hi = bisect.bisect_right(ends, prev_start), bisect.bisect_right(ends, r.start_ns)
            out.setdefault(r.name, []).append(sum(h.cpu_duration_ns for h in syncs[lo:hi]))
        prev_start = r.start_ns
    return {k: tuple(v) for k, v in out.items()}
