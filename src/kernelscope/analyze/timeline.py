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

from collections import defaultdict
from dataclasses import dataclass

from kernelscope.analyze.thresholds import BACK_TO_BACK_GAP_NS, BARRIER_MARK_MIN_NS, HOST_WAIT_GAP_NS
from kernelscope.model import Launch, Metric, Session
from kernelscope.model.names import short_kernel_name

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
class GapTotals:
    kind: str
    count: int
    total_ns: int
    largest_ns: int


@dataclass(frozen=True)
class Timeline:
    rows: tuple[TimelineRow, ...]
    span_ns: int | None  # first GPU start to last GPU end
    gpu_busy_ns: int | None  # union of kernel and copy intervals
    gaps: tuple[GapTotals, ...]  # launch gap and host wait (back-to-back is not idling)
    missing_reason: str | None  # why there is no timeline (e.g. counter-pass-only session)
    barriers: tuple[BarrierMark, ...] = ()  # every marked wait, in time order (rows carry them too)

    def gaps_before(self, kernel: str) -> list[int]:
        """GPU-idle gaps before each launch of ``kernel`` (first launch of the run excluded)."""
        return [r.gap_before_ns for r in self.rows
                if r.kind == "kernel" and r.name == kernel and r.gap_before_ns is not None]


def _notes(x: Launch) -> tuple[tuple[str, Metric], ...]:
    if not x.counters:
        return ()
    return tuple((label, x.metrics[key]) for label, key in NOTE_METRICS
                 if key in x.metrics and not x.metrics[key].is_missing)


def barrier_marks(session: Session) -> dict[tuple[int, int, str], BarrierMark]:
    """The marked waits of a session of several ranks, by (rank, kernel start, kernel name)."""
    if len(session.ranks) < 2:
        return {}
    from kernelscope.analyze.collectives import analyze_collectives

    out = {}
    for row in analyze_collectives(session).rows:
        for t in row.ranks:
            if row.straggler_rank is not None and t.rank != row.straggler_rank and t.wait_ns >= BARRIER_MARK_MIN_NS:
                out[(t.rank, t.start_ns, t.kernel)] = BarrierMark(t.rank, row.straggler_rank, row.name,
                                                                  row.process_group, row.index, t.wait_ns)
    return out


def build_timeline(session: Session) -> Timeline:
    multi = len(session.ranks) > 1
    marks = barrier_marks(session)
    gpu: list[tuple[int, int, str, str, str, tuple[str, ...], tuple, int | None, BarrierMark | None]] = []
    for x in session.launches:
        if x.start_ns is not None:
            rank = (x.rank or 0) if multi else None
            gpu.append((x.start_ns, x.duration_ns, "kernel", x.kernel, short_kernel_name(x.kernel),
                        tuple(x.regions), _notes(x), rank, marks.get((x.rank or 0, x.start_ns, x.kernel))))
    for a in session.activities:
        gpu.append((a.start_ns, a.duration_ns, a.kind, a.name, a.name, (), (), (a.rank or 0) if multi else None, None))
    if not gpu:
        why = ("the session has no start times: only the counter pass (ncu serialises kernels) saw its launches"
               if session.launches else "the session recorded no kernels or copies")
        return Timeline((), None, None, (), why)
    gpu.sort(key=lambda e: (e[0], e[2] != "kernel"))
    rows: list[TimelineRow] = []
    end = None
    rank_end: dict[int | None, int] = {}  # a gap is idling of the rank's own GPU: measured from its own last end
    busy = 0
    gap_sums: dict[str, list[int]] = defaultdict(list)
    for start, dur, kind, name, short, regions, notes, rank, mark in gpu:
        mine = rank_end.get(rank)
        gap = None if mine is None else max(0, start - mine)
        kind_of_gap = gap_kind(gap)
        if gap is not None and kind_of_gap != BACK_TO_BACK:
            gap_sums[kind_of_gap].append(gap)
        busy += dur if end is None else max(0, start + dur - max(start, end))
        end = start + dur if end is None else max(end, start + dur)
        rank_end[rank] = start + dur if mine is None else max(mine, start + dur)
        rows.append(TimelineRow(kind, name, short, start, dur, gap, kind_of_gap, regions, notes, rank=rank, barrier=mark))
    first = gpu[0][0]
    for r in session.regions:
        on_gpu = r.gpu_start_ns is not None and r.gpu_duration_ns is not None
        start = r.gpu_start_ns if on_gpu else r.cpu_start_ns
        dur = r.gpu_duration_ns if on_gpu else r.cpu_duration_ns
        rows.append(TimelineRow("region", r.name, r.name, int(start), int(dur), None, "", (), (), on_gpu,
                                (r.rank or 0) if multi else None))
    rows.sort(key=lambda r: (r.start_ns, r.kind != "region"))  # a region opens before its first kernel
    gaps = tuple(GapTotals(k, len(v), sum(v), max(v)) for k, v in sorted(gap_sums.items()))
    barriers = tuple(r.barrier for r in rows if r.barrier is not None)
    return Timeline(tuple(rows), end - first, busy, gaps, None, barriers)

