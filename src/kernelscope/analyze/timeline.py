"""The run in time order: kernels, copies and regions, and the GPU-idle gaps between them.

Pure data from a session's recorded start times and durations (trace pass).
A gap is the time from the end of everything the GPU had run so far to the
start of the next kernel or copy, so overlapping streams leave no gap. Gaps
are classed by analyze.thresholds: back-to-back, launch overhead, host wait.

In a session of several ranks each row names its rank, and an NCCL kernel at which its rank waited
for another is marked the way the methodology says it: "barrier: allreduce 0.85 ms GPU0 waits for
GPU3" (wait = analyze/collectives.WAIT_FORMULA; GPU<n> is rank n; waits under
thresholds.BARRIER_MARK_MIN_NS are launch jitter and not marked).
"""
from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass, field
from itertools import islice, repeat
from operator import le, lshift, or_, rshift
from typing import Any, Iterator, Sequence

from kernelscope.analyze.collectives import CollectiveAnalysis, analyze_collectives
from kernelscope.analyze.thresholds import BACK_TO_BACK_GAP_NS, BARRIER_MARK_MIN_NS, HOST_WAIT_GAP_NS
from kernelscope.model import Launch, Metric, Session
from kernelscope.model.launch_table import LaunchTable
from kernelscope.model.names import short_kernel_name
from kernelscope.model.launch_table import collector_paused

GAP_FORMULA = "start of this GPU activity - latest end of every earlier kernel or copy"  # of its rank, with several
BACK_TO_BACK, LAUNCH_GAP, HOST_WAIT = "back-to-back", "launch gap", "host wait"

# Per-kernel notes from the counter pass: (label, model metric name).
NOTE_METRICS = (("SM", "sm_throughput_pct"), ("mem", "memory_throughput_pct"), ("DRAM", "dram_throughput_pct"),
                ("tensor", "tensor_pipe_pct"), ("occ", "achieved_occupancy_pct"))


def gap_kind(gap_ns: int | None) -> str:
    if gap_ns is None or gap_ns <= BACK_TO_BACK_GAP_NS:
        return BACK_TO_BACK
    return LAUNCH_GAP if gap_ns < HOST_WAIT_GAP_NS else HOST_WAIT


@dataclass(frozen=True)
class BarrierMark:
    """A rank waiting inside a collective for the last rank to arrive (its NCCL kernel's row)."""

    rank: int  # the rank that waits
    straggler_rank: int  # the last to arrive, waited for
    collective: str  # as the trace names it (allreduce, _allgather_base, ...)
    process_group: str
    index: int  # the collective's occurrence in its group
    wait_ns: int


@dataclass(frozen=True)
class TimelineRow:
    kind: str  # "kernel" | "memcpy" | "memset" | "region"
    name: str
    short_name: str
    start_ns: int  # session clock; regions without a GPU span use their CPU start
    duration_ns: int
    gap_before_ns: int | None  # GPU rows only; None for the first and for regions
    gap_kind: str  # "" for regions
    regions: tuple[str, ...]
    notes: tuple[tuple[str, Metric], ...]  # counter-pass values of this very launch
    on_gpu: bool = True  # False: a region seen only on the CPU (no GPU span recorded)
    rank: int | None = None  # the rank it ran on, in a session of several ranks
    barrier: BarrierMark | None = None  # an NCCL kernel at which its rank waited for another


@dataclass(frozen=True)
class MarkRow:
    """kernelscope.mark(name, **values) at ``t_ns`` on the session clock, with the allocator's bytes then."""

    name: str
    t_ns: int
    step: int | None
    allocated_bytes: int | None
    reserved_bytes: int | None
    memory_missing_reason: str | None
    values: tuple[tuple[str, str], ...]  # the user's values as text, in the order given


@dataclass(frozen=True)
class GapTotals:
    kind: str
    count: int
    total_ns: int
    largest_ns: int


class TimelineRows(Sequence[TimelineRow]):
    """The rows of a timeline, built when read: a run of a million launches is a million rows, and views
    draw the first few (show --timeline N). ``order`` holds codes: launch i is i, activity j is n + j,
    region r is n + activities + r."""

    def __init__(self, session: Session, table: LaunchTable, order: list[int], gap_before: list[int | None]):
        self._s, self._t, self._order, self._gap = session, table, order, gap_before  # gap_before: by code
        self._n, self._na = len(table), len(session.activities)

    def __len__(self) -> int:
        return len(self._order)

    def __getitem__(self, k: Any) -> Any:
        if isinstance(k, slice):
            return tuple(self._row(c) for c in self._order[k])
        return self._row(self._order[k])

    def __iter__(self) -> Iterator[TimelineRow]:
        return (self._row(c) for c in self._order)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, (TimelineRows, tuple)) and tuple(self) == tuple(other)

    def __hash__(self) -> int:
        return hash(tuple(self))

    def _row(self, c: int) -> TimelineRow:
        t, n = self._t, self._n
        if c < n:
            s = t.shapes[t.shape[c]]
            gap = self._gap[c]
            notes = _notes(t.launch(c)) if c in t.details else ()
            return TimelineRow("kernel", s.kernel, short_kernel_name(s.kernel), t.start_ns[c] or 0,
                               t.duration_ns[c], gap, gap_kind(gap), s.regions, notes)
        if c < n + self._na:
            a = self._s.activities[c - n]
            gap = self._gap[c]
            return TimelineRow(a.kind, a.name, a.name, a.start_ns, a.duration_ns, gap, gap_kind(gap), (), ())
        r = self._s.regions[c - n - self._na]
        on_gpu = r.gpu_start_ns is not None and r.gpu_duration_ns is not None
        start = r.gpu_start_ns if on_gpu else r.cpu_start_ns
        dur = r.gpu_duration_ns if on_gpu else r.cpu_duration_ns
        return TimelineRow("region", r.name, r.name, int(start), int(dur), None, "", (), (), on_gpu)  # type: ignore[arg-type]


@dataclass(frozen=True)
class Timeline:
    rows: Sequence[TimelineRow]
    span_ns: int | None  # first GPU start to last GPU end
    gpu_busy_ns: int | None  # union of kernel and copy intervals
    gaps: tuple[GapTotals, ...]  # launch gap and host wait (back-to-back is not idling)
    missing_reason: str | None  # why there is no timeline (e.g. counter-pass-only session)
    # Per kernel, in row order: the gaps before its launches (None for the run's first): read without the rows.
    gaps_by_kernel: dict[str, list[int | None]] | None = field(default=None, compare=False, repr=False)
    marks: tuple[MarkRow, ...] = ()  # kernelscope.mark() points with a time on the session clock
    barriers: tuple[BarrierMark, ...] = ()  # every marked wait, in time order (rows carry them too)

    def gaps_before(self, kernel: str) -> list[int]:
        """GPU-idle gaps before each launch of ``kernel`` (first launch of the run excluded)."""
        if self.gaps_by_kernel is not None:
            return [g for g in self.gaps_by_kernel.get(kernel, ()) if g is not None]
        return [r.gap_before_ns for r in self.rows
                if r.kind == "kernel" and r.name == kernel and r.gap_before_ns is not None]

    def kernel_names(self) -> list[str]:
        """The kernels on the timeline, in the order they first ran."""
        if self.gaps_by_kernel is not None:
            return list(self.gaps_by_kernel)
        return list(dict.fromkeys(r.name for r in self.rows if r.kind == "kernel"))


def _notes(x: Launch) -> tuple[tuple[str, Metric], ...]:
    if not x.counters:
        return ()
    return tuple((label, x.metrics[key]) for label, key in NOTE_METRICS
                 if key in x.metrics and not x.metrics[key].is_missing)


def _value_text(v: object) -> str:
    if isinstance(v, list):
        return "[" + ", ".join(str(x) for x in v) + "]"
    return str(v)


def mark_rows(session: Session) -> tuple[MarkRow, ...]:
    return tuple(MarkRow(m.name, m.t_ns, m.step, m.allocated_bytes, m.reserved_bytes, m.memory_missing_reason,
                         tuple((k, _value_text(v)) for k, v in m.values.items()))
                 for m in sorted(session.marks, key=lambda m: m.wall_time_ns) if m.t_ns is not None)


def _sorted_by(keys: list[int], codes: list[int]) -> tuple[list[int], list[int]]:
    """keys and codes in key order, ties in the given order (a stable sort; one pass when already sorted)."""
    if all(map(le, keys, islice(keys, 1, None))):
        return keys, codes
    perm = sorted(range(len(keys)), key=keys.__getitem__)
    return [keys[k] for k in perm], [codes[k] for k in perm]


def _merge(
    keys: list[int], codes: list[int], more_keys: list[int], more_codes: list[int]
) -> tuple[list[int], list[int]]:
    """Two key-sorted runs as one, ``more`` after equal keys of the first: a few slices, not a full sort (the
    copies and regions are few or in order next to a million launches)."""
    if not more_keys:
        return keys, codes
    out_k: list[int] = []
    out_c: list[int] = []
    lo = 0
    for k, c in zip(more_keys, more_codes):
        hi = bisect.bisect_right(keys, k, lo)
        out_k += keys[lo:hi]
        out_c += codes[lo:hi]
        out_k.append(k)
        out_c.append(c)
        lo = hi
    out_k += keys[lo:]
    out_c += codes[lo:]
    return out_k, out_c


def _in_time_order(session: Session) -> tuple[list[int], list[int]]:
    """(keys, codes) of every launch with a start and every copy / memset, in time order, read column-wise (no
    Launch object per launch). A code is launch i -> i, activity j -> n + j (see TimelineRows); the key is
    (start, kernel before copy) as one int: 2 x start, + 1 for a copy. Stable: equal keys keep launch order, and
    launches mostly arrive in start order, which the sort checks in one pass."""
    table = session.launch_table()
    n, start, acts = len(table), table.start_ns, session.activities
    if None in start:
        codes = [i for i, st in enumerate(start) if st is not None]
        keys = [start[i] << 1 for i in codes]
    else:
        codes, keys = list(range(n)), list(map(lshift, start, repeat(1)))
    keys, codes = _sorted_by(keys, codes)
    return _merge(keys, codes, *_sorted_by([(a.start_ns << 1) | 1 for a in acts], [n + j for j in range(len(acts))]))


def _with_regions(session: Session, keys: list[int], codes: list[int], region_code: int) -> list[int]:
    """``codes`` (in time order, by ``keys``) with the regions' codes (region i -> region_code + i) merged in: a
    region opens before the GPU rows of its start (GPU rows get key 2 x start + 1, regions 2 x start)."""
    if not session.regions:
        return codes
    rkeys = []
    for r in session.regions:
        on_gpu = r.gpu_start_ns is not None and r.gpu_duration_ns is not None
        rkeys.append(int(r.gpu_start_ns if on_gpu else r.cpu_start_ns) << 1)  # type: ignore[arg-type]
    rkeys, rcodes = _sorted_by(rkeys, list(range(region_code, region_code + len(rkeys))))
    return _merge(list(map(or_, keys, repeat(1))), codes, rkeys, rcodes)[1]


def _no_rows(session: Session, launches: int) -> Timeline:
    why = ("the session has no start times: only the counter pass (ncu serialises kernels) saw its launches"
           if launches else "the session recorded no kernels or copies")
    return Timeline((), None, None, (), why, marks=mark_rows(session))


@collector_paused()
def build_timeline(session: Session, collectives: CollectiveAnalysis | None = None) -> Timeline:
    """The session's GPU rows in time order with their gaps; ``collectives`` (a session of several ranks): its
    collective analysis when the caller has it, for the waits marked at NCCL kernels."""
    if len(session.ranks) > 1:  # several GPUs: each rank's gaps on its own GPU, and the waits at collectives
        return _build_timeline_ranks(session, collectives)
    # Column-wise: sort codes, not rows (launch i -> i, activity j -> n + j; see TimelineRows).
    table = session.launch_table()
    n, acts = len(table), session.activities
    dur = table.duration_ns
    keys, codes = _in_time_order(session)
    if not codes:
        return _no_rows(session, n)
    starts = list(map(rshift, keys, repeat(1)))
    durs = [dur[c] if c < n else acts[c - n].duration_ns for c in codes]
    end = starts[0] + durs[0]
    busy = durs[0]
    gaps: list[int | None] = [None]
    append = gaps.append
    for st, d in zip(starts[1:], durs[1:]):  # the hot loop: plain ints, no objects
        gap = st - end
        append(gap if gap > 0 else 0)
        e = st + d
        if e > end:
            busy += e - (st if st > end else end)
            end = e
    launch_gaps = [g for g in gaps if g is not None and BACK_TO_BACK_GAP_NS < g < HOST_WAIT_GAP_NS]
    host_waits = [g for g in gaps if g is not None and g >= HOST_WAIT_GAP_NS]
    gap_before: list[int | None] = [None] * (n + len(acts))
    for c, g in zip(codes, gaps):
        gap_before[c] = g
    names = [s.kernel for s in table.shapes]
    shape = table.shape
    by_kernel: dict[str, list[int | None]] = {}
    for c, g in zip(codes, gaps):
        if c < n:
            k = names[shape[c]]
            lst = by_kernel.get(k)
            if lst is None:
                by_kernel[k] = [g]
            else:
                lst.append(g)
    order = _with_regions(session, keys, codes, n + len(acts))
    totals = tuple(GapTotals(k, len(v), sum(v), max(v)) for k, v in sorted(((LAUNCH_GAP, launch_gaps),
                                                                             (HOST_WAIT, host_waits))) if v)
    return Timeline(TimelineRows(session, table, order, gap_before), end - starts[0], busy, totals, None, by_kernel,
                    mark_rows(session))


def barrier_marks(session: Session, collectives: CollectiveAnalysis | None = None
                  ) -> dict[tuple[int, int, str], BarrierMark]:
    """The marked waits of a session of several ranks, by (rank, kernel start, kernel name); ``collectives``:
    the session's analysis when the caller has it (else made here)."""
    if len(session.ranks) < 2:
        return {}
    if collectives is None:
        collectives = analyze_collectives(session)
    out = {}
    for row in collectives.rows:
        for t in row.ranks:
            if row.straggler_rank is not None and t.rank != row.straggler_rank and t.wait_ns >= BARRIER_MARK_MIN_NS:
                out[(t.rank, t.start_ns, t.kernel)] = BarrierMark(t.rank, row.straggler_rank, row.name,
                                                                  row.process_group, row.index, t.wait_ns)
    return out


class _RankRows(TimelineRows):
    """TimelineRows of a session of several ranks: each row with its rank, an NCCL kernel's row with the wait
    marked at it."""

    def __init__(self, session: Session, table: LaunchTable, order: list[int], gap_before: list[int | None],
                 marks: dict[tuple[int, int, str], BarrierMark]):
        super().__init__(session, table, order, gap_before)
        self._marks = marks
        self._rank_of_shape = [sh.rank or 0 for sh in table.shapes]

    def _row(self, c: int) -> TimelineRow:
        row = super()._row(c)
        t, n = self._t, self._n
        if c < n:
            rank = self._rank_of_shape[t.shape[c]]
            mark = self._marks.get((rank, row.start_ns, row.name)) if self._marks else None
            return dataclasses.replace(row, rank=rank, barrier=mark)
        if c < n + self._na:
            return dataclasses.replace(row, rank=self._s.activities[c - n].rank or 0)
        return dataclasses.replace(row, rank=self._s.regions[c - n - self._na].rank or 0)


def _build_timeline_ranks(session: Session, collectives: CollectiveAnalysis | None) -> Timeline:
    """The timeline of a session of several ranks: each GPU row's gap is measured from the latest end on its own
    rank's GPU, read from the launch columns; rows are built when read (TimelineRows)."""
    marks = barrier_marks(session, collectives)
    table = session.launch_table()
    n, acts = len(table), session.activities
    dur = table.duration_ns
    keys, codes = _in_time_order(session)
    if not codes:
        return _no_rows(session, n)
    # Ranks as dense indices into a list of each rank's latest end (the hot loop reads lists, not dicts).
    rank_ix: dict[int, int] = {}
    rank_of_shape = [rank_ix.setdefault(sh.rank or 0, len(rank_ix)) for sh in table.shapes]
    rank_of_act = [rank_ix.setdefault(a.rank or 0, len(rank_ix)) for a in acts]
    act_dur = [a.duration_ns for a in acts]
    shape = table.shape
    gap_before: list[int | None] = [None] * (n + len(acts) + len(session.regions))
    rank_end: list[int | None] = [None] * len(rank_ix)  # a gap is idling of the rank's own GPU: from its last end
    launch_gaps: list[int] = []
    host_waits: list[int] = []
    names = [sh.kernel for sh in table.shapes]
    by_kernel: dict[str, list[int | None]] = {}  # kernels in the order they first ran
    of_shape: list[list[int | None] | None] = [None] * len(names)
    end: int | None = None
    busy = 0
    for k, c in zip(keys, codes):
        st = k >> 1
        if c < n:
            sid = shape[c]
            d, r = dur[c], rank_of_shape[sid]
        else:
            d, r = act_dur[c - n], rank_of_act[c - n]
        e = st + d
        mine = rank_end[r]
        if mine is None:
            gap = None
            rank_end[r] = e
        else:
            gap = st - mine if st > mine else 0
            gap_before[c] = gap
            if gap > BACK_TO_BACK_GAP_NS:
                (launch_gaps if gap < HOST_WAIT_GAP_NS else host_waits).append(gap)  # gap_kind's bounds
            if e > mine:
                rank_end[r] = e
        if c < n:
            lst = of_shape[sid]
            if lst is None:
                lst = of_shape[sid] = by_kernel.setdefault(names[sid], [])
            lst.append(gap)
        if end is None:
            busy += d
            end = e
        else:
            grown = e - (st if st > end else end)  # the union of every rank's rows grows by what sticks out
            if grown > 0:
                busy += grown
            if e > end:
                end = e
    gap_sums = {k: v for k, v in ((LAUNCH_GAP, launch_gaps), (HOST_WAIT, host_waits)) if v}
    order = _with_regions(session, keys, codes, n + len(acts))
    gaps = tuple(GapTotals(k, len(v), sum(v), max(v)) for k, v in sorted(gap_sums.items()))
    return Timeline(_RankRows(session, table, order, gap_before, marks), end - (keys[0] >> 1), busy, gaps, None,
                    by_kernel, marks=mark_rows(session), barriers=_barriers_in_order(table, codes, marks))


def _barriers_in_order(table: LaunchTable, codes: list[int], marks: dict[tuple[int, int, str], BarrierMark]
                       ) -> tuple[BarrierMark, ...]:
    """The marked waits in row order (kernel rows only carry them; codes below len(table) are launches)."""
    if not marks:
        return ()
    at = {st for (_, st, _) in marks}
    n, start, shape, shapes = len(table), table.start_ns, table.shape, table.shapes
    out = []
    for c in codes:
        if c < n and start[c] in at:
            sh = shapes[shape[c]]
            m = marks.get((sh.rank or 0, start[c], sh.kernel))
            if m is not None:
                out.append(m)
    return tuple(out)

