"""Replay the window: a dependency graph of what the host and the GPU did, recomputed with fixes applied.

The graph (``build_graph``) holds, per rank, one host timeline and each stream's GPU work in order:

- GPU ops: the trace pass's kernels, copies and memsets with their measured durations. Each is released one of
  three ways, read from its stream: ``host-fed`` (it started more than thresholds.BACK_TO_BACK_GAP_NS after its
  stream predecessor ended: the GPU idled until its launch arrived, so it is launched at its start), ``queued``
  (it started as its predecessor ended: launched earlier, at a time the session does not record) or ``graph``
  (a kernel sharing the correlation id of the kernel before it on its stream: the kernels of one CUDA-graph
  launch, released by the graph's first). A queued op keeps its measured switch gap after its predecessor.
- Host nodes, in host order: launches, synchronize calls (model.HostSync), step boundaries (ProfilerStep ranges) and
  the edges of the other recorded CPU ranges (record_function, kernelscope.region), each after the measured host
  time since the previous node ended (``host_before_ns``). Launches of host-fed ops are host points the trace
  measured (the op's start); launches of queued ops are not recorded and are spread evenly, by count, over the
  host's time between the recorded points around them, never later than the op's start (LAUNCH_TIME_RULE). A
  synchronize waits for each stream's last op launched before it returned.
- Collectives: the NCCL kernels of one collective on every rank (analyze/collectives): each ends its measured
  tail after the last rank's arrival.

``replay`` is a discrete-event simulation of that graph: host nodes follow each other by their host time; an op
starts at max(its launch + launch latency, its stream predecessor's end + its switch gap); a collective kernel
ends at the last rank's arrival + its measured tail; a synchronize returns at max(its call, the ends it waits
for) + its own return cost (measured: call end - max(call start, the waited ends)). Replaying the unedited graph
reproduces every measured time, so the window's wall time too. Edits (``RemoveSyncs``, ``ShrinkLaunchOverhead``,
``SetKernelDuration``, ``RemoveHostWork``) change the graph before a replay; ``replayed_gain`` replays with and
without them. What the session does not record is listed in ``ReplayGraph.not_modelled``, never invented.
"""
from __future__ import annotations

import bisect
import re
import statistics
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Protocol

from kernelscope.analyze import breakdown as bd
from kernelscope.analyze.collectives import analyze_collectives
from kernelscope.analyze.thresholds import BACK_TO_BACK_GAP_NS, HOST_STALL_GAP_NS
from kernelscope.model import Session

KERNEL, MEMCPY, MEMSET = "kernel", "memcpy", "memset"
HOST_FED, QUEUED, GRAPH = "host-fed", "queued", "graph"
LAUNCH, SYNC, STEP_START, STEP_END = "launch", "sync", "step start", "step end"
SPAN_START, SPAN_END = "span start", "span end"  # a recorded CPU range (record_function, kernelscope.region)
# What host time before a launch counts as per-launch work after: another launch, or a range edge between launches
BETWEEN_LAUNCHES = (LAUNCH, SPAN_START, SPAN_END)

# Edge kinds of a critical path (ReplayResult.bound_by)
HOST_LAUNCHING = "host: per-launch work"  # host time before a launch (BETWEEN_LAUNCHES), up to HOST_STALL_GAP_NS
HOST_OTHER = "host: other work"  # longer host time, or host time before a sync or step boundary
SYNC_RETURN = "host: sync return"  # a synchronize's own cost after what it waited for ended
LAUNCH_LATENCY = "launch latency"  # a launch made inside a blocking call reaching the GPU
GPU_SWITCH = "GPU: switch between queued ops"
GPU_KINDS = {KERNEL: "GPU: kernels", MEMCPY: "GPU: copies", MEMSET: "GPU: memsets"}
COMMUNICATION = "GPU: communication"
WAITING = "waiting for other ranks"  # a path that runs on through another rank's timeline

LAUNCH_TIME_RULE = ("launch calls are not in the session: an op that started after its stream idled is launched at "
                    "its start; the launches of ops that started queued are spread evenly by count over the host "
                    "time between the recorded host points around them, never after the op's start")
SWITCH_RULE = ("median gap between queued ops of the rank in the window (gaps up to thresholds.BACK_TO_BACK_GAP_NS); "
               "where none queued, RECORDED_SWITCH_NS")
# The GPU's gap between two queued eager kernels of one stream, measured: median of the 29,389 kernel-to-kernel gaps
# up to thresholds.BACK_TO_BACK_GAP_NS of queued kernels in the program suite's sessions (tests/data/diagnosis/
# programs, NVIDIA H100 80GB HBM3, 2026-11-26). Used for a rank whose every op waited for the host.
RECORDED_SWITCH_NS = 1184
# The GPU's gap between consecutive kernels of a replayed CUDA graph, measured: median over the 7,520 graph kernels
# of tests/data/diagnosis/programs/control_graphed_decode_control.json.gz (NVIDIA H100 80GB HBM3, 2026-11-26): they
# overlap their predecessor's end slightly. Used where a session has no CUDA-graph launches of its own.
RECORDED_GRAPH_KERNEL_GAP_NS = -32
RECORDED_GRAPH_KERNEL_GAP_SOURCE = ("median gap between the kernels of a replayed CUDA graph, recorded on an NVIDIA "
                                    "H100 80GB HBM3 on 2026-11-26 (the program suite's graphed-decode control)")
GAIN_FORMULA = "1 - replayed window wall time with the fix / replayed window wall time without it"


@dataclass(frozen=True)
class GpuOp:
    kind: str  # KERNEL | MEMCPY | MEMSET
    name: str
    rank: int
    stream: int | None
    start_ns: int  # measured
    duration_ns: int
    release: str  # HOST_FED | QUEUED | GRAPH
    switch_ns: int  # after the stream predecessor's end (measured for queued and graph ops; else the rank's)
    launch_node: int  # index of its launch in its rank's host nodes
    latency_ns: int = 0  # launch node -> earliest start: a launch made inside a blocking call (measured)
    prev: int | None = None  # stream predecessor (op index)
    collective: int | None = None  # index into ReplayGraph.collectives

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.duration_ns


@dataclass(frozen=True)
class HostNode:
    kind: str  # LAUNCH | SYNC | STEP_START | STEP_END | SPAN_START | SPAN_END
    time_ns: int  # measured (a sync: its call) or, for a queued op's launch, spread (LAUNCH_TIME_RULE)
    host_before_ns: int  # host time since the previous node ended
    measured: bool
    name: str = ""
    op: int | None = None  # LAUNCH: the op it launches
    waits_for: tuple[int, ...] = ()  # SYNC: the ops whose ends it waits for
    cost_ns: int = 0  # SYNC: its own return cost
    end_ns: int | None = None  # SYNC: measured return


@dataclass(frozen=True)
class CollectiveJoin:
    name: str
    ops: tuple[int, ...]  # one per rank
    tail_ns: tuple[int, ...]  # per op: measured end - the last rank's arrival


@dataclass(frozen=True)
class RankWindow:
    rank: int
    start_ns: int
    end_ns: int
    basis: str  # analyze/breakdown's window basis
    start_node: int | None  # the step-start node the window opens at (None: a fixed time)
    end_node: int | None  # the step-end node it closes at (None: the rank's last GPU op's end)
    switch_ns: int  # SWITCH_RULE
    host_per_launch_ns: int | None  # median host time between two measured launches in the window


@dataclass(frozen=True)
class ReplayGraph:
    ops: tuple[GpuOp, ...]
    hosts: tuple[tuple[HostNode, ...], ...]  # per rank, in rank order of ``windows``
    windows: tuple[RankWindow, ...]
    streams: tuple[tuple[int, ...], ...]  # op indices of each (rank, stream), in order
    collectives: tuple[CollectiveJoin, ...] = ()
    not_modelled: tuple[tuple[str, str], ...] = ()  # (what, why)
    edits: tuple[str, ...] = ()  # what the applied edits changed

    def host(self, rank: int) -> tuple[HostNode, ...]:
        return self.hosts[self._rank_index(rank)]

    def _rank_index(self, rank: int) -> int:
        return next(i for i, w in enumerate(self.windows) if w.rank == rank)


def _evolve(x, **changes):  # type: ignore[no-untyped-def]
    """A copy of the frozen dataclass ``x`` with ``changes``: dataclasses.replace without its per-field pass, for
    the ops and host nodes that building and editing change a field or two at a time (a million on a long run)."""
    out = object.__new__(type(x))
    out.__dict__.update(x.__dict__)
    out.__dict__.update(changes)
    return out


# -- building ---------------------------------------------------------------------------------------------------

def _session_ops(session: Session) -> list[tuple[int, int, str, str, int, int | None, int | None, int | None]]:
    """(rank, start, kind, name, duration, stream, correlation id, launch index) of every timed GPU op."""
    table = session.launch_table()
    shapes = table.shapes
    out = [(shapes[sid].rank or 0, st, KERNEL, shapes[sid].kernel, d, shapes[sid].stream, corr, i)
           for i, (sid, st, d, corr) in enumerate(zip(table.shape, table.start_ns, table.duration_ns,
                                                       table.correlation_id)) if st is not None]
    out += [(a.rank or 0, a.start_ns, a.kind if a.kind in (MEMCPY, MEMSET) else MEMCPY, a.name, a.duration_ns,
             a.stream, None, None) for a in session.activities]
    out.sort(key=lambda x: (x[0], x[1], x[1] + x[4]))
    return out


def _kept_syncs(session: Session, multi_rank: bool) -> list:
    """The session's synchronize calls in time order, a call that starts inside the previous one left out (another
    thread's); none for a multi-rank session (rank not recorded on them)."""
    if multi_rank:
        return []
    out: list = []
    for h in sorted(session.host_syncs, key=lambda h: h.cpu_start_ns):
        if out and h.cpu_start_ns < out[-1].cpu_end_ns:
            continue
        out.append(h)
    return out


@dataclass(slots=True)
class _Op:
    """A GpuOp while the graph is built: its release, predecessor and launch are found in several passes."""

    kind: str
    name: str
    rank: int
    stream: int | None
    start_ns: int
    duration_ns: int
    release: str
    switch_ns: int
    launch_node: int
    latency_ns: int = 0
    prev: int | None = None
    collective: int | None = None

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.duration_ns


def build_graph(session: Session, breakdown: bd.Breakdown | None = None) -> ReplayGraph:
    """The dependency graph of the session's window (module docstring). ``breakdown``: the session's breakdown
    when the caller has it (its windows are the graph's). Raises ValueError when nothing has start times."""
    b = breakdown if breakdown is not None else bd.breakdown(session)[0]
    if not b.ranks:
        raise ValueError(b.missing_reason or "no GPU activity with start times: nothing to replay")
    raw = _session_ops(session)
    multi_rank = len(b.ranks) > 1 or len(session.ranks) > 1
    syncs = _kept_syncs(session, multi_rank)
    ops: list[_Op] = []
    stream_lists: dict[tuple[int, int | None], list[int]] = defaultdict(list)
    corr_of: list[int | None] = []
    for rank, st, kind, name, dur, stream, corr, _ in raw:
        stream_lists[(rank, stream)].append(len(ops))
        ops.append(_Op(kind, name, rank, stream, st, dur, HOST_FED, 0, -1))
        corr_of.append(corr)
    _classify(ops, stream_lists, corr_of, syncs)
    collectives, coll_note = _collectives(session, ops, multi_rank)
    hosts: list[tuple[HostNode, ...]] = []
    windows: list[RankWindow] = []
    for rb in b.ranks:
        nodes, win = _rank_host(session, rb, ops, stream_lists, syncs if not multi_rank else [], corr_of)
        hosts.append(nodes)
        windows.append(win)
    final = tuple(GpuOp(x.kind, x.name, x.rank, x.stream, x.start_ns, x.duration_ns, x.release, x.switch_ns,
                        x.launch_node, x.latency_ns, x.prev, x.collective) for x in ops)
    return ReplayGraph(final, tuple(hosts), tuple(windows), tuple(tuple(v) for v in stream_lists.values()),
                       tuple(collectives), _not_modelled(session, stream_lists, multi_rank, coll_note))


def _classify(ops: list[_Op], stream_lists: dict[tuple[int, int | None], list[int]],
              corr_of: list[int | None], syncs: list) -> None:
    """Release kind, switch gap and stream predecessor of every op, from the gaps of its stream. An op that
    started while the host was blocked in a synchronize call, after a predecessor still running when the call
    began, was launched before the call behind that predecessor: queued, whatever its gap."""
    s0s = [h.cpu_start_ns for h in syncs]
    for idx in stream_lists.values():
        prev: int | None = None
        for k in idx:
            x = ops[k]
            if prev is None:
                x.prev = None
            else:
                gap = x.start_ns - ops[prev].end_ns
                j = bisect.bisect_right(s0s, x.start_ns) - 1
                blocked = j >= 0 and x.start_ns < syncs[j].cpu_end_ns and ops[prev].end_ns > s0s[j]
                if x.kind == KERNEL and corr_of[k] is not None and corr_of[k] == corr_of[prev]:
                    x.release, x.switch_ns, x.prev = GRAPH, gap, prev
                elif gap > BACK_TO_BACK_GAP_NS and not blocked:
                    x.release, x.prev = HOST_FED, prev
                else:
                    x.release, x.switch_ns, x.prev = QUEUED, gap, prev
            prev = k


def _collectives(session: Session, ops: list[_Op], multi_rank: bool) -> tuple[list[CollectiveJoin], str | None]:
    if not multi_rank:
        return [], None
    ca = analyze_collectives(session)
    if ca.missing_reason:
        return [], ca.missing_reason
    where = {(x.rank, x.start_ns, x.name): k for k, x in enumerate(ops) if x.kind == KERNEL}
    out: list[CollectiveJoin] = []
    missed = 0
    for row in ca.rows:
        members = [where.get((t.rank, t.start_ns, t.kernel)) for t in row.ranks]
        if None in members or len(members) < 2:
            missed += 1
            continue
        arrival = max(ops[k].start_ns for k in members)  # type: ignore[index]
        j = len(out)
        for k in members:
            ops[k].collective = j  # type: ignore[index]
        out.append(CollectiveJoin(row.name, tuple(members), tuple(max(0, ops[k].end_ns - arrival)  # type: ignore
                                                                   for k in members)))
    return out, (f"{missed} collective(s) could not be matched to their kernels" if missed else None)


def _host_items(session: Session, rank: int, ops: list[_Op], mine: list[int], syncs: list
                ) -> list[tuple[int, int, int, str, object]]:
    """The rank's host points as (key, class, tiebreak, kind, payload), unsorted: launches (at the call start of
    the synchronize they happened inside, if any: made before it), syncs, steps and recorded ranges. At one key,
    ends come first, then launches, syncs, starts."""
    s0s = [h.cpu_start_ns for h in syncs]

    def inside_sync(t: int) -> int | None:
        j = bisect.bisect_right(s0s, t) - 1
        return s0s[j] if j >= 0 and s0s[j] < t < syncs[j].cpu_end_ns else None

    items: list[tuple[int, int, int, str, object]] = []
    for k in mine:
        if ops[k].release != GRAPH:
            at = inside_sync(ops[k].start_ns)
            items.append((ops[k].start_ns if at is None else at, 1, k, LAUNCH, k))
    items += [(h.cpu_start_ns, 2, j, SYNC, h) for j, h in enumerate(syncs)]
    for step, st, en in bd.step_spans(session, rank):
        items.append((st, 3, step, STEP_START, f"ProfilerStep#{step}"))
        items.append((en, 0, step, STEP_END, f"ProfilerStep#{step}"))
    for j, reg in enumerate(session.regions):  # the other recorded ranges: host points the trace measured
        if (reg.rank or 0) != rank or bd.STEP_RE.match(reg.name):
            continue
        for t, cls, kind in ((reg.cpu_start_ns, 3, SPAN_START), (reg.cpu_start_ns + reg.cpu_duration_ns, 0, SPAN_END)):
            if inside_sync(t) is None:  # a range edge inside a blocking call is another thread's
                items.append((t, cls, j, kind, reg.name))
    return items


def _rank_host(session: Session, rb: bd.RankBreakdown, ops: list[_Op],
               stream_lists: dict[tuple[int, int | None], list[int]], syncs: list,
               corr_of: list[int | None]) -> tuple[tuple[HostNode, ...], RankWindow]:
    rank = rb.rank
    mine = [k for k in range(len(ops)) if ops[k].rank == rank]
    items = _host_items(session, rank, ops, mine, syncs)
    items.sort(key=lambda t: t[:3])
    times = _launch_times(items, ops)
    by_stream = {key: ([ops[k].start_ns for k in idx], idx) for key, idx in stream_lists.items() if key[0] == rank}
    nodes: list[HostNode] = []
    prev_end: int | None = None
    node_of_op: dict[int, int] = {}
    for (key, _, _, kind, payload), t in zip(items, times):
        before = 0 if prev_end is None else max(0, t - prev_end)
        if kind == LAUNCH:
            k = payload  # type: ignore[assignment]
            node_of_op[k] = len(nodes)
            measured = ops[k].release == HOST_FED
            nodes.append(HostNode(LAUNCH, t, before, measured, ops[k].name, k))
            ops[k].launch_node, ops[k].latency_ns = len(nodes) - 1, max(0, ops[k].start_ns - t) if measured else 0
            prev_end = t
        elif kind == SYNC:
            h = payload
            waits = _waited(h, by_stream, ops)  # type: ignore[arg-type]
            ends = [ops[w].end_ns for w in waits]
            cost = h.cpu_end_ns - max([h.cpu_start_ns] + ends)  # type: ignore[attr-defined]
            nodes.append(HostNode(SYNC, t, before, True, h.name, None, tuple(waits), cost,  # type: ignore
                                  h.cpu_end_ns))  # type: ignore[attr-defined]
            prev_end = h.cpu_end_ns  # type: ignore[attr-defined]
        else:
            nodes.append(HostNode(kind, t, before, True, str(payload)))
            prev_end = t
    for k in mine:  # the kernels of a CUDA-graph launch are released by its first
        if ops[k].release == GRAPH:
            head = ops[k].prev
            while head is not None and ops[head].release == GRAPH:
                head = ops[head].prev
            n = node_of_op.get(head) if head is not None else None
            if n is not None:
                ops[k].launch_node = n
    return tuple(nodes), _window(rb, nodes, ops, mine)


def _launch_times(items: list[tuple[int, int, int, str, object]], ops: list[_Op]) -> list[int]:
    """Host time of every node (LAUNCH_TIME_RULE): recorded points as measured, queued launches spread between
    them. A sync's recorded point is its call; the host leaves it at its return."""
    n = len(items)
    times: list[int | None] = [None] * n
    measured = [False] * n
    for i, (key, _, _, kind, payload) in enumerate(items):
        if kind != LAUNCH or ops[payload].release == HOST_FED:  # type: ignore[index]
            times[i] = key
            measured[i] = True
    i = 0
    while i < n:
        if measured[i]:
            i += 1
            continue
        j = i
        while j < n and not measured[j]:
            j += 1
        lo = None
        if i > 0:
            kind, payload = items[i - 1][3], items[i - 1][4]
            lo = payload.cpu_end_ns if kind == SYNC else times[i - 1]  # type: ignore[attr-defined]
        hi = items[j][0] if j < n else None
        run = range(i, j)
        for m, q in enumerate(run):
            cap = items[q][0]
            if lo is None or hi is None:
                times[q] = cap
            else:
                times[q] = min(cap, lo + (hi - lo) * (m + 1) // (len(run) + 1))
        i = j
    return [int(t) for t in times]  # type: ignore[arg-type]


def _waited(h, by_stream: dict[tuple[int, int | None], tuple[list[int], list[int]]],
            ops: list[_Op]) -> list[int]:
    """Per stream, the last op that started before the call returned, when it ended by then (a later end: the call
    did not wait for that stream)."""
    out = []
    for starts, idx in by_stream.values():
        j = bisect.bisect_left(starts, h.cpu_end_ns) - 1
        if j >= 0 and ops[idx[j]].end_ns <= h.cpu_end_ns:
            out.append(idx[j])
    return out


def _window(rb: bd.RankBreakdown, nodes: list[HostNode], ops: list[_Op], mine: list[int]) -> RankWindow:
    start_node = end_node = None
    if rb.steps:
        start_node = next((i for i, x in enumerate(nodes) if x.kind == STEP_START and x.time_ns == rb.window_start_ns),
                          None)
        end_node = next((i for i, x in enumerate(nodes) if x.kind == STEP_END and x.time_ns == rb.window_end_ns), None)
    lo, hi = rb.window_start_ns, rb.window_end_ns
    gaps = [ops[k].switch_ns for k in mine if ops[k].release == QUEUED and lo <= ops[k].start_ns < hi
            and ops[k].switch_ns <= BACK_TO_BACK_GAP_NS]
    if gaps:
        switch = int(statistics.median(gaps))
    else:  # no queued op (every op waited for the host): the recorded figure, at most the smallest gap seen
        every = [ops[k].start_ns - ops[ops[k].prev].end_ns for k in mine if ops[k].prev is not None]
        switch = min([RECORDED_SWITCH_NS] + every)
    per_launch = [x.host_before_ns for i, x in enumerate(nodes) if i and x.kind == LAUNCH and x.measured
                  and nodes[i - 1].kind == LAUNCH and nodes[i - 1].measured and lo <= x.time_ns < hi
                  and x.host_before_ns <= HOST_STALL_GAP_NS]
    for k in mine:
        x = ops[k]
        if x.release == HOST_FED:
            x.switch_ns = switch
    return RankWindow(rb.rank, lo, hi, rb.window_basis, start_node, end_node, switch,
                      int(statistics.median(per_launch)) if per_launch else None)


def _not_modelled(session: Session, stream_lists: dict[tuple[int, int | None], list[int]], multi_rank: bool,
                  coll_note: str | None) -> tuple[tuple[str, str], ...]:
    out = [("launch calls", LAUNCH_TIME_RULE),
           ("host threads", "the launching thread is not recorded: one host timeline per rank, launches from other "
            "threads (autograd's backward, data loaders) on it"),
           ("operator spans", "the session keeps no operator (aten) spans, only recorded ranges (record_function, "
            "kernelscope.region): the host timeline holds launches, synchronize calls, step boundaries and those "
            "ranges' edges, and the host time between them")]
    streams: dict[int, int] = defaultdict(int)
    for rank, _ in stream_lists:
        streams[rank] += 1
    if any(n > 1 for n in streams.values()):
        out.append(("event records, event and stream waits", "cudaEventRecord / cudaStreamWaitEvent are not in the "
                    "session: an op that waits for another stream is taken as released by its launch at its "
                    "measured start; a stream or event synchronize, whose stream or event is not recorded, waits for "
                    "every stream's last op that ended while it blocked"))
    if multi_rank and not session.host_syncs:
        out.append(("synchronize calls", "a merged multi-rank session keeps no per-rank synchronize calls: the host "
                    "timelines hold launches and step boundaries only"))
    if coll_note:
        out.append(("collectives", coll_note))
    return tuple(out)


def graph_kernel_gap_ns(graph: ReplayGraph) -> int | None:
    """The median measured gap between a CUDA-graph kernel and its predecessor in the graph (None: no graph
    launches in the session)."""
    gaps = [x.switch_ns for x in graph.ops if x.release == GRAPH]
    return int(statistics.median(gaps)) if gaps else None


# -- replay -----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class RankReplay:
    rank: int
    measured_wall_ns: int
    replayed_wall_ns: int
    bound_by: tuple[tuple[str, int], ...]  # critical path time in the window per edge kind, largest first

    @property
    def error_pct(self) -> float:
        return 100.0 * (self.replayed_wall_ns - self.measured_wall_ns) / self.measured_wall_ns \
            if self.measured_wall_ns else 0.0


@dataclass(frozen=True)
class ReplayResult:
    edits: tuple[str, ...]  # what the edits changed, one line each (none: the graph as measured)
    ranks: tuple[RankReplay, ...]

    @property
    def wall_ns(self) -> int:
        """The job's window: the slowest rank's replayed wall time."""
        return max(r.replayed_wall_ns for r in self.ranks)

    @property
    def measured_wall_ns(self) -> int:
        return max(r.measured_wall_ns for r in self.ranks)

    @property
    def bound_by(self) -> tuple[tuple[str, int], ...]:
        """The slowest rank's critical path by edge kind."""
        return max(self.ranks, key=lambda r: r.replayed_wall_ns).bound_by


@dataclass
class _Times:
    op_start: list[int | None]
    op_end: list[int | None]
    op_by: list[object]  # what bound the start: "launch" | "stream"
    end_by: list[int | None]  # collective: the op whose arrival bound the end
    node_time: list[list[int | None]]
    node_end: list[list[int | None]]
    node_by: list[list[int | None]]  # sync: the waited op that bound its return (None: its call)


def _simulate(g: ReplayGraph) -> _Times:
    n = len(g.ops)
    t = _Times([None] * n, [None] * n, [None] * n, [None] * n, [[None] * len(h) for h in g.hosts],
               [[None] * len(h) for h in g.hosts], [[None] * len(h) for h in g.hosts])
    host_pos = [0] * len(g.hosts)
    stream_pos = [0] * len(g.streams)
    rank_ix = {w.rank: i for i, w in enumerate(g.windows)}
    done = 0
    total = n + sum(len(h) for h in g.hosts)
    while done < total:
        moved = 0
        for r, nodes in enumerate(g.hosts):
            moved += _advance_host(g, t, r, nodes, host_pos)
        for s, idx in enumerate(g.streams):
            moved += _advance_stream(g, t, idx, s, stream_pos, rank_ix)
        if not moved:
            raise ValueError("the replay graph has a cycle: no node could be replayed")
        done += moved
    return t


def _advance_host(g: ReplayGraph, t: _Times, r: int, nodes: tuple[HostNode, ...], pos: list[int]) -> int:
    moved = 0
    times, ends = t.node_time[r], t.node_end[r]
    while pos[r] < len(nodes):
        i = pos[r]
        x = nodes[i]
        if x.kind == SYNC and any(t.op_end[w] is None for w in x.waits_for):
            break
        at = x.time_ns if i == 0 else ends[i - 1] + x.host_before_ns  # type: ignore[operator]
        times[i] = at
        if x.kind == SYNC:
            bound, by = at, None
            for w in x.waits_for:
                if t.op_end[w] > bound:  # type: ignore[operator]
                    bound, by = t.op_end[w], w
            ends[i] = bound + x.cost_ns  # type: ignore[operator]
            t.node_by[r][i] = by
        else:
            ends[i] = at
        pos[r] += 1
        moved += 1
    return moved


def _advance_stream(g: ReplayGraph, t: _Times, idx: tuple[int, ...], s: int, pos: list[int],
                    rank_ix: dict[int, int]) -> int:
    moved = 0
    while pos[s] < len(idx):
        k = idx[pos[s]]
        x = g.ops[k]
        if t.op_start[k] is None:
            launched = t.node_time[rank_ix[x.rank]][x.launch_node] if x.launch_node >= 0 else x.start_ns
            if launched is None:
                break
            start, by = launched + x.latency_ns, "launch"
            if x.prev is not None:
                after = t.op_end[x.prev] + x.switch_ns  # type: ignore[operator]
                if after > start:
                    start, by = after, "stream"
            t.op_start[k], t.op_by[k] = start, by
        if x.collective is None:
            t.op_end[k] = t.op_start[k] + x.duration_ns  # type: ignore[operator]
        else:
            c = g.collectives[x.collective]
            arrivals = [t.op_start[m] for m in c.ops]
            if None in arrivals:
                break
            last = max(range(len(c.ops)), key=lambda j: arrivals[j])  # type: ignore[arg-type,return-value]
            t.op_end[k] = arrivals[last] + c.tail_ns[c.ops.index(k)]  # type: ignore[operator]
            t.end_by[k] = c.ops[last]
        pos[s] += 1
        moved += 1
    return moved


def replay(graph: ReplayGraph, edits: tuple["Edit", ...] = ()) -> ReplayResult:
    """The window's wall time per rank with ``edits`` applied to ``graph`` first, and what bound it. A window of
    steps ends when its last step ends on the host and the GPU work that ended inside it (as measured) has ended
    (a host that runs ahead, with no synchronize recorded, still waits for its GPU work); a window without steps
    ends with the rank's last GPU op."""
    g = apply_edits(graph, edits)
    t = _simulate(g)
    out = []
    for r, w in enumerate(g.windows):
        start = t.node_time[r][w.start_node] if w.start_node is not None else w.start_ns
        inside = [k for k, x in enumerate(graph.ops) if x.rank == w.rank and x.start_ns < w.end_ns
                  and (w.end_node is None or x.end_ns <= w.end_ns)]
        last = max(inside, key=lambda k: t.op_end[k]) if inside else None  # type: ignore[arg-type,return-value]
        if w.end_node is not None and (last is None or t.node_end[r][w.end_node] >= t.op_end[last]):  # type: ignore
            end, where = t.node_end[r][w.end_node], ("node", r, w.end_node)
        else:
            end, where = t.op_end[last], ("end", last)  # type: ignore[index]
        out.append(RankReplay(w.rank, w.end_ns - w.start_ns, end - start,  # type: ignore[operator]
                              _critical_path(g, t, where, start)))  # type: ignore[arg-type]
    return ReplayResult(g.edits, tuple(out))


def _critical_path(g: ReplayGraph, t: _Times, where: tuple, lo: int) -> tuple[tuple[str, int], ...]:
    """Walk back from the window's end along what bound each time, adding each edge's time (clipped to the
    window) to its kind; edges on another rank's timeline (past a collective) count as waiting for it."""
    acc: dict[str, int] = defaultdict(int)
    own = g.windows[where[1]].rank if where[0] == "node" else g.ops[where[1]].rank
    walk = _Walk(g, t, lo, own, acc)
    at: tuple | None = where
    while at is not None:
        at = walk.node(*at[1:]) if at[0] == "node" else walk.end(at[1]) if at[0] == "end" else walk.start(at[1])
    return tuple(sorted(((k, ns) for k, ns in acc.items() if ns), key=lambda kv: (-kv[1], kv[0])))


@dataclass
class _Walk:
    """One step back along a critical path from a host node, an op's end or an op's start: the edge that bound it
    is added, and the place it came from returned (None: the window's start is reached)."""

    g: ReplayGraph
    t: _Times
    lo: int
    own: int  # the rank whose window it is
    acc: dict[str, int]
    here: int | None = None  # the rank whose timeline the walk is on

    def add(self, kind: str, a: int, b: int) -> None:
        if b > self.lo:
            rank = self.own if self.here is None else self.here
            self.acc[kind if rank == self.own else f"{WAITING} ({kind})"] += b - max(a, self.lo)

    def node(self, r: int, i: int) -> tuple | None:
        x, at, end = self.g.hosts[r][i], self.t.node_time[r][i], self.t.node_end[r][i]
        if end <= self.lo:  # type: ignore[operator]
            return None
        if x.kind == SYNC:
            self.add(SYNC_RETURN, end - x.cost_ns, end)  # type: ignore[operator]
            by = self.t.node_by[r][i]
            if by is not None:
                return ("end", by)
        if i == 0:
            return None
        prev = self.g.hosts[r][i - 1]
        launching = x.kind == LAUNCH and prev.kind in BETWEEN_LAUNCHES and x.host_before_ns <= HOST_STALL_GAP_NS
        self.add(HOST_LAUNCHING if launching else HOST_OTHER, at - x.host_before_ns, at)  # type: ignore[operator]
        return ("node", r, i - 1)

    def end(self, k: int) -> tuple | None:
        x, end, start = self.g.ops[k], self.t.op_end[k], self.t.op_start[k]
        if end <= self.lo:  # type: ignore[operator]
            return None
        by = self.t.end_by[k]
        if by is not None and by != k:  # a collective: the last rank's arrival bound it; the path goes on there
            self.add(COMMUNICATION, self.t.op_start[by], end)  # type: ignore[arg-type]
            self.here = self.g.ops[by].rank
            return ("start", by)
        self.add(COMMUNICATION if x.collective is not None else GPU_KINDS[x.kind], start, end)  # type: ignore[arg-type]
        return ("start", k)

    def start(self, k: int) -> tuple | None:
        x, start = self.g.ops[k], self.t.op_start[k]
        if start <= self.lo:  # type: ignore[operator]
            return None
        if self.t.op_by[k] == "stream" and x.prev is not None:
            self.add(GPU_SWITCH, self.t.op_end[x.prev], start)  # type: ignore[arg-type]
            return ("end", x.prev)
        if x.launch_node < 0:
            return None
        r = next(i for i, w in enumerate(self.g.windows) if w.rank == x.rank)
        self.add(LAUNCH_LATENCY, self.t.node_time[r][x.launch_node], start)  # type: ignore[arg-type]
        return ("node", r, x.launch_node)


# -- edits ------------------------------------------------------------------------------------------------------

class Edit(Protocol):
    def apply(self, graph: ReplayGraph) -> tuple[ReplayGraph, str]: ...


def apply_edits(graph: ReplayGraph, edits: tuple[Edit, ...]) -> ReplayGraph:
    g = graph
    for e in edits:
        g, said = e.apply(g)
        g = replace(g, edits=g.edits + (said,))
    return g


def _in_window(w: RankWindow, t: int) -> bool:
    return w.start_ns <= t < w.end_ns


@dataclass(frozen=True)
class RemoveSyncs:
    """The synchronize calls in the window removed: the host goes on at once and the GPU stays fed. The last call
    of each step is kept when ``keep_last_per_step`` (the step's own synchronize, as a fix that reads its values
    once a step keeps it)."""

    keep_last_per_step: bool = True

    def apply(self, graph: ReplayGraph) -> tuple[ReplayGraph, str]:
        hosts = []
        removed = kept = 0
        for w, nodes in zip(graph.windows, graph.hosts):
            last_of_step = set()
            if self.keep_last_per_step:
                last = None
                for i, x in enumerate(nodes):
                    if x.kind == SYNC:
                        last = i
                    elif x.kind == STEP_END and last is not None:
                        last_of_step.add(last)
                        last = None
            new = list(nodes)
            for i, x in enumerate(nodes):
                if x.kind != SYNC or not _in_window(w, x.time_ns):
                    continue
                if i in last_of_step:
                    kept += 1
                    continue
                new[i] = _evolve(x, waits_for=(), cost_ns=0)
                removed += 1
            hosts.append(tuple(new))
        said = f"{removed:,} synchronize call(s) in the window removed" + \
            (f", the last of each step kept ({kept:,})" if self.keep_last_per_step else "")
        return replace(graph, hosts=tuple(hosts)), said


@dataclass(frozen=True)
class ShrinkLaunchOverhead:
    """Launch overhead shrunk to a CUDA graph replay's: in the window, the host time from one launch to the next
    (range edges between them included; up to thresholds.HOST_STALL_GAP_NS: per-op overhead) cut to ``per_launch_ns``
    (a replayed graph makes one launch call per graph, none per kernel) and each host-fed op queued
    ``kernel_gap_ns`` after its predecessor ends. ``kernel_gap_ns`` None: the median gap between the kernels of
    this session's own CUDA-graph launches, else RECORDED_GRAPH_KERNEL_GAP_NS. ``source`` says where given
    figures come from."""

    per_launch_ns: int = 0
    kernel_gap_ns: int | None = None
    source: str = ""

    def apply(self, graph: ReplayGraph) -> tuple[ReplayGraph, str]:
        gap, gap_source = self._gap(graph)
        hosts = []
        cut = saved = 0
        ops = list(graph.ops)
        for w, nodes in zip(graph.windows, graph.hosts):
            new = list(nodes)
            last = None  # the previous launch, while only range edges follow it
            for i, x in enumerate(nodes):
                if x.kind not in BETWEEN_LAUNCHES:
                    last = None
                    continue
                if x.kind != LAUNCH:
                    continue
                between = range(last + 1, i + 1) if last is not None else range(0)
                host = sum(nodes[j].host_before_ns for j in between)
                last = i
                if not between or not _in_window(w, x.time_ns) or not self.per_launch_ns < host <= HOST_STALL_GAP_NS:
                    continue
                for j in between:  # the range edges between two launches go with the launch overhead
                    new[j] = _evolve(nodes[j], host_before_ns=0)
                new[i] = _evolve(x, host_before_ns=self.per_launch_ns)
                cut += 1
                saved += host - self.per_launch_ns
                if x.op is not None and ops[x.op].release == HOST_FED:  # never slower than measured
                    ops[x.op] = _evolve(ops[x.op], switch_ns=min(gap, ops[x.op].switch_ns))
            hosts.append(tuple(new))
        said = (f"host time between launches cut to {self.per_launch_ns / 1e3:.2f} µs per launch at {cut:,} launches "
                f"({saved / 1e6:.3f} ms of host time), the GPU's gap between them {gap} ns ({gap_source})"
                + (f"; {self.source}" if self.source else ""))
        return replace(graph, hosts=tuple(hosts), ops=tuple(ops)), said

    def _gap(self, graph: ReplayGraph) -> tuple[int, str]:
        if self.kernel_gap_ns is not None:
            return self.kernel_gap_ns, self.source or "given"
        own = graph_kernel_gap_ns(graph)
        if own is not None:
            return own, "median gap between the kernels of this session's CUDA-graph launches"
        return RECORDED_GRAPH_KERNEL_GAP_NS, RECORDED_GRAPH_KERNEL_GAP_SOURCE


@dataclass(frozen=True)
class SetKernelDuration:
    """The duration of every launch in the window of the kernels whose names match ``kernel_pattern`` (a regular
    expression, searched) set to ``duration_ns``, or multiplied by ``scale``; ``source`` says where it comes
    from (an ideal from FLOPs and bytes at measured ceilings, a rate ratio)."""

    kernel_pattern: str
    duration_ns: int | None = None
    scale: float | None = None
    source: str = ""

    def apply(self, graph: ReplayGraph) -> tuple[ReplayGraph, str]:
        if (self.duration_ns is None) == (self.scale is None):
            raise ValueError("SetKernelDuration takes either duration_ns or scale")
        pat = re.compile(self.kernel_pattern)
        windows = {w.rank: w for w in graph.windows}
        ops = list(graph.ops)
        n = before = after = 0
        for k, x in enumerate(ops):
            if x.kind != KERNEL or not pat.search(x.name) or not _in_window(windows[x.rank], x.start_ns):
                continue
            d = self.duration_ns if self.duration_ns is not None else \
                int(round(x.duration_ns * self.scale))  # type: ignore[operator]
            ops[k] = _evolve(x, duration_ns=d)
            n += 1
            before += x.duration_ns
            after += d
        how = f"set to {self.duration_ns / 1e3:.2f} µs" if self.duration_ns is not None else f"x {self.scale:.4g}"
        said = (f"{n:,} launches of kernels matching {self.kernel_pattern!r} {how}"
                + (f" ({self.source})" if self.source else "") + f": {before / 1e6:.3f} -> {after / 1e6:.3f} ms")
        return replace(graph, ops=tuple(ops)), said


@dataclass(frozen=True)
class RemoveHostWork:
    """Host time longer than ``min_ns`` between two host nodes in the window (work that is neither launching nor
    waiting: preprocessing, Python) taken off the critical path: cut to the rank's median host time between two
    measured launches (RankWindow.host_per_launch_ns), or to ``min_ns`` where the window has none."""

    min_ns: int = HOST_STALL_GAP_NS

    def apply(self, graph: ReplayGraph) -> tuple[ReplayGraph, str]:
        hosts = []
        cut = saved = 0
        for w, nodes in zip(graph.windows, graph.hosts):
            to = w.host_per_launch_ns if w.host_per_launch_ns is not None else self.min_ns
            new = list(nodes)
            for i, x in enumerate(nodes):
                if i and x.host_before_ns > max(self.min_ns, to) and _in_window(w, x.time_ns):
                    new[i] = _evolve(x, host_before_ns=to)
                    cut += 1
                    saved += x.host_before_ns - to
            hosts.append(tuple(new))
        said = (f"{cut:,} stretches of host work over {self.min_ns / 1e3:.0f} µs cut to the host's measured time per "
                f"launch: {saved / 1e6:.3f} ms of host time off the critical path")
        return replace(graph, hosts=tuple(hosts)), said


@dataclass(frozen=True)
class ReplayedGain:
    baseline: ReplayResult
    fixed: ReplayResult
    gain_pct: float
    formula: str = GAIN_FORMULA


def replayed_gain(graph: ReplayGraph, edits: tuple[Edit, ...], baseline: ReplayResult | None = None) -> ReplayedGain:
    """The gain of ``edits`` (applied together) as a share of the replayed window wall time. ``baseline``: the
    unedited replay of ``graph`` when the caller has it."""
    base = baseline if baseline is not None else replay(graph)
    fixed = replay(graph, edits)
    gain = 100.0 * (1 - fixed.wall_ns / base.wall_ns) if base.wall_ns > 0 else 0.0
    return ReplayedGain(base, fixed, gain)
