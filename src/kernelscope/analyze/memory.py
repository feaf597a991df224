"""Memory over time from the caching allocator's history (`run --memory`): allocated and reserved bytes, the
peak and what was live at it (largest allocations, with the Python stack that made them), the peak per region.

Formulas (named so every number can be traced back to the allocator's events):
- allocated(t) = allocated before the first event + sum(alloc sizes) - sum(free_requested sizes) up to t, as
  torch.cuda.memory_allocated() counts (the allocator drops a block from "allocated" when it is freed, even
  while another stream still uses it);
- reserved(t) = reserved before the first event + sum(segment_alloc, segment_map) - sum(segment_free,
  segment_unmap) up to t;
- before the first event = the snapshot's sums over its segments minus the events' net change (the allocator's
  state when the history started; what was allocated then has no recorded stack).
"""
from __future__ import annotations

import bisect
from dataclasses import dataclass

from kernelscope.model import Session
from kernelscope.model.memory import MemoryHistory
from kernelscope.model import collectors as collector

ALLOCATED_FORMULA = "allocated before the first event + sum(alloc) - sum(free_requested), event by event"
RESERVED_FORMULA = (
    "reserved before the first event + sum(segment_alloc, segment_map) - sum(segment_free, segment_unmap)"
)
BASELINE_FORMULA = "the snapshot's sum over segments - the events' net change"
TOP_ALLOCATIONS = 10
MAX_POINTS = 2000  # points kept for plots: beyond that, the largest value of each time bucket

_ALLOC_DELTA = {"alloc": 1, "free_requested": -1}
_RESERVED_DELTA = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}


@dataclass(frozen=True)
class LiveAllocation:
    size_bytes: int
    address: int
    allocated_at_ns: int  # session clock
    stack: tuple[str, ...]  # Python frames, innermost first; empty: no stack recorded


@dataclass(frozen=True)
class RegionPeak:
    name: str
    occurrences: int
    peak_allocated_bytes: int  # the largest allocated(t) inside any occurrence
    growth_bytes: int  # the largest (peak inside - allocated at entry) of an occurrence


@dataclass(frozen=True)
class MemoryPoint:
    t_ns: int
    allocated_bytes: int
    reserved_bytes: int


@dataclass(frozen=True)
class MemoryReport:
    events: int
    device_index: int
    start_ns: int
    end_ns: int
    points: tuple[MemoryPoint, ...]  # for plots: every event, or the largest per time bucket past MAX_POINTS
    points_bucketed: bool
    baseline_allocated_bytes: int
    baseline_reserved_bytes: int
    peak_allocated_bytes: int
    peak_allocated_ns: int
    peak_reserved_bytes: int
    peak_reserved_ns: int
    live_at_peak: int  # allocations live at the peak that the history saw being made
    live_at_peak_bytes: int
    untraced_at_peak_bytes: int  # allocated before the history started and still live at the peak (no stack)
    top_at_peak: tuple[LiveAllocation, ...]
    region_peaks: tuple[RegionPeak, ...]
    problems: tuple[str, ...]


@dataclass(frozen=True)
class MemoryUnavailable:
    reason: str


def memory_report(session: Session, top: int = TOP_ALLOCATIONS) -> MemoryReport | MemoryUnavailable | None:
    """None when the session did not ask for memory (no history, no memory collector status)."""
    h = session.memory
    if h is None:
        status = session.collectors.get(collector.MEMORY)
        return None if status is None else MemoryUnavailable(status.reason or "the allocator history was not recorded")
    if not len(h):
        return MemoryUnavailable("the allocator recorded no event in the window (nothing was allocated or freed)")
    h, moved = h.in_time_order()  # bucketing, bisecting and the peak's time read the events by time
    series = allocator_series(h)
    allocated, reserved, base_alloc = series.allocated_bytes, series.reserved_bytes, series.baseline_allocated_bytes
    base_reserved, problems = series.baseline_reserved_bytes, list(series.problems)
    if moved:
        problems.append(f"{moved:,} of the allocator's {len(h):,} events were out of time order in the file (the "
                        "allocator records them as they happen): they are taken in time order, events at one time "
                        "in file order")
    peak_i = max(range(len(allocated)), key=allocated.__getitem__)
    peak_r = max(range(len(reserved)), key=reserved.__getitem__)
    live, untraced = _live_at(h, peak_i, base_alloc)
    top_live = sorted(live.values(), key=lambda a: -a.size_bytes)
    return MemoryReport(
        events=len(h), device_index=h.device_index, start_ns=h.t_ns[0], end_ns=h.t_ns[-1],
        points=_points(h.t_ns, allocated, reserved), points_bucketed=len(h) > MAX_POINTS,
        baseline_allocated_bytes=base_alloc, baseline_reserved_bytes=base_reserved,
        peak_allocated_bytes=allocated[peak_i], peak_allocated_ns=h.t_ns[peak_i],
        peak_reserved_bytes=reserved[peak_r], peak_reserved_ns=h.t_ns[peak_r],
        live_at_peak=len(live), live_at_peak_bytes=sum(a.size_bytes for a in live.values()),
        untraced_at_peak_bytes=untraced, top_at_peak=tuple(top_live[:top]),
        region_peaks=_region_peaks(session, h.t_ns, allocated, base_alloc), problems=tuple(problems))


@dataclass(frozen=True)
class AllocatorSeries:
    """Bytes allocated and reserved just after each event of a history, and the state before its first."""

    allocated_bytes: list[int]
    reserved_bytes: list[int]
    baseline_allocated_bytes: int
    baseline_reserved_bytes: int
    problems: tuple[str, ...]


def allocator_series(h: MemoryHistory) -> AllocatorSeries:
    """The allocator's state after every event: the snapshot's end state minus the events' net change gives the
    state before the first event; then allocated bytes move by each alloc / free_requested, reserved bytes by
    each segment_alloc, segment_map / segment_free, segment_unmap (_ALLOC_DELTA, _RESERVED_DELTA)."""
    names = h.actions
    alloc_net = sum(_ALLOC_DELTA.get(names[a], 0) * s for a, s in zip(h.action, h.size))
    reserved_net = sum(_RESERVED_DELTA.get(names[a], 0) * s for a, s in zip(h.action, h.size))
    problems = list(h.problems)
    base_alloc, base_reserved = h.end_allocated_bytes - alloc_net, h.end_reserved_bytes - reserved_net
    if base_alloc < 0 or base_reserved < 0:
        problems.append("the events do not add up to the snapshot's state (the history lost events): allocated "
                        "before the first event is taken as 0")
        base_alloc, base_reserved = max(base_alloc, 0), max(base_reserved, 0)
    allocated, reserved = _series(h, base_alloc, base_reserved)
    return AllocatorSeries(allocated, reserved, base_alloc, base_reserved, tuple(problems))


def _series(h, base_alloc: int, base_reserved: int) -> tuple[list[int], list[int]]:
    allocated, reserved = [], []
    a, r = base_alloc, base_reserved
    for code, size in zip(h.action, h.size):
        name = h.actions[code]
        a += _ALLOC_DELTA.get(name, 0) * size
        r += _RESERVED_DELTA.get(name, 0) * size
        allocated.append(a)
        reserved.append(r)
    return allocated, reserved


def _live_at(h, index: int, base_alloc: int) -> tuple[dict[int, LiveAllocation], int]:
    """The allocations live just after event ``index``, and the bytes allocated before the history still live."""
    live: dict[int, LiveAllocation] = {}
    untraced = base_alloc
    for i in range(index + 1):
        name = h.actions[h.action[i]]
        if name == "alloc":
            sid = h.stack[i]
            live[h.address[i]] = LiveAllocation(h.size[i], h.address[i], h.t_ns[i],
                                                tuple(h.stacks[sid]) if sid >= 0 else ())
        elif name == "free_requested":
            if live.pop(h.address[i], None) is None:  # made before the history started
                untraced -= h.size[i]
    return live, max(untraced, 0)


def _points(t: list[int], allocated: list[int], reserved: list[int]) -> tuple[MemoryPoint, ...]:
    if len(t) <= MAX_POINTS:
        return tuple(MemoryPoint(*p) for p in zip(t, allocated, reserved))
    lo, span = t[0], max(t[-1] - t[0], 1)
    buckets: dict[int, MemoryPoint] = {}
    for ti, a, r in zip(t, allocated, reserved):
        b = min((ti - lo) * MAX_POINTS // span, MAX_POINTS - 1)
        old = buckets.get(b)
        buckets[b] = MemoryPoint(ti if old is None else old.t_ns, a if old is None else max(old.allocated_bytes, a),
                                 r if old is None else max(old.reserved_bytes, r))
    return tuple(buckets[b] for b in sorted(buckets))


def _region_peaks(session: Session, t: list[int], allocated: list[int], base: int) -> tuple[RegionPeak, ...]:
    """Per region name: the largest allocated(t) inside any occurrence (CPU span: the allocator runs on the host)."""
    by_name: dict[str, list[int]] = {}
    for r in session.regions:
        lo = bisect.bisect_left(t, r.cpu_start_ns)
        hi = bisect.bisect_right(t, r.cpu_start_ns + r.cpu_duration_ns)
        if lo >= len(t) or r.cpu_start_ns + r.cpu_duration_ns < t[0]:
            continue  # outside the history
        entry = allocated[lo - 1] if lo > 0 else base
        peak = max(allocated[lo:hi], default=entry)
        agg = by_name.setdefault(r.name, [0, 0, 0])
        agg[0] += 1
        agg[1] = max(agg[1], peak)
        agg[2] = max(agg[2], peak - entry)
    rows = [RegionPeak(n, c, p, g) for n, (c, p, g) in by_name.items()]
    return tuple(sorted(rows, key=lambda x: (-x.peak_allocated_bytes, x.name)))
