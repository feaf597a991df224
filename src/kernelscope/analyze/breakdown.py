"""Where the wall time goes: per rank, the window of steady steps split into what the GPU did and why it idled.

The window is the run's steps 1 .. n-1 where `kernelscope.step()` marked steps (step 0 holds the warm-up and first
launches; the step after the last call runs to the program's end), else the span of the rank's GPU work. Every
nanosecond of the window lands in one category, in this order of precedence where activities overlap:

- ``kernels``: a computing kernel runs;
- ``communication``: only a communication (NCCL) kernel runs, and its rank is not waiting at a collective;
- ``waiting for other ranks``: the part of the communication kernels' time spent waiting for the last rank to
  arrive (analyze/collectives.WAIT_FORMULA);
- ``copies`` / ``memsets``: only a copy or a memset runs;
- the GPU idles (a gap: nothing runs), classed by what the host did:
  ``between queued kernels`` (gap up to thresholds.BACK_TO_BACK_GAP_NS: the GPU switching),
  ``after host syncs`` (a synchronize or blocking copy returned inside the gap, whether or not it had to wait:
  the GPU idles until the host, released, launches again, however short the gap (analyze/host_syncs.py); when the
  host then takes longer than thresholds.HOST_STALL_GAP_NS to launch again, that part is the host's other work),
  ``at step boundaries`` (a gap that holds the start of a step and is shorter than thresholds.HOST_STALL_GAP_NS:
  the loop's own turn, the profiler's step bookkeeping included; no rule claims it),
  ``host launching`` (gap up to thresholds.HOST_STALL_GAP_NS: the host's per-op cost, dispatch and launch),
  ``host elsewhere`` (longer gaps: the host neither launched nor waited, e.g. input preprocessing).

Gaps are measured per rank on the session clock (trace pass start times); host syncs are classed in one-rank
sessions only (a merged multi-rank session keeps no per-rank synchronize calls).
"""
from __future__ import annotations

import bisect
import gc
from itertools import compress, islice
from operator import eq, itemgetter
import re
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import NamedTuple

from kernelscope.analyze.collectives import CollectiveAnalysis
from kernelscope.analyze.host_syncs import gaps_after_syncs
from kernelscope.analyze.intervals import Interval, total
from kernelscope.analyze.recommend import COMM_KERNEL
from kernelscope.analyze.thresholds import (BACK_TO_BACK_GAP_NS, HOST_STALL_GAP_NS, MIN_REPEATS_TO_JUDGE,
                                           MIN_STEPS_TO_JUDGE)
from kernelscope.model import Session
from kernelscope.model.launch_table import collector_paused

KERNELS, COMMUNICATION, WAITING, COPIES, MEMSETS = ("kernels", "communication", "waiting for other ranks", "copies",
                                                    "memsets")
SWITCHING, AFTER_SYNC, LAUNCHING, STEP_BOUNDARY, HOST_ELSEWHERE = (
    "between queued kernels", "after host syncs", "host launching", "at step boundaries", "host elsewhere")
CATEGORIES = (KERNELS, COMMUNICATION, WAITING, COPIES, MEMSETS, SWITCHING, AFTER_SYNC, LAUNCHING, STEP_BOUNDARY,
              HOST_ELSEWHERE)
IDLE = (SWITCHING, AFTER_SYNC, LAUNCHING, STEP_BOUNDARY, HOST_ELSEWHERE)
SHARE_FORMULA = "category time in the window / window wall time"
STEP_RE = re.compile(r"ProfilerStep#(\d+)$")
COMM_KERNEL_RE = COMM_KERNEL  # communication kernels by name (analyze/recommend)


@dataclass(frozen=True)
class Share:
    category: str
    total_ns: int
    share: float  # of the window's wall time, 0..1
    count: int = 0  # gaps (idle categories), else activities that started in the window


@dataclass(frozen=True)
class RankBreakdown:
    rank: int
    window_start_ns: int
    window_end_ns: int
    window_basis: str  # which steps, or the GPU span, and why
    steps: int  # whole steps in the window (0: no steps marked)
    median_step_ns: int | None
    shares: tuple[Share, ...]  # every category, in CATEGORIES order (zeros included)
    sync_calls: tuple[tuple[str, int], ...] = ()  # the calls behind "after host syncs", with how many gaps each
    repeats: int = 0  # timed launches of the rank's most-launched kernel (the whole run)
    step_basis: str = ""  # what median_step_ns measures (GPU_STEPS or HOST_STEPS)

    @property
    def wall_ns(self) -> int:
        return self.window_end_ns - self.window_start_ns

    def ns(self, category: str) -> int:
        return next((s.total_ns for s in self.shares if s.category == category), 0)

    def count(self, category: str) -> int:
        return next((s.count for s in self.shares if s.category == category), 0)


@dataclass(frozen=True)
class Breakdown:
    ranks: tuple[RankBreakdown, ...]  # rank order; one entry for a one-process session
    formula: str = SHARE_FORMULA
    missing_reason: str | None = None  # no GPU activity with start times: nothing to break down

    def rank(self, r: int) -> RankBreakdown | None:
        return next((b for b in self.ranks if b.rank == r), None)


class GpuActivity(NamedTuple):
    """One kernel, copy or memset of a rank, for the program rules: what ran when. A tuple (a million of them are
    built for a long run), ordered by time."""

    start_ns: int
    end_ns: int
    category: str  # KERNELS | COMMUNICATION | COPIES | MEMSETS
    name: str
    grid: tuple[int, int, int] | None = None
    bytes: int | None = None


@dataclass
class RankIntervals:
    """What the breakdown reads of one rank, straight from the launch columns: each category's (start, end)
    intervals by start, and per kernel name its timed launches and the end of its first one."""

    intervals: dict[str, list[Interval]]
    launches: dict[str, int]
    first_end: dict[str, int]


def intervals_by_rank(session: Session) -> dict[int, RankIntervals]:
    table = session.launch_table()
    collective = {i for i, d in table.details.items() if d.collective is not None}
    shapes = table.shapes
    cat = [COMMUNICATION if COMM_KERNEL_RE.search(x.kernel) else KERNELS for x in shapes]
    rank_of = [x.rank or 0 for x in shapes]
    out: dict[int, RankIntervals] = {}
    starts, durs = table.start_ns, table.duration_ns
    if len(set(rank_of)) <= 1 and not collective and len(set(cat)) <= 1:  # the usual one-GPU session: one pass
        if shapes:
            iv = [(st, st + d) for st, d in zip(starts, durs) if st is not None]
            if iv:
                out[rank_of[0]] = RankIntervals({cat[0]: iv}, {}, {})
    else:
        for i, (sid, st, d) in enumerate(zip(table.shape, starts, durs)):
            if st is None:
                continue
            r = out.get(rank_of[sid])
            if r is None:
                r = out[rank_of[sid]] = RankIntervals({}, {}, {})
            r.intervals.setdefault(COMMUNICATION if i in collective else cat[sid], []).append((st, st + d))
    _, traced = table.durations_by_shape()
    for sid, x in enumerate(shapes):  # per shape: launches and first launch, for the window (no per-launch pass)
        r = out.get(rank_of[sid])
        if r is None or not traced[sid]:
            continue
        r.launches[x.kernel] = r.launches.get(x.kernel, 0) + len(traced[sid])
        first = table.first_launch(sid)  # first launches of every shape, found in one pass
        if first is None or starts[first] is None:
            first = next(i for i in _indices(table.shape, sid) if starts[i] is not None)
        end = starts[first] + durs[first]
        r.first_end[x.kernel] = min(end, r.first_end.get(x.kernel, end))
    for a in session.activities:
        r = out.get(a.rank or 0)
        if r is None:
            r = out[a.rank or 0] = RankIntervals({}, {}, {})
        r.intervals.setdefault(COPIES if a.kind == "memcpy" else MEMSETS, []).append(
            (a.start_ns, a.start_ns + a.duration_ns))
    for r in out.values():
        for iv in r.intervals.values():
            iv.sort()  # nearly sorted already: the table is in start order
    return out


def _indices(seq: list[int], value: int):
    i = -1
    while True:
        try:
            i = seq.index(value, i + 1)
        except ValueError:
            return
        yield i


@collector_paused()
def activities_by_rank(session: Session) -> dict[int, list[GpuActivity]]:
    """Every timed GPU activity per rank, by start time (trace pass columns; copies and memsets)."""
    table = session.launch_table()
    collective = {i for i, d in table.details.items() if d.collective is not None}
    shapes = table.shapes  # per shape, not per launch: rank, category, name and grid
    cat = [COMMUNICATION if COMM_KERNEL_RE.search(x.kernel) else KERNELS for x in shapes]
    grid = [tuple(x.grid) for x in shapes]
    new = tuple.__new__  # GpuActivity(...) without its Python-level __new__: a million of them
    rows = [new(GpuActivity, (st, st + d, COMMUNICATION if collective and i in collective else cat[sid],
                              shapes[sid].kernel, grid[sid], None))
            for i, (sid, st, d) in enumerate(zip(table.shape, table.start_ns, table.duration_ns)) if st is not None]
    rank_of = [x.rank or 0 for x in shapes]
    out: dict[int, list[GpuActivity]] = {}
    if len(set(rank_of)) <= 1:
        if rows:
            out[rank_of[0]] = rows
    else:
        ranks = [rank_of[sid] for sid, st in zip(table.shape, table.start_ns) if st is not None]
        for r, a in zip(ranks, rows):
            out.setdefault(r, []).append(a)
    for a in session.activities:
        kind = COPIES if a.kind == "memcpy" else MEMSETS
        out.setdefault(a.rank or 0, []).append(GpuActivity(a.start_ns, a.start_ns + a.duration_ns, kind, a.name,
                                                           None, a.bytes))
    for acts in out.values():
        _sort_by_time(acts)
    return out


def _sort_by_time(acts: list[GpuActivity]) -> None:
    """Sort stably by (start, end), as ``acts.sort(key=itemgetter(0, 1))`` does: by start (an int key, no tuple
    per row: a million rows), then each run of rows with one start by end (rows rarely share a start)."""
    acts.sort(key=itemgetter(0))  # nearly sorted already: the table is in start order
    starts = list(map(itemgetter(0), acts))
    run_end = -1
    for i in compress(range(len(starts) - 1), map(eq, starts, islice(starts, 1, None))):
        if i < run_end:
            continue  # inside a run already sorted
        j = i + 1
        while j + 1 < len(starts) and starts[j + 1] == starts[i]:
            j += 1
        acts[i:j + 1] = sorted(acts[i:j + 1], key=itemgetter(1))
        run_end = j


def step_spans(session: Session, rank: int) -> list[tuple[int, int, int]]:
    """(step number, cpu start, cpu end) of the rank's ProfilerStep#N ranges, by step."""
    out = []
    for r in session.regions:
        m = STEP_RE.match(r.name)
        if m and (r.rank or 0) == rank:
            out.append((int(m.group(1)), r.cpu_start_ns, r.cpu_start_ns + r.cpu_duration_ns))
    return sorted(set(out))


GPU_STEPS = "GPU: from each step's first GPU activity to the next step's"
HOST_STEPS = "host: the steps' CPU spans (no GPU span recorded for every step)"


def gpu_step_times(session: Session, rank: int, numbers: list[int]) -> list[int] | None:
    """The GPU time of each step (GPU_STEPS) of the given step numbers, from the steps' recorded GPU spans (the
    profiler's ProfilerStep ranges): the start of the next step's GPU work less the start of this one's, the last
    step's its GPU span when no later step has one. None when a step has no GPU span."""
    starts: dict[int, tuple[int, int]] = {}
    for r in session.regions:
        m = STEP_RE.match(r.name)
        if m and (r.rank or 0) == rank and r.gpu_start_ns is not None and r.gpu_duration_ns is not None:
            starts[int(m.group(1))] = (r.gpu_start_ns, r.gpu_start_ns + r.gpu_duration_ns)
    if not numbers or any(n not in starts for n in numbers):
        return None
    out = [starts[n + 1][0] - starts[n][0] if n + 1 in starts else starts[n][1] - starts[n][0] for n in numbers]
    return out if all(t > 0 for t in out) else None


def _window(session: Session, rank: int, ri: RankIntervals) -> tuple[int, int, str, int, int | None, str]:
    steps = step_spans(session, rank)
    if session.steps is None and steps:
        steps = steps[:-1]  # the step after the last kernelscope.step() call runs to the program's end
    steady = [s for s in steps if s[0] != 0]  # step 0: warm-up, module loading, first launches
    if steady:
        gpu = gpu_step_times(session, rank, [n for n, _, _ in steady])
        lengths = gpu or [e - s for _, s, e in steady]
        first, last = steady[0][0], steady[-1][0]
        basis = (f"steps {first}-{last} ({len(steady)} steps"
                 + (", step 0 left out: warm-up and first launches" if any(s[0] == 0 for s in steps) else "") + ")")
        return (steady[0][1], steady[-1][2], basis, len(steady), int(statistics.median(lengths)),
                GPU_STEPS if gpu else HOST_STEPS)
    # No steps: the steady part starts once every kernel that repeats has run once (its first launch carries
    # module loading and library set-up), and ends with the rank's last GPU activity.
    every = [iv for iv in ri.intervals.values() if iv]
    begin = min(iv[0][0] for iv in every)
    end = max(max(map(itemgetter(1), iv)) for iv in every)
    repeat = [ri.first_end[n] for n, c in ri.launches.items() if c >= 2]
    start = max(repeat) if repeat else begin
    if start >= end:
        start = begin
    return start, end, ("from the end of the first launch of the last repeating kernel to the rank's last GPU "
                        "activity: no steps marked (call kernelscope.step() once per iteration)"), 0, None, ""


def _union_sorted(iv: list[Interval]) -> list[Interval]:
    """The union of intervals already sorted by start (one pass, no sort: a million launches come in order)."""
    out: list[Interval] = []
    last_s = last_e = None
    for s, e in iv:
        if last_e is not None and s <= last_e:
            if e > last_e:
                last_e = e
            continue
        if last_e is not None:
            out.append((last_s, last_e))
        last_s, last_e = s, e
    if last_e is not None:
        out.append((last_s, last_e))
    return out


def _minus(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """The parts of union ``a`` not covered by union ``b`` (b found by bisection: ``a`` is usually the small one)."""
    out: list[Interval] = []
    for s, e in a:
        j = max(0, bisect.bisect_right(b, (s, s)) - 1)
        cur = s
        while j < len(b) and b[j][0] < e:
            if b[j][1] > cur:
                if b[j][0] > cur:
                    out.append((cur, b[j][0]))
                cur = b[j][1]
            j += 1
        if cur < e:
            out.append((cur, e))
    return out


def _rank_waits(collectives: CollectiveAnalysis | None, rank: int, lo: int, hi: int) -> int:
    if collectives is None:
        return 0
    waits = 0
    for row in collectives.rows:
        for t in row.ranks:
            if t.rank == rank and lo <= t.start_ns < hi:
                waits += min(t.wait_ns, max(0, min(t.end_ns, hi) - t.start_ns))
    return waits


class Gap(NamedTuple):
    start_ns: int
    end_ns: int
    category: str  # one of IDLE; a gap split by a sync's return is two Gaps
    sync_call: str | None = None


def classify_gaps(session: Session, busy: list[Interval], lo: int, hi: int, use_syncs: bool,
                  step_starts: list[int] | None = None) -> tuple[list[Gap], dict[str, int], Counter[str]]:
    """The idle intervals of the window, each classed by what the host did (module docstring): the gaps after
    host syncs, at step boundaries and of the host elsewhere one by one (the rules read them), and the total time
    and count of every category. Gaps between queued kernels and of launch overhead are only summed: a long run
    has a million of them. Syncs and step starts are few: each finds its gap by bisection."""
    edges = [lo] + [e for _, e in busy]
    gaps = [(g0, g1) for g0, g1 in zip(edges, [s for s, _ in busy] + [hi]) if g1 > g0]
    gap_starts = [g0 for g0, _ in gaps]
    special: dict[int, list[Gap]] = {}  # gap index -> its classed parts, for gaps a sync or a step start decides
    if use_syncs:
        for k, calls in gaps_after_syncs(session.host_syncs, gap_starts, [g1 for _, g1 in gaps]).items():
            g0, g1 = gaps[k]
            h = calls[-1]  # the last call to return is the one the next launch waited for
            back = max(g0, min(h.cpu_end_ns, g1))
            if g1 - back <= HOST_STALL_GAP_NS:
                special[k] = [Gap(g0, g1, AFTER_SYNC, h.name)]
            else:
                special[k] = ([Gap(g0, back, AFTER_SYNC, h.name)] if back > g0 else []) + \
                    [Gap(back, g1, HOST_ELSEWHERE, None)]
    for st in step_starts or ():
        k = bisect.bisect_right(gap_starts, st) - 1
        if k >= 0 and k not in special and gaps[k][0] < st < gaps[k][1] and \
                BACK_TO_BACK_GAP_NS < gaps[k][1] - gaps[k][0] <= HOST_STALL_GAP_NS:
            special[k] = [Gap(gaps[k][0], gaps[k][1], STEP_BOUNDARY, None)]
    lengths = [g1 - g0 for g0, g1 in gaps]
    for k in special:
        lengths[k] = -1  # classed above
    new = tuple.__new__  # Gap(...) without its Python-level __new__: a long run has many
    tail = (HOST_ELSEWHERE, None)
    out = [new(Gap, gaps[k] + tail) for k, n in enumerate(lengths) if n > HOST_STALL_GAP_NS]
    if special:  # few: merged in by start
        out = sorted(out + [g for parts in special.values() for g in parts])
    switching = [n for n in lengths if 0 <= n <= BACK_TO_BACK_GAP_NS]
    launching = [n for n in lengths if BACK_TO_BACK_GAP_NS < n <= HOST_STALL_GAP_NS]
    totals = {SWITCHING: sum(switching), LAUNCHING: sum(launching)}
    counts: Counter[str] = Counter({SWITCHING: len(switching), LAUNCHING: len(launching)})
    for g in out:
        totals[g[2]] = totals.get(g[2], 0) + g[1] - g[0]
        counts[g[2]] += 1
    return out, totals, counts


def _in_window(iv: list[Interval], lo: int, hi: int) -> tuple[list[Interval], int]:
    """The intervals of a start-ordered list that overlap [lo, hi) (unclipped), and how many start inside."""
    j = bisect.bisect_left(iv, (lo,))
    k = bisect.bisect_left(iv, (hi,))
    return [x for x in iv[:j] if x[1] > lo] + iv[j:k], k - j


def _clip_union(u: list[Interval], lo: int, hi: int) -> list[Interval]:
    """A union's intervals cut to [lo, hi] (they are disjoint and sorted: only the ends can stick out)."""
    u = [x for x in u if x[1] > lo and x[0] < hi] if u and (u[0][0] < lo or u[-1][1] > hi) else u
    if u:
        u[0] = (max(u[0][0], lo), u[0][1])
        u[-1] = (u[-1][0], min(u[-1][1], hi))
    return u


def rank_breakdown(session: Session, rank: int, ri: RankIntervals, multi_rank: bool,
                   collectives: CollectiveAnalysis | None = None) -> tuple[RankBreakdown, list[Gap]]:
    lo, hi, basis, steps, median_step, step_basis = _window(session, rank, ri)
    started: dict[str, int] = {}
    covered: list[Interval] = []
    ns: dict[str, int] = {}
    for cat in (KERNELS, COMMUNICATION, COPIES, MEMSETS):
        iv, started[cat] = _in_window(ri.intervals.get(cat, []), lo, hi)
        mine = _clip_union(_union_sorted(iv), lo, hi)
        ns[cat] = total(_minus(mine, covered) if covered else mine)
        if mine:
            covered = _union_sorted(sorted(covered + mine)) if covered else mine
    waits = min(ns[COMMUNICATION], _rank_waits(collectives, rank, lo, hi)) if multi_rank and ns[COMMUNICATION] else 0
    ns[COMMUNICATION] -= waits
    ns[WAITING] = waits
    starts = [s for _, s, _ in step_spans(session, rank)]
    gaps, idle, gap_n = classify_gaps(session, covered, lo, hi, use_syncs=not multi_rank, step_starts=starts)
    ns.update(idle)
    wall = max(1, hi - lo)
    shares = tuple(Share(c, ns.get(c, 0), ns.get(c, 0) / wall,
                         gap_n[c] if c in IDLE else started.get(c, 0)) for c in CATEGORIES)
    calls = Counter(g.sync_call for g in gaps if g.sync_call)
    return RankBreakdown(rank, lo, hi, basis, steps, median_step, shares, tuple(sorted(calls.items())),
                         max(ri.launches.values(), default=0), step_basis), gaps


def too_short(b: RankBreakdown) -> str | None:
    """Why the rank's window is too short to judge the program by (thresholds.MIN_STEPS_TO_JUDGE and
    MIN_REPEATS_TO_JUDGE), None when it holds enough of a loop."""
    if b.steps:
        if b.steps >= MIN_STEPS_TO_JUDGE:
            return None
        return (f"the window holds {b.steps} steady step, under the {MIN_STEPS_TO_JUDGE} a program finding needs: "
                "record more steps")
    if b.repeats >= MIN_REPEATS_TO_JUDGE:
        return None
    return (f"no steps marked and no kernel ran {MIN_REPEATS_TO_JUDGE} times (the most-launched ran "
            f"{b.repeats:,}), so a loop's pattern cannot be told from a one-off; record more iterations and mark "
            "each with kernelscope.step()")


@collector_paused()
def breakdown(session: Session, collectives: CollectiveAnalysis | None = None
              ) -> tuple[Breakdown, dict[int, list[Gap]]]:
    """The breakdown of every rank, with the gaps the program rules read one by one (classify_gaps)."""
    # a million tuples and lists, no reference cycles: the cyclic collector's passes over them would cost more than
    # the work itself (0.7 of 1.6 s at 10^6 launches), so it waits until the breakdown is built
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _breakdown(session, collectives)
    finally:
        if enabled:
            gc.enable()


def _breakdown(session: Session, collectives: CollectiveAnalysis | None) -> tuple[Breakdown, dict[int, list[Gap]]]:
    per_rank = intervals_by_rank(session)
    if not per_rank:
        return Breakdown((), missing_reason="no GPU activity with start times (no trace pass)"), {}
    multi = len(per_rank) > 1 or len(session.ranks) > 1
    ranks, gaps = [], {}
    for r in sorted(per_rank):
        b, g = rank_breakdown(session, r, per_rank[r], multi, collectives)
        ranks.append(b)
        gaps[r] = g
    return Breakdown(tuple(ranks)), gaps
