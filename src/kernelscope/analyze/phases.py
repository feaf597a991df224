"""Phase scopes (per warp) -> durations, idle gaps, overlap between phases, and checks.

Pure. Times are in ``PhaseScopes.time_unit`` (SM cycles for Proton): warps of
one block share an SM and so a clock, so overlap is measured inside a block and
summarised over blocks; different SMs' cycle counters are never compared.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass
from itertools import pairwise

from kernelscope.analyze.intervals import Interval, intersect_unions, total, union
from kernelscope.model import Launch, PhaseScopes, WarpScopes

PER_WARP_FORMULA = "per warp: sum of (end - start) over that phase's scopes; then median / min / max over warps"
IDLE_FORMULA = ("unscoped = warp span (first start to last end) - time inside any scope: the warp ran unmarked "
                "code or waited; not necessarily idle")
OVERLAP_FORMULA = ("per block: time some warp is in A while some warp is in B / block span; median over blocks "
                   "(nested scopes count as overlapping)")
SHARE_FORMULA = "median over blocks of (time some warp is in the phase / block span)"
OVERLAP_PHASES = 16  # the busiest phases panels name and overlaps are measured between: pairs grow as its square

def covered(intervals: list[Interval]) -> int:
    return total(union(intervals))


@dataclass(frozen=True)
class PhaseStat:
    name: str
    scopes: int  # scope instances recorded, all warps
    warps: int  # warps that entered the phase
    per_warp_median: float  # time per warp (sum of its instances)
    per_warp_min: int
    per_warp_max: int
    first_start_median: float  # median over warps of the phase's first start (from the block's first record)
    share_of_block_median: float | None  # 0..1, SHARE_FORMULA; None: no block with a span
    total: int = 0  # time in the phase summed over all warps: what ranks the busiest phases


@dataclass(frozen=True)
class WarpIdle:
    block_id: int
    warp: int
    span: int
    busy: int
    idle: int
    gaps: tuple[Interval, ...]  # between merged scopes, in time order


@dataclass(frozen=True)
class Overlap:
    a: str
    b: str
    fraction_median: float  # 0..1 of the block span, OVERLAP_FORMULA
    blocks: int


@dataclass(frozen=True)
class PhaseSummary:
    unit: str
    blocks: int
    warps: int
    phases: tuple[PhaseStat, ...]  # in order of median first start
    overlaps: tuple[Overlap, ...]  # pairs with any overlap, largest first
    block_span_median: float | None
    checks: tuple[str, ...]  # what was checked against what, and what could not be, one sentence each
    problems: tuple[str, ...]  # what the collector dropped (from PhaseScopes.problems)
    overlap_phases: int = 0  # how many phases (the busiest) the overlaps were measured between
    busiest: tuple[PhaseStat, ...] = ()  # the OVERLAP_PHASES with the most time over all warps, in ``phases`` order


def _by_block(s: PhaseScopes) -> dict[int, list[WarpScopes]]:
    out: dict[int, list[WarpScopes]] = defaultdict(list)
    for w in s.warps:
        out[w.block_id].append(w)
    return out


def warp_idle(w: WarpScopes) -> WarpIdle:
    m = union(list(zip(w.start_ns, w.end_ns)))
    if not m:
        return WarpIdle(w.block_id, w.warp, 0, 0, 0, ())
    gaps = tuple((a[1], b[0]) for a, b in pairwise(m))
    span, busy = m[-1][1] - m[0][0], sum(e - s for s, e in m)
    return WarpIdle(w.block_id, w.warp, span, busy, span - busy, gaps)


def block_span(ws: list[WarpScopes]) -> int:
    starts = [s for w in ws for s in w.start_ns]
    ends = [e for w in ws for e in w.end_ns]
    return max(ends) - min(starts) if starts else 0


def check_scopes(s: PhaseScopes, launch: Launch | None) -> list[str]:
    """Consistency of the scopes with themselves and with the launch's measured duration."""
    out: list[str] = []
    bad = sum(1 for w in s.warps for a, b in zip(w.start_ns, w.end_ns) if b < a)
    if bad:
        out.append(f"{bad} scope(s) end before they start")
    unknown = sum(1 for w in s.warps for sc in w.scope if not 0 <= sc < len(s.names))
    if unknown:
        out.append(f"{unknown} scope(s) point to no phase name")
    if launch is not None:
        offsets = [w.block_offset_ns for w in s.warps if w.block_offset_ns is not None]
        if offsets and max(offsets) > launch.duration_ns:
            out.append(f"a block started {max(offsets):,} ns after the first, later than the launch's measured "
                       f"duration ({launch.duration_ns:,} ns): the scopes may come from another launch")
        elif offsets:
            out.append(f"block starts (%globaltimer) within the launch's measured duration: the last block started "
                       f"{max(offsets):,} ns after the first; the trace pass timed the launch at "
                       f"{launch.duration_ns:,} ns")
    if s.clock_offset_ns is None and s.warps:
        out.append(f"scope times are {s.time_unit} on each SM's own counter, with no offset to the session clock: "
                   "whether every scope lies inside the launch's measured span cannot be checked")
    return out


def _phase_name(s: PhaseScopes, sc: int) -> str:
    return s.names[sc] if 0 <= sc < len(s.names) else f"scope {sc}"


def _block_unions(ws: list[WarpScopes]) -> dict[int, list[Interval]]:
    """Per phase: the union of its scopes over the block's warps (one pass over the block's records)."""
    by_phase: dict[int, list[Interval]] = defaultdict(list)
    for w in ws:
        for sc, st, en in zip(w.scope, w.start_ns, w.end_ns):
            by_phase[sc].append((st, en))
    return {sc: union(ivs) for sc, ivs in by_phase.items()}


def _overlaps(s: PhaseScopes, unions: dict[int, dict[int, list[Interval]]], spans: dict[int, int],
              ids: list[int]) -> list[Overlap]:
    out = []
    for i, a in enumerate(ids):
        for b in ids[i + 1:]:
            fr = [total(intersect_unions(u.get(a, []), u.get(b, []))) / spans[blk]
                  for blk, u in unions.items() if spans[blk] > 0]
            if fr and max(fr) > 0:
                out.append(Overlap(_phase_name(s, a), _phase_name(s, b), statistics.median(fr), len(fr)))
    out.sort(key=lambda o: -o.fraction_median)
    return out


def summarize_phases(s: PhaseScopes, launch: Launch | None = None) -> PhaseSummary:
    """Every phase's durations and share; overlaps between the OVERLAP_PHASES busiest phases (most time over
    all warps), so the pairs stay few however many phase ids the kernel used. Linear in the records but for
    the sort inside each union."""
    blocks = _by_block(s)
    per_warp: dict[int, list[int]] = defaultdict(list)
    first: dict[int, list[int]] = defaultdict(list)
    count: dict[int, int] = defaultdict(int)
    for w in s.warps:
        totals: dict[int, int] = {}
        firsts: dict[int, int] = {}
        for sc, st, en in zip(w.scope, w.start_ns, w.end_ns):
            totals[sc] = totals.get(sc, 0) + en - st
            firsts[sc] = min(firsts.get(sc, st), st)
            count[sc] += 1
        for sc, t in totals.items():
            per_warp[sc].append(t)
            first[sc].append(firsts[sc])
    spans = {b: block_span(ws) for b, ws in blocks.items()}
    unions = {b: _block_unions(ws) for b, ws in blocks.items()}
    shares: dict[int, list[float]] = defaultdict(list)
    for b, u in unions.items():
        if spans[b] > 0:
            for sc in per_warp:
                shares[sc].append(total(u.get(sc, [])) / spans[b])
    stats = [PhaseStat(_phase_name(s, sc), count[sc], len(v), statistics.median(v), min(v), max(v),
                       statistics.median(first[sc]), statistics.median(shares[sc]) if shares[sc] else None, sum(v))
             for sc, v in per_warp.items()]
    stats.sort(key=lambda p: (p.first_start_median, p.name))
    busiest = sorted(per_warp, key=lambda sc: (-sum(per_warp[sc]), sc))[:OVERLAP_PHASES]
    overlaps = _overlaps(s, unions, spans, sorted(busiest))
    nonzero = [v for v in spans.values() if v > 0]
    return PhaseSummary(s.time_unit, len(blocks), len(s.warps), tuple(stats), tuple(overlaps),
                        statistics.median(nonzero) if nonzero else None, tuple(check_scopes(s, launch)),
                        tuple(s.problems), len(busiest), busiest_phases(stats, OVERLAP_PHASES))


def busiest_phases(stats: list[PhaseStat], limit: int) -> tuple[PhaseStat, ...]:
    """The ``limit`` phases with the most time over all warps, in the order of ``stats``."""
    if len(stats) <= limit:
        return tuple(stats)
    keep = set(sorted(range(len(stats)), key=lambda i: (-stats[i].total, i))[:limit])
    return tuple(p for i, p in enumerate(stats) if i in keep)


@dataclass(frozen=True)
class ScopedLaunchView:
    """One launch with Proton phase scopes, analysed for panels 4 (warp execution) and 8 (inside the kernel)."""

    launch: Launch
    phases: PhaseSummary | None  # None: no scopes were recorded (the panels say N/A and why)
    warp_idle: tuple[WarpIdle, ...]  # one per launch.scopes.warps entry, in that order


def scoped_view(launch: Launch) -> ScopedLaunchView:
    s = launch.scopes
    if s is None or not s.warps:
        return ScopedLaunchView(launch, None, ())
    return ScopedLaunchView(launch, summarize_phases(s, launch), tuple(warp_idle(w) for w in s.warps))
