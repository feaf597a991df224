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
import re
import statistics
from collections import Counter
from dataclasses import dataclass

from kernelscope.analyze.collectives import CollectiveAnalysis
from kernelscope.analyze.intervals import Interval, total, union
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
COMM_KERNEL_RE = re.compile(r"^nccl|ncclDevKernel|ncclKernel", re.IGNORECASE)


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


@dataclass(frozen=True)
class GpuActivity:
    """One kernel, copy or memset of a rank, for the program rules: what ran when."""

    category: str  # KERNELS | COMMUNICATION | COPIES | MEMSETS
    name: str
    start_ns: int
    end_ns: int
    grid: tuple[int, int, int] | None = None
    bytes: int | None = None


def activities_by_rank(session: Session) -> dict[int, list[GpuActivity]]:
    """Every timed GPU activity per rank, by start time (trace pass columns; copies and memsets)."""
    table = session.launch_table()
    collective = {i for i, d in table.details.items() if d.collective is not None}
    out: dict[int, list[GpuActivity]] = {}
    for i, (sid, start, d) in enumerate(zip(table.shape, table.start_ns, table.duration_ns)):
        if start is None:
            continue
        s = table.shapes[sid]
        comm = i in collective or bool(COMM_KERNEL_RE.search(s.kernel))
        out.setdefault(s.rank or 0, []).append(GpuActivity(COMMUNICATION if comm else KERNELS, s.kernel, start,
                                                           start + d, tuple(s.grid)))
    for a in session.activities:
        cat = COPIES if a.kind == "memcpy" else MEMSETS
        out.setdefault(a.rank or 0, []).append(GpuActivity(cat, a.name, a.start_ns, a.start_ns + a.duration_ns,
                                                           bytes=a.bytes))
    for acts in out.values():
        acts.sort(key=lambda x: (x.start_ns, x.end_ns))
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
    first: dict[str, int] = {}
    seen: Counter[str] = Counter()
    for a in acts:
        if a.category in (KERNELS, COMMUNICATION):
            seen[a.name] += 1
            first.setdefault(a.name, a.end_ns)
    repeat = [first[n] for n, c in seen.items() if c >= 2]
    end = max(a.end_ns for a in acts)
    start = max(repeat) if repeat else min(a.start_ns for a in acts)
    if start >= end:
        start = min(a.start_ns for a in acts)
    return start, end, ("from the end of the first launch of the last repeating kernel to the rank's last GPU "
                        "activity: no steps marked (call kernelscope.step() once per iteration)"), 0, None


def _clip(iv: list[Interval], lo: int, hi: int) -> list[Interval]:
    return [(max(s, lo), min(e, hi)) for s, e in iv if e > lo and s < hi]


def _minus(a: list[Interval], b: list[Interval]) -> list[Interval]:
    """The parts of union ``a`` not covered by union ``b``."""
    out: list[Interval] = []
    j = 0
    for s, e in a:
        cur = s
        while j < len(b) and b[j][1] <= cur:
            j += 1
        k = j
        while k < len(b) and b[k][0] < e:
            if b[k][0] > cur:
                out.append((cur, b[k][0]))
            cur = max(cur, b[k][1])
            k += 1
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


@dataclass(frozen=True)
class Gap:
    start_ns: int
    end_ns: int
    category: str  # one of IDLE; a gap split by a sync's return is two Gaps
    sync_call: str | None = None


def classify_gaps(session: Session, busy: list[Interval], lo: int, hi: int, use_syncs: bool,
                  step_starts: list[int] | None = None) -> list[Gap]:
    """The idle intervals of the window, each classed by what the host did (module docstring)."""
    gaps: list[Interval] = []
    cur = lo
    for s, e in busy:
        if s > cur:
            gaps.append((cur, s))
        cur = max(cur, e)
    if cur < hi:
        gaps.append((cur, hi))
    syncs = sorted(((h.cpu_end_ns, h.cpu_start_ns, h.name) for h in session.host_syncs), key=lambda x: x[0]) \
        if use_syncs else []
    ends = [x[0] for x in syncs]
    steps = sorted(step_starts or [])
    out: list[Gap] = []
    for g0, g1 in gaps:
        n = g1 - g0
        k = bisect.bisect_right(ends, g1) - 1
        sync = None
        while k >= 0 and ends[k] >= g0 - BACK_TO_BACK_GAP_NS:
            if syncs[k][1] < g0:  # it was waiting when the GPU went idle
                sync = syncs[k]
                break
            k -= 1
        if sync is not None:
            back = max(g0, min(sync[0], g1))
            if g1 - back <= HOST_STALL_GAP_NS:
                out.append(Gap(g0, g1, AFTER_SYNC, sync[2]))
            else:
                if back > g0:
                    out.append(Gap(g0, back, AFTER_SYNC, sync[2]))
                out.append(Gap(back, g1, HOST_ELSEWHERE))
            continue
        j = bisect.bisect_right(steps, g0)
        boundary = j < len(steps) and steps[j] < g1
        if n <= BACK_TO_BACK_GAP_NS:
            cat = SWITCHING
        elif n <= HOST_STALL_GAP_NS:
            cat = STEP_BOUNDARY if boundary else LAUNCHING
        else:
            cat = HOST_ELSEWHERE
        out.append(Gap(g0, g1, cat))
    return out


def rank_breakdown(session: Session, rank: int, acts: list[GpuActivity], multi_rank: bool,
                   collectives: CollectiveAnalysis | None = None) -> tuple[RankBreakdown, list[Gap]]:
    lo, hi, basis, steps, median_step = _window(session, rank, acts)
    by_cat: dict[str, list[Interval]] = {c: [] for c in (KERNELS, COMMUNICATION, COPIES, MEMSETS)}
    started: Counter[str] = Counter()
    for a in acts:
        if a.end_ns > lo and a.start_ns < hi:
            by_cat[a.category].append((a.start_ns, a.end_ns))
            if a.start_ns >= lo:
                started[a.category] += 1
    covered: list[Interval] = []
    ns: dict[str, int] = {}
    for cat in (KERNELS, COMMUNICATION, COPIES, MEMSETS):
        mine = union(_clip(by_cat[cat], lo, hi))
        only = _minus(mine, covered)
        ns[cat] = total(only)
        covered = union(covered + mine)
    waits = min(ns[COMMUNICATION], _rank_waits(collectives, rank, lo, hi)) if multi_rank and ns[COMMUNICATION] else 0
    ns[COMMUNICATION] -= waits
    ns[WAITING] = waits
    starts = [s for _, s, _ in step_spans(session, rank)]
    gaps = classify_gaps(session, covered, lo, hi, use_syncs=not multi_rank, step_starts=starts)
    gap_n: Counter[str] = Counter()
    for g in gaps:
        ns[g.category] = ns.get(g.category, 0) + g.end_ns - g.start_ns
        gap_n[g.category] += 1
    wall = max(1, hi - lo)
    shares = tuple(Share(c, ns.get(c, 0), ns.get(c, 0) / wall,
                         gap_n[c] if c in IDLE else started.get(c, 0)) for c in CATEGORIES)
    calls = Counter(g.sync_call for g in gaps if g.sync_call)
    return RankBreakdown(rank, lo, hi, basis, steps, median_step, shares, tuple(sorted(calls.items()))), gaps


def breakdown(session: Session, collectives: CollectiveAnalysis | None = None
              ) -> tuple[Breakdown, dict[int, list[Gap]], dict[int, list[GpuActivity]]]:
    """The breakdown of every rank, with the classified gaps and the activities the program rules read."""
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
