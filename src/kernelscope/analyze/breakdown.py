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
  ``after host syncs`` (a synchronize or blocking copy that was waiting when the GPU went idle returned inside the
  gap: the GPU idles for the host's round trip; when the host then takes longer than
  thresholds.HOST_STALL_GAP_NS to launch again, that part is the host's other work),
  ``at step boundaries`` (a gap that holds the start of a step and is shorter than thresholds.HOST_STALL_GAP_NS:
  the loop's own turn, the profiler's step bookkeeping included; no rule claims it),
  ``host launching`` (gap up to thresholds.HOST_STALL_GAP_NS: the host's per-op cost, dispatch and launch),
  ``host elsewhere`` (longer gaps: the host neither launched nor waited, e.g. input preprocessing).

Gaps are measured per rank on the session clock (trace pass start times); host syncs are classed in one-rank
sessions only (a merged multi-rank session keeps no per-rank synchronize calls).
"""
from __future__ import annotations

import bisect
from operator import itemgetter
import re
import statistics
from collections import Counter
from dataclasses import dataclass
from typing import NamedTuple

from kernelscope.analyze.collectives import CollectiveAnalysis
from kernelscope.analyze.intervals import Interval, total
from kernelscope.analyze.recommend import COMM_KERNEL
from kernelscope.analyze.thresholds import BACK_TO_BACK_GAP_NS, HOST_STALL_GAP_NS
from kernelscope.model import Session

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
        acts.sort(key=itemgetter(0, 1))  # nearly sorted already: the table is in start order
    return out


def step_spans(session: Session, rank: int) -> list[tuple[int, int, int]]:
    """(step number, cpu start, cpu end) of the rank's ProfilerStep#N ranges, by step."""
    out = []
    for r in session.regions:
        m = STEP_RE.match(r.name)
        if m and (r.rank or 0) == rank:
            out.append((int(m.group(1)), r.cpu_start_ns, r.cpu_start_ns + r.cpu_duration_ns))
    return sorted(set(out))


def _window(session: Session, rank: int, acts: list[GpuActivity]) -> tuple[int, int, str, int, int | None]:
    steps = step_spans(session, rank)
    if session.steps is None and steps:
        steps = steps[:-1]  # the step after the last kernelscope.step() call runs to the program's end
    steady = [s for s in steps if s[0] != 0]  # step 0: warm-up, module loading, first launches
    if steady:
        lengths = [e - s for _, s, e in steady]
        first, last = steady[0][0], steady[-1][0]
        basis = (f"steps {first}-{last} ({len(steady)} steps"
                 + (", step 0 left out: warm-up and first launches" if any(s[0] == 0 for s in steps) else "") + ")")
        return steady[0][1], steady[-1][2], basis, len(steady), int(statistics.median(lengths))
    # No steps: the steady part starts once every kernel that repeats has run once (its first launch carries
    # module loading and library set-up), and ends with the rank's last GPU activity.
    seen = Counter(a[3] for a in acts if a[2] is KERNELS or a[2] is COMMUNICATION)
    first: dict[str, int] = {}
    for a in acts:  # in start order: stops once every kernel has been seen
        if a[3] in seen and a[3] not in first:
            first[a[3]] = a[1]
            if len(first) == len(seen):
                break
    repeat = [first[n] for n, c in seen.items() if c >= 2]
    end = max(map(itemgetter(1), acts))
    start = max(repeat) if repeat else acts[0][0]
    if start >= end:
        start = acts[0][0]
    return start, end, ("from the end of the first launch of the last repeating kernel to the rank's last GPU "
                        "activity: no steps marked (call kernelscope.step() once per iteration)"), 0, None


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
    has a million of them."""
    syncs = sorted(((h.cpu_end_ns, h.cpu_start_ns, h.name) for h in session.host_syncs), key=lambda x: x[0]) \
        if use_syncs else []
    ends = [x[0] for x in syncs]
    steps = sorted(step_starts or [])
    new = tuple.__new__
    out: list[Gap] = []
    switching = switching_n = launching = launching_n = 0
    cur = lo
    for s, e in [*busy, (hi, hi)]:
        g0, g1 = cur, s
        if e > cur:
            cur = e
        if g1 <= g0:
            continue
        n = g1 - g0
        if ends:
            sync = None
            k = bisect.bisect_right(ends, g1) - 1
            while k >= 0 and ends[k] >= g0 - BACK_TO_BACK_GAP_NS:
                if syncs[k][1] < g0:  # it was waiting when the GPU went idle
                    sync = syncs[k]
                    break
                k -= 1
            if sync is not None:
                back = max(g0, min(sync[0], g1))
                if g1 - back <= HOST_STALL_GAP_NS:
                    out.append(new(Gap, (g0, g1, AFTER_SYNC, sync[2])))
                else:
                    if back > g0:
                        out.append(new(Gap, (g0, back, AFTER_SYNC, sync[2])))
                    out.append(new(Gap, (back, g1, HOST_ELSEWHERE, None)))
                continue
        if n <= BACK_TO_BACK_GAP_NS:
            switching += n
            switching_n += 1
        elif n <= HOST_STALL_GAP_NS:
            j = bisect.bisect_right(steps, g0) if steps else 0
            if j < len(steps) and steps[j] < g1:
                out.append(new(Gap, (g0, g1, STEP_BOUNDARY, None)))
            else:
                launching += n
                launching_n += 1
        else:
            out.append(new(Gap, (g0, g1, HOST_ELSEWHERE, None)))
    totals = {SWITCHING: switching, LAUNCHING: launching}
    counts: Counter[str] = Counter({SWITCHING: switching_n, LAUNCHING: launching_n})
    for g in out:
        totals[g[2]] = totals.get(g[2], 0) + g[1] - g[0]
        counts[g[2]] += 1
    return out, totals, counts


def rank_breakdown(session: Session, rank: int, acts: list[GpuActivity], multi_rank: bool,
                   collectives: CollectiveAnalysis | None = None) -> tuple[RankBreakdown, list[Gap]]:
    lo, hi, basis, steps, median_step = _window(session, rank, acts)
    by_cat: dict[str, list[Interval]] = {c: [] for c in (KERNELS, COMMUNICATION, COPIES, MEMSETS)}
    started: Counter[str] = Counter()
    for a in acts:  # by start: each category's list stays sorted
        if a[1] > lo and a[0] < hi:
            by_cat[a[2]].append((a[0] if a[0] > lo else lo, a[1] if a[1] < hi else hi))
            if a[0] >= lo:
                started[a[2]] += 1
    covered: list[Interval] = []
    ns: dict[str, int] = {}
    for cat in (KERNELS, COMMUNICATION, COPIES, MEMSETS):
        mine = _union_sorted(by_cat[cat])
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
    return RankBreakdown(rank, lo, hi, basis, steps, median_step, shares, tuple(sorted(calls.items()))), gaps


def breakdown(session: Session, collectives: CollectiveAnalysis | None = None
              ) -> tuple[Breakdown, dict[int, list[Gap]], dict[int, list[GpuActivity]]]:
    """The breakdown of every rank, with the gaps the program rules read one by one (classify_gaps) and the
    activities."""
    acts = activities_by_rank(session)
    if not acts:
        return Breakdown((), missing_reason="no GPU activity with start times (no trace pass)"), {}, {}
    multi = len(acts) > 1 or len(session.ranks) > 1
    ranks, gaps = [], {}
    for r in sorted(acts):
        b, g = rank_breakdown(session, r, acts[r], multi, collectives)
        ranks.append(b)
        gaps[r] = g
    return Breakdown(tuple(ranks)), gaps, acts
