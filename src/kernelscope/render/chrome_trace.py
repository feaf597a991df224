"""A session as a Chrome / Perfetto trace (Trace Event Format JSON): plain dicts, no Rich.

Tracks: one per stream with the kernel launches and memcpy/memset (the trace
pass's start and duration); the regions' GPU spans beside them and their CPU
spans in a host process; GPU samples as counter tracks; and, for every launch
with block records, one track per resident-block slot of each SM ("SM 12 ·
slot 0") with its blocks; for every launch with
phase scopes, one track per warp (below). ``ts``/``dur`` are
microseconds on the session clock (ns since ``time_origin_ns``, kept in
``otherData``). Anything that has no time on that clock is left out with a
note, never placed at a made-up time.

The parts, in order: tracks that trace viewers can draw (lanes), kernel launch events kept as the session's
columns, phase scopes, memory, the trace itself, and the multi-GPU export (a process group per rank).
"""
from __future__ import annotations

import dataclasses
import heapq
import itertools
import json
import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Callable, Iterable, Iterator, Sequence, Union

from kernelscope.analyze.ranks import RanksReport
from kernelscope.model import Launch, Session
from kernelscope.model.blocks import BlockRecords, block_xyz
from kernelscope.model.launch_table import LaunchShape, LaunchTable
from kernelscope.model.names import short_kernel_name
from kernelscope.model.operators import Operator
from kernelscope.render.text import visible


# ====================================================================================================================
# Tracks that trace viewers can draw: complete (``X``) events on one track must nest or be disjoint.
#
# Perfetto and chrome://tracing draw the ``X`` events of one (pid, tid) as a
# stack of nested slices; two that overlap only in part are drawn wrong or
# dropped. :func:`assign_lanes` gives each span the first lane where it fits
# (greedy interval colouring: as few lanes as the spans' overlap needs), and
# :func:`split_partial_overlaps` uses it to move what would overlap in part onto
# an extra, named track of the same process, so a trace never depends on a
# viewer's tie-breaking.

def event_span_ns(e: dict[str, Any]) -> tuple[int, int]:
    """An ``X`` event's (start, end) in whole ns (``ts``/``dur`` are µs, written from whole ns)."""
    start = round(e["ts"] * 1000)
    return start, start + round(e["dur"] * 1000)


def assign_lanes(spans: list[tuple[int, int]], nest: bool) -> list[int]:
    """The lane of each (start, end) span, in input order: spans on one lane are disjoint, or nested if ``nest``.

    Each span, by start (longest first at equal starts), takes the first lane
    whose open spans have all ended by its start, or, with ``nest``, whose
    innermost open span contains it. O(n log n) for any overlap: the spans that
    end are retired from a heap by end, and the first lane that fits is found
    in a heap of free lanes (without ``nest``) or a max-tree over the lanes'
    innermost ends (with it).
    """
    if all(a[1] <= b[0] for a, b in zip(spans, spans[1:])):  # one after another already (kernels on a stream)
        return [0] * len(spans)
    order = sorted(range(len(spans)), key=lambda i: (spans[i][0], -spans[i][1]))
    return _nested_lanes(spans, order) if nest else _disjoint_lanes(spans, order)


def _disjoint_lanes(spans: list[tuple[int, int]], order: list[int]) -> list[int]:
    """Each span to the lowest-numbered lane whose last span has ended by its start."""
    lane_of = [0] * len(spans)
    first_free_lanes(order, [s for s, _ in spans], [e for _, e in spans], lane_of)
    return lane_of


def first_free_lanes(order: Iterable[int], start: Sequence[int], end: Sequence[int], lane_of: list[int]) -> int:
    """Set ``lane_of[i]`` for each ``i`` of ``order`` (by start, longest first at equal starts): the
    lowest-numbered lane whose last span has ended by ``start[i]``. Returns the number of lanes used.
    Heaps of the busy lanes by end and of the free lanes by number: n log n for any overlap."""
    free: list[int] = []  # lanes free now, a heap of their numbers
    busy: list[tuple[int, int]] = []  # (end, lane) of the span each busy lane holds, a heap
    lanes = 0
    push, pop = heapq.heappush, heapq.heappop  # a million blocks: the loop's own cost is what remains
    for i in order:
        s = start[i]
        while busy and busy[0][0] <= s:
            push(free, pop(busy)[1])
        if free:
            lane = pop(free)
        else:
            lane, lanes = lanes, lanes + 1
        push(busy, (end[i], lane))
        lane_of[i] = lane
    return lanes


def _nested_lanes(spans: list[tuple[int, int]], order: list[int]) -> list[int]:
    """Each span to the lowest-numbered lane that is free at its start or whose innermost open span contains it:
    per lane a stack of open ends (innermost last, so the smallest), and a max-tree over the lanes of their
    innermost end (a free lane: infinity) whose leftmost leaf at or past the span's end is the lane."""
    n = len(spans)
    size = 1 << max(0, (n - 1).bit_length())
    unused, free = -math.inf, math.inf
    tree = [unused] * (2 * size)
    stacks: list[list[int]] = []
    ending: list[tuple[int, int]] = []  # (end, lane) of every open span, a heap
    lane_of = [0] * n

    def set_key(lane: int, key: float) -> None:
        k = lane + size
        tree[k] = key
        k >>= 1
        while k:
            tree[k] = max(tree[2 * k], tree[2 * k + 1])
            k >>= 1

    for i in order:
        start, end = spans[i]
        while ending and ending[0][0] <= start:  # spans ended by this start leave their lanes' stacks
            lane = heapq.heappop(ending)[1]
            ends = stacks[lane]
            while ends and ends[-1] <= start:
                ends.pop()
            set_key(lane, ends[-1] if ends else free)
        if tree[1] >= end:
            k = 1
            while k < size:
                k = 2 * k if tree[2 * k] >= end else 2 * k + 1
            lane = k - size
        else:
            lane = len(stacks)
            stacks.append([])
        stacks[lane].append(end)
        heapq.heappush(ending, (end, lane))
        set_key(lane, end)
        lane_of[i] = lane
    return lane_of


def split_partial_overlaps(events: list[Any], notes: list[str]) -> list[Any]:
    """Move ``X`` events that overlap others on their track only in part to extra tracks, with a note.

    Events stay in place where their track is already drawable (the usual case:
    kernels on a stream run one after another, regions nest); an extra track is
    named after its track ("stream 7 · overlap 1"). ``events`` are dicts, or runs of
    kernel events kept as columns (KernelRows), which say
    their own spans and take their moves, or block events kept as columns (BlockRows), whose slot tracks
    never overlap.
    """
    spans: dict[tuple[int, int], list[tuple[int, int]]] = {}
    refs: dict[tuple[int, int], list[int]] = {}  # per track: event position (>= 0) or ~launch index of a row
    rows: Any = None
    for i, e in enumerate(events):
        if isinstance(e, BlockRows):  # slot tracks: disjoint by construction
            continue
        if not isinstance(e, dict):
            e.add_spans(spans, refs)
            rows = e.cols
        elif e["ph"] == "X":
            key = (e["pid"], e["tid"])
            spans.setdefault(key, []).append(event_span_ns(e))
            refs.setdefault(key, []).append(i)
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in events
             if isinstance(e, dict) and e["ph"] == "M" and e["name"] == "thread_name"}
    next_tid: dict[int, int] = defaultdict(int)
    for pid, tid in list(spans) + list(names):
        next_tid[pid] = max(next_tid[pid], (tid or 0) + 1)
    extra: list[dict[str, Any]] = []
    for (pid, tid), track in spans.items():
        lanes = assign_lanes(track, nest=True)
        if max(lanes) == 0:
            continue
        base = names.get((pid, tid), f"track {tid}")
        lane_tid = {}
        for lane in range(1, max(lanes) + 1):
            lane_tid[lane] = next_tid[pid]
            next_tid[pid] += 1
            extra.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": lane_tid[lane],
                          "args": {"name": f"{base} · overlap {lane}"}})
        moved = 0
        for i, lane in zip(refs[(pid, tid)], lanes):
            if lane:
                if i >= 0:
                    events[i] = {**events[i], "tid": lane_tid[lane]}
                else:
                    rows.moved[~i] = lane_tid[lane]
                moved += 1
        notes.append(f"{moved} event(s) on track '{base}' overlap others there only in part and were drawn on "
                     f"{max(lanes)} extra track(s) named '{base} · overlap N'")
    return events + extra


# ====================================================================================================================
# Kernel launch events of a Chrome trace kept as the session's columns, written as JSON text.
#
# A million launches make a million kernel events of which most differ only in start, duration, launch
# index and correlation id (and the kernel name in ``args`` can be 2 KB). So the events of launches on
# the common path stay rows of the LaunchTable: each shape's constant parts are encoded once as JSON
# fragments, and a row is written by joining its numbers between them, byte for byte what ``json.dumps``
# writes for the same event dict (``events()`` builds those dicts, for tests and small traces).

ROWS_PER_CHUNK = 5000  # rows joined into one string before writing: bounded memory, few write calls


@dataclass
class KernelColumns:
    """What the kernel rows of one process trace share: the table, each shape's event parts (text already
    made plain), the process id, the rows moved to an overlap track (launch index -> tid), and the operators:
    launch correlation id -> operator index, and each operator's args (text already made plain)."""

    table: LaunchTable
    shape_event: list[tuple[Any, ...]]  # per shape: name, tid, kernel, grid, block, regions, extra args
    pid: int
    moved: dict[int, int] = field(default_factory=dict)
    op_of: dict[int, int] = field(default_factory=dict)
    op_args: list[dict[str, Any]] = field(default_factory=list)

    def event(self, i: int) -> dict[str, Any]:
        t = self.table
        name, tid, kernel, grid, block, regions, extra = self.shape_event[t.shape[i]]
        op = self.op_of.get(t.correlation_id[i])  # type: ignore[arg-type]
        return {"ph": "X", "cat": "kernel", "name": name, "pid": self.pid, "tid": self.moved.get(i, tid),
                "ts": t.start_ns[i] / 1000.0, "dur": t.duration_ns[i] / 1000.0,  # type: ignore[operator]
                "args": {"kernel": kernel, "launch_index": i, "grid": grid, "block": block,
                         "correlation_id": t.correlation_id[i], "regions": regions, **extra,
                         **(self.op_args[op] if op is not None else {})}}

    def fragments(self, sid: int, tid: int, op: int | None = None) -> tuple[str, str, str, str]:
        """The JSON text of shape ``sid``'s event (launched by operator ``op``) around its per-row numbers:
        before ``ts``, between ``dur`` and ``launch_index``, between it and ``correlation_id``, and after it."""
        name, _, kernel, grid, block, regions, extra = self.shape_event[sid]
        d = json.dumps
        head = f'{{"ph": "X", "cat": "kernel", "name": {d(name)}, "pid": {d(self.pid)}, "tid": {d(tid)}, "ts": '
        args = f', "args": {{"kernel": {d(kernel)}, "launch_index": '
        mid = f', "grid": {d(grid)}, "block": {d(block)}, "correlation_id": '
        more = {**extra, **(self.op_args[op] if op is not None else {})}
        tail = f', "regions": {d(regions)}' + "".join(f", {d(k)}: {d(v)}" for k, v in more.items()) + "}}"
        return head, args, mid, tail


@dataclass
class KernelRows:
    """The kernel events of launches ``first`` .. ``stop - 1`` (those with a start time), in launch order."""

    cols: KernelColumns
    first: int
    stop: int

    def indices(self) -> Iterator[int]:
        start = self.cols.table.start_ns
        return (i for i in range(self.first, self.stop) if start[i] is not None)

    def count(self) -> int:
        start = self.cols.table.start_ns
        return sum(1 for i in range(self.first, self.stop) if start[i] is not None)

    def events(self) -> list[dict[str, Any]]:
        return [self.cols.event(i) for i in self.indices()]

    def add_spans(self, spans: dict[tuple[int, int], list[tuple[int, int]]],
                  refs: dict[tuple[int, int], list[int]]) -> None:
        """Each row's (start, end) in whole ns (as event_span_ns reads the event) on its track,
        with ``~launch index`` as its reference (dict events use their position, >= 0)."""
        c, t = self.cols, self.cols.table
        shape, start, dur = t.shape, t.start_ns, t.duration_ns
        lists: dict[int, tuple[Any, Any]] = {}
        for i in range(self.first, self.stop):
            st = start[i]
            if st is None:
                continue
            sid = shape[i]
            pair = lists.get(sid)
            if pair is None:
                key = (c.pid, c.moved.get(i, c.shape_event[sid][1]))
                pair = lists[sid] = (spans.setdefault(key, []), refs.setdefault(key, []))
            s = round(st / 1000.0 * 1000)
            pair[0].append((s, s + round(dur[i] / 1000.0 * 1000)))
            pair[1].append(~i)

    def write(self, add: Callable[[str], None]) -> None:
        """The rows as JSON text, ``ROWS_PER_CHUNK`` at a time, each chunk handed to ``add``."""
        c, t = self.cols, self.cols.table
        shape, start, dur, corr, moved, op_of = t.shape, t.start_ns, t.duration_ns, t.correlation_id, c.moved, c.op_of
        frags: dict[tuple[int, int, int | None], tuple[str, str, str, str]] = {}
        base = [c.fragments(sid, ev[1]) for sid, ev in enumerate(c.shape_event)]
        rows: list[str] = []
        for i in range(self.first, self.stop):
            st = start[i]
            if st is None:
                continue
            sid, k = shape[i], corr[i]
            op = op_of.get(k) if op_of else None  # type: ignore[arg-type]
            if op is not None or i in moved:
                key = (sid, moved.get(i, c.shape_event[sid][1]), op)
                f = frags.get(key) or frags.setdefault(key, c.fragments(*key))
            else:
                f = base[sid]
            rows.append(f'{f[0]}{st / 1000.0!r}, "dur": {dur[i] / 1000.0!r}{f[1]}{i}{f[2]}'
                        f'{"null" if k is None else k}{f[3]}')
            if len(rows) >= ROWS_PER_CHUNK:
                add(", ".join(rows))
                rows = []
        if rows:
            add(", ".join(rows))


# ====================================================================================================================
# Phase scopes of a launch as Chrome / Perfetto tracks: one track per warp (block, warp).
#
# Proton's times inside a block are SM cycles, not session-clock ns, and cycles
# are never converted with a made-up clock rate: each launch's scopes get their
# own process, placed at the launch's start, with a block at its measured
# %globaltimer offset and its scopes at one cycle per ns (Proton's own
# convention). The process name and a note say so.

PID_SCOPES = 10_000  # scope tracks: PID_SCOPES + launch index, clear of the block tracks


def scope_events(i: int, x: Launch, notes: list[str]) -> list[dict[str, Any]]:
    s = x.scopes
    if s is None or not s.warps:
        return []
    if x.start_ns is None:
        notes.append(f"phase scopes of launch {i} were left out: the launch has no start on the session clock")
        return []
    pid, name = PID_SCOPES + i, short_kernel_name(x.kernel)
    cycles = s.time_unit == "cycles"
    label = f"warp phases · {name} (launch {i})" + (" · inside a block: SM cycles drawn as ns" if cycles else "")
    out: list[dict[str, Any]] = [{"ph": "M", "name": "process_name", "pid": pid, "args": {"name": label}},
                                 {"ph": "M", "name": "process_sort_index", "pid": pid, "args": {"name": str(pid)}}]
    if cycles:
        notes.append(f"phase scopes of launch {i} ({name}) are SM cycles (clock64) drawn as ns from each block's "
                     "measured start offset; only the block offsets are on a ns clock")
    warps = sorted(s.warps, key=lambda w: (w.block_id, w.warp))
    max_warp = max(w.warp for w in warps) + 1
    for w in warps:
        tid = w.block_id * max_warp + w.warp
        sm = f" (SM {w.smid})" if w.smid is not None else ""
        out.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                    "args": {"name": f"block {w.block_id} warp {w.warp}{sm}"}})
        base = x.start_ns + (w.block_offset_ns or 0)
        for sc, st, en in zip(w.scope, w.start_ns, w.end_ns):
            out.append({"ph": "X", "cat": "scope", "name": s.names[sc] if 0 <= sc < len(s.names) else f"scope {sc}",
                        "pid": pid, "tid": tid, "ts": (base + st) / 1000.0, "dur": (en - st) / 1000.0,
                        "args": {f"start_{s.time_unit}": st, f"end_{s.time_unit}": en, "block_id": w.block_id,
                                 "warp": w.warp, "smid": w.smid, "clock": s.clock}})
    return out


# ====================================================================================================================
# Chrome / Perfetto trace events of memory: the caching allocator's allocated and reserved bytes as counter
# tracks (one value per allocator event, from the session's history: the same running sums analyze/memory.py
# names) and kernelscope.mark() points as instant events with their values.

PID_MEMORY = 4  # beside the GPU (1), host (2) and samples (3) processes of chrome_trace.py
_ALLOC_DELTA = {"alloc": 1, "free_requested": -1}
_RESERVED_DELTA = {"segment_alloc": 1, "segment_map": 1, "segment_free": -1, "segment_unmap": -1}


def memory_events(session: Session, notes: list[str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    h = session.memory
    if h is not None and len(h) and session.time_origin_ns:
        out.append(
            {"ph": "M", "name": "process_name", "pid": PID_MEMORY, "args": {"name": "memory (caching allocator)"}}
        )
        # the running sums start from the state before the first event (the snapshot's sums - the net change)
        a = h.end_allocated_bytes - sum(_ALLOC_DELTA.get(h.actions[c], 0) * s for c, s in zip(h.action, h.size))
        r = h.end_reserved_bytes - sum(_RESERVED_DELTA.get(h.actions[c], 0) * s for c, s in zip(h.action, h.size))
        for t, code, size in zip(h.t_ns, h.action, h.size):
            name = h.actions[code]
            if name not in _ALLOC_DELTA and name not in _RESERVED_DELTA:
                continue
            a += _ALLOC_DELTA.get(name, 0) * size
            r += _RESERVED_DELTA.get(name, 0) * size
            out.append({"ph": "C", "name": "allocator [bytes]", "pid": PID_MEMORY, "ts": t / 1000.0,
                        "args": {"allocated": a, "reserved": r}, "cat": f"memory{h.device_index}"})
    elif h is not None and len(h):
        notes.append("the allocator history has no session clock (no trace) and was left out")
    placed = [m for m in session.marks if m.t_ns is not None]
    if len(placed) < len(session.marks):
        notes.append(f"{len(session.marks) - len(placed)} marks have no time on the session clock and were left out")
    if placed:
        out += [{"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "host (CPU)"}},
                {"ph": "M", "name": "thread_name", "pid": 2, "tid": 2, "args": {"name": "marks"}}]
    for m in placed:
        args: dict[str, Any] = {
            "step": m.step,
            "allocated_bytes": m.allocated_bytes,
            "reserved_bytes": m.reserved_bytes,
        }
        if m.memory_missing_reason:
            args["memory_missing_reason"] = m.memory_missing_reason
        args.update({f"value.{k}": v for k, v in m.values.items()})
        out.append({"ph": "i", "s": "p", "cat": "mark", "name": m.name, "pid": 2, "tid": 2, "ts": m.t_ns / 1000.0,
                    "args": args})
    return out


# ====================================================================================================================
# The trace.

PID_GPU, PID_HOST, PID_SAMPLES, PID_BLOCKS = 1, 2, 3, 100  # block tracks: PID_BLOCKS + launch index
TID_REGIONS = 1_000_000  # beside the stream tracks, clear of any stream id
TID_UNKNOWN_STREAM = 999_999
SLOTS_PER_SM_TID = 1000  # block tracks: tid = SM * 1000 + slot, or a wider stride where an SM held more


Part = Union[dict[str, Any], KernelRows, "BlockRows"]  # one event, or a run of kernel or block events as columns
DICTS_PER_CHUNK = 5000


@dataclass
class ChromeTrace:
    parts: list[Part] = field(default_factory=list)  # the events in order; launch events mostly as KernelRows
    notes: list[str] = field(default_factory=list)  # what was left out, and why
    time_origin_ns: int = 0
    host: dict[str, str] = field(default_factory=dict)  # what of the host side it holds, what not and why

    @property
    def events(self) -> list[dict[str, Any]]:
        """Every event as a dict (a million launches make a million dicts: writers use write_json)."""
        out: list[dict[str, Any]] = []
        for p in self.parts:
            if isinstance(p, dict):
                out.append(p)
            else:
                out += p.events()
        return out

    def timed_events(self) -> int:
        """The number of events that are not metadata (``ph`` other than ``M``)."""
        return sum(p["ph"] != "M" if isinstance(p, dict) else p.count() for p in self.parts)

    def _other(self) -> dict[str, Any]:
        return {"displayTimeUnit": "ns",
                "otherData": {"generator": "kernelscope", "time_origin_ns": self.time_origin_ns,
                              "clock": "ts in us since time_origin_ns (session clock)", "notes": list(self.notes),
                              "host": dict(self.host)}}

    def to_dict(self) -> dict[str, Any]:
        return {"traceEvents": self.events, **self._other()}

    def write_json(self, f: BinaryIO) -> None:
        """``json.dumps(self.to_dict())``, byte for byte, written to ``f`` in chunks: no event dict per launch
        row and never the whole text in memory."""
        first = True

        def add(text: str) -> None:
            nonlocal first
            f.write(text.encode() if first else b", " + text.encode())
            first = False

        f.write(b'{"traceEvents": [')
        batch: list[dict[str, Any]] = []
        for p in self.parts:
            if isinstance(p, dict):
                batch.append(p)
                if len(batch) < DICTS_PER_CHUNK:
                    continue
            if batch:
                add(json.dumps(batch)[1:-1])  # a list's items are encoded as the items alone would be
                batch = []
            if not isinstance(p, dict):
                p.write(add)
        if batch:
            add(json.dumps(batch)[1:-1])
        f.write(b"], " + json.dumps(self._other())[1:].encode())


def _us(ns: int) -> float:
    return ns / 1000.0


def _meta(kind: str, pid: int, name: str, tid: int | None = None) -> dict[str, Any]:
    e: dict[str, Any] = {"ph": "M", "name": kind, "pid": pid, "args": {"name": name}}
    if tid is not None:
        e["tid"] = tid
    return e


def _launch_event(i: int, x: Launch, cols: KernelColumns) -> dict[str, Any]:
    args: dict[str, Any] = {"kernel": x.kernel, "launch_index": i, "grid": list(x.grid), "block": list(x.block),
                            "correlation_id": x.correlation_id, "regions": list(x.regions)}
    for key in ("registers_per_thread", "shared_memory_per_block_bytes"):
        v = x.value(key)
        if v is not None:
            args[key] = v
    op = cols.op_of.get(x.correlation_id) if x.correlation_id is not None else None
    if op is not None:
        args.update(cols.op_args[op])
    if x.block_records is not None:
        args["block_records"] = len(x.block_records)
    return {"ph": "X", "cat": "kernel", "name": short_kernel_name(x.kernel), "pid": PID_GPU,
            "tid": TID_UNKNOWN_STREAM if x.stream is None else x.stream, "ts": _us(x.start_ns or 0),
            "dur": _us(x.duration_ns), "args": args}


_CONFIG_ARGS = ("registers_per_thread", "shared_memory_per_block_bytes")


def _shape_event(sh: LaunchShape) -> tuple[Any, ...]:
    """What every launch event of one shape shares, its text already made plain (as _plain_text would)."""
    extra = {k: sh.value(k) for k in _CONFIG_ARGS if sh.value(k) is not None}
    return (visible(short_kernel_name(sh.kernel)), TID_UNKNOWN_STREAM if sh.stream is None else sh.stream,
            visible(sh.kernel), list(sh.grid), list(sh.block), list(sh.regions), extra)


@dataclass
class BlockRows:
    """The block events of one launch's block records kept as the records' columns (rows ``keep``, each with
    its ``slot``), written as JSON text byte for byte as ``json.dumps`` writes
    ``events()``: a million records make no million event dicts. First the slot tracks' names, then the blocks."""

    rec: BlockRecords
    keep: list[int]  # the rows drawn, in record order
    slot: list[int]  # per row of rec (rows not kept: unused)
    slots_of_sm: dict[int, int]  # how many slot tracks each SM has
    shift_ns: int  # record time + shift = session time
    clock: str  # how the records were placed on the session clock
    pid: int

    @property
    def stride(self) -> int:
        """A slot track's tid is SM * stride + slot: SLOTS_PER_SM_TID, or more where an SM held more blocks at
        once, so no two SMs' tracks ever share a tid."""
        return max(SLOTS_PER_SM_TID, *self.slots_of_sm.values())

    def count(self) -> int:
        return len(self.keep)

    def _track_names(self) -> list[dict[str, Any]]:
        stride = self.stride
        return [_meta("thread_name", self.pid, f"SM {sm} · slot {lane}", sm * stride + lane)
                for sm in sorted(self.slots_of_sm) for lane in range(self.slots_of_sm[sm])]

    def events(self) -> list[dict[str, Any]]:
        r, stride, out = self.rec, self.stride, self._track_names()
        for k in self.keep:
            b, sm, s, e, lane = r.block_id[k], r.smid[k], r.start_ns[k], r.end_ns[k], self.slot[k]
            out.append({"ph": "X", "cat": "block", "name": f"block {b}", "pid": self.pid, "tid": sm * stride + lane,
                        "ts": _us(s + self.shift_ns), "dur": _us(e - s),
                        "args": {"block_id": b, "block_xyz": list(block_xyz(b, r.grid)), "smid": sm, "slot": lane,
                                 "start_ns_raw": s, "end_ns_raw": e, "clock": self.clock}})
        return out

    def write(self, add: Callable[[str], None]) -> None:
        """The track names and the rows as JSON text, ``ROWS_PER_CHUNK`` rows at a time, each chunk to ``add``."""
        names = self._track_names()
        for c in range(0, len(names), ROWS_PER_CHUNK):
            add(json.dumps(names[c:c + ROWS_PER_CHUNK])[1:-1])
        r, stride, slot, shift = self.rec, self.stride, self.slot, self.shift_ns
        bid, smid, start, end = r.block_id, r.smid, r.start_ns, r.end_ns
        gx, gy = r.grid[0], r.grid[1]
        head = '{"ph": "X", "cat": "block", "name": "block '
        pid = f'", "pid": {json.dumps(self.pid)}, "tid": '
        tail = ', "end_ns_raw": '
        clock = f', "clock": {json.dumps(self.clock)}}}}}'
        rows: list[str] = []
        for k in self.keep:
            b, sm, s, e, lane = bid[k], smid[k], start[k], end[k], slot[k]
            rest = b // gx
            rows.append(f'{head}{b}{pid}{sm * stride + lane}, "ts": {(s + shift) / 1000.0!r}, "dur": '
                        f'{(e - s) / 1000.0!r}, "args": {{"block_id": {b}, "block_xyz": [{b % gx}, {rest % gy}, '
                        f'{rest // gy}], "smid": {sm}, "slot": {lane}, "start_ns_raw": {s}{tail}{e}{clock}')
            if len(rows) >= ROWS_PER_CHUNK:
                add(", ".join(rows))
                rows = []
        if rows:
            add(", ".join(rows))


def _block_events(i: int, x: Launch, notes: list[str]) -> list[Part]:
    """The process of launch ``i``'s blocks: per SM, as many slot tracks as it held blocks at once ("SM 12 ·
    slot 0"), each block on the first slot free at its start (blocks resident at once run side by side, not
    nested)."""
    rec = x.block_records
    assert rec is not None
    start, end = rec.start_ns, rec.end_ns
    n = len(rec)
    keep = [k for k in range(n) if 0 < start[k] <= end[k]]
    if len(keep) < n:
        notes.append(f"{n - len(keep)} block record(s) of launch {i} have a zero time or end before they "
                     "start and were left out")
    if not keep:
        return []
    if rec.clock_offset_ns is not None:
        shift, how = rec.clock_offset_ns, "session clock (measured offset)"
    elif x.start_ns is not None:
        shift, how = x.start_ns - min(start[k] for k in keep), "aligned to the launch's start"
        notes.append(f"block times of launch {i} ({short_kernel_name(x.kernel)}) are aligned to the launch's "
                     "start: the offset from %globaltimer to the session clock was not measured")
    else:
        notes.append(f"block records of launch {i} were left out: neither the launch nor a clock offset places "
                     "them on the session clock")
        return []
    # slots: each SM's rows by start, longest first at equal starts (stable sorts keyed by the columns, no row
    # tuples); the events stay in record order
    order = sorted(keep, key=end.__getitem__, reverse=True)
    order.sort(key=start.__getitem__)
    order.sort(key=rec.smid.__getitem__)
    slot = [0] * n
    slots_of_sm = {sm: first_free_lanes(run, start, end, slot)
                   for sm, run in itertools.groupby(order, key=rec.smid.__getitem__)}
    del order
    pid = PID_BLOCKS + i
    return [_meta("process_name", pid, f"blocks by SM · {short_kernel_name(x.kernel)} (launch {i})"),
            _meta("process_sort_index", pid, str(pid)), BlockRows(rec, keep, slot, slots_of_sm, shift, how, pid)]


def session_to_chrome_trace(session: Session, ranks_report=None) -> ChromeTrace:
    """The trace; a multi-GPU session puts each rank in its own process tracks (below), with
    the waits at collectives of ``ranks_report`` (analyze/ranks.RanksReport) on a track of each waiting rank."""
    if len(session.ranks) > 1:
        out = ChromeTrace(time_origin_ns=session.time_origin_ns)
        out.parts, out.notes = ranks_chrome_events(session, _one_process_trace, ranks_report, PID_GPU)
        out.host = {"operators": "left out: the session does not say which rank's trace an operator came from",
                    "runtime_calls": "left out: the session does not say which rank a host sync came from",
                    "launch_flows": NO_FLOWS}
        out.parts = [_plain_text(e) if isinstance(e, dict) else e for e in out.parts]  # rows: plain already
        return out
    return _one_process_trace(session)


def _one_process_trace(session: Session) -> ChromeTrace:
    out = ChromeTrace(time_origin_ns=session.time_origin_ns)
    ev, notes = out.parts, out.notes
    gpu = "GPU" if session.device is None else f"GPU {session.device.index}: {session.device.name}"
    ev += [_meta("process_name", PID_GPU, gpu), _meta("process_sort_index", PID_GPU, str(PID_GPU))]
    table = session.launch_table()  # launches column-wise: one event dict per launch, no Launch objects
    n = len(table)
    timed_shapes = {sid for sid, st in zip(table.shape, table.start_ns) if st is not None} if None in table.start_ns \
        else set(table.shape)
    streams = {table.shapes[sid].stream for sid in timed_shapes} | {a.stream for a in session.activities}
    for s in sorted(streams, key=lambda v: (v is None, v or 0)):
        tid = TID_UNKNOWN_STREAM if s is None else s
        ev.append(_meta("thread_name", PID_GPU, "stream (not recorded)" if s is None else f"stream {s}", tid))
    untimed = table.start_ns.count(None)
    if untimed:
        notes.append(f"{untimed} of {n} launches have no start time (seen only by the "
                     "counter pass, which serialises kernels) and were left out rather than placed at a made-up time")
    # Launches on the common path stay rows of the table (KernelRows, written from per-shape JSON text);
    # those with counter results or instrumentation, or a varying configuration, are built as Launches.
    ops = session.operators
    cols = KernelColumns(table, [_shape_event(sh) for sh in table.shapes], PID_GPU)
    if ops is not None:
        cols.op_of, cols.op_args = ops.launch_op, [_operator_args(o) for o in ops.ops]
    varying = {sid for sid, sh in enumerate(table.shapes) if any(k in sh.varying for k in _CONFIG_ARGS)}
    slow = sorted(set(table.details) | ({i for i, sid in enumerate(table.shape) if sid in varying}
                                        if varying else set()))
    first = 0
    for i in [*slow, n]:
        if first < i:
            ev.append(KernelRows(cols, first, i))
        first = i + 1
        if i == n:
            break
        x = table.launch(i)
        if x.start_ns is not None:
            ev.append(_plain_text(_launch_event(i, x, cols)))
        if x.block_records is not None:
            ev += _block_events(i, x, notes)
        ev += scope_events(i, x, notes)  # Proton phase scopes: one track per warp
    for a in session.activities:
        ev.append({"ph": "X", "cat": a.kind, "name": a.name, "pid": PID_GPU,
                   "tid": TID_UNKNOWN_STREAM if a.stream is None else a.stream, "ts": _us(a.start_ns),
                   "dur": _us(a.duration_ns), "args": {"bytes": a.bytes}})
    if session.regions:
        ev += [_meta("process_name", PID_HOST, "host (CPU)"), _meta("thread_name", PID_HOST, "regions (CPU span)", 1)]
        if any(r.gpu_start_ns is not None for r in session.regions):
            ev.append(_meta("thread_name", PID_GPU, "regions (GPU span)", TID_REGIONS))
    for r in session.regions:
        ev.append({"ph": "X", "cat": "region", "name": r.name, "pid": PID_HOST, "tid": 1, "ts": _us(r.cpu_start_ns),
                   "dur": _us(r.cpu_duration_ns), "args": {"span": "cpu"}})
        if r.gpu_start_ns is not None and r.gpu_duration_ns is not None:
            ev.append({"ph": "X", "cat": "region", "name": r.name, "pid": PID_GPU, "tid": TID_REGIONS,
                       "ts": _us(r.gpu_start_ns), "dur": _us(r.gpu_duration_ns), "args": {"span": "gpu"}})
    ev += host_sync_events(session)
    out.host = host_side(session, table)
    ev += _sample_events(session, notes)
    ev += memory_events(session, notes)  # run --memory's allocator counters and kernelscope.mark() instants
    # nested or disjoint, else a track; launch events were made plain text per shape above
    out.parts = [e if not isinstance(e, dict) or e.get("cat") == "kernel" else _plain_text(e)
                 for e in split_partial_overlaps(ev, notes)]
    return out


# The host side: the session keeps the operator behind each launch and host sync (model/operators.py) and the
# runtime calls that blocked the host (model/host_sync.py), but no CPU span of an operator or of a launch call:
# operators ride in the kernel and sync events' args, syncs are drawn on a host track, and the trace's
# otherData.host says what is not drawn and why, rather than placing an operator at a made-up time.

TID_HOST_SYNCS = 3  # host process: regions 1, marks 2
NO_FLOWS = ("none: the session keeps no CPU time of a launch (its runtime call or operator span), so no flow can "
            "start on the host timeline")


def _operator_args(op: Operator) -> dict[str, Any]:
    """An operator's facts as event args, text made plain; what the trace did not record is absent."""
    args: dict[str, Any] = {"operator": op.name}
    for key, v in (("outer_operator", op.outer), ("input_shapes", op.shapes_text), ("module", op.module),
                   ("python_line", op.python_line)):
        if v:
            args[key] = visible(v)
    return args


def host_sync_events(session: Session) -> list[dict[str, Any]]:
    """Each host sync as a span on the host's "host syncs (CPU)" track, with the operator and line behind it."""
    if not session.host_syncs:
        return []
    ops = session.operators
    out: list[dict[str, Any]] = [_meta("process_name", PID_HOST, "host (CPU)"),
                                 _meta("thread_name", PID_HOST, "host syncs (CPU)", TID_HOST_SYNCS)]
    for h in session.host_syncs:
        op = ops.of_sync(h.cpu_start_ns) if ops is not None else None
        out.append({"ph": "X", "cat": "host-sync", "name": h.name, "pid": PID_HOST, "tid": TID_HOST_SYNCS,
                    "ts": _us(h.cpu_start_ns), "dur": _us(h.cpu_duration_ns),
                    "args": {"kind": h.kind, **(_operator_args(op) if op is not None else {})}})
    return out


def host_side(session: Session, table: LaunchTable) -> dict[str, str]:
    """What the trace holds of the host side, and what not and why (the trace's otherData.host)."""
    ops = session.operators
    if ops is None:
        operators = "none in the session: its trace recorded no aten operators with the launches"
    else:
        linked = sum(1 for c, st in zip(table.correlation_id, table.start_ns) if st is not None and c in ops.launch_op)
        timed = len(table) - table.start_ns.count(None)
        operators = (f"{linked} of {timed} kernel events name their aten operator in args (operator, "
                     "outer_operator, input_shapes, module, python_line), as host syncs do; no operator span is drawn: "
                     "the session keeps each operator's configuration, not its CPU start and end")
        if ops.missing():
            operators += "; the trace did not record " + " and ".join(ops.missing())
    syncs = (f"{len(session.host_syncs)} host sync(s) drawn on 'host syncs (CPU)'" if session.host_syncs
             else "no host sync in the session")
    return {"operators": operators,
            "runtime_calls": syncs + "; other runtime calls (cudaLaunchKernel, cudaMemcpyAsync) are not kept in "
                                     "the session",
            "launch_flows": NO_FLOWS}


def _plain_text(e: dict) -> dict:
    """Names and string args from the session with control characters made visible: a trace viewer shows the
    text, never acts on it (JSON already escapes quotes; there is no markup in a trace)."""
    if isinstance(e.get("name"), str):
        e["name"] = visible(e["name"])
    args = e.get("args")
    if isinstance(args, dict):
        e["args"] = {k: visible(v) if isinstance(v, str) else v for k, v in args.items()}
    return e


def nothing_to_draw(path: str, session: Session) -> str:
    """Why a session gives a trace with no timed event (one sentence, for the export command's error)."""
    table = session.launch_table()
    if len(table) and all(x is None for x in table.start_ns):
        return (f"{path} has nothing to draw on a timeline: its {len(table)} launch(es) came from Nsight "
                "Compute, which serialises kernels, so they have no start times; run `kernelscope run` for a "
                "timeline")
    return (f"{path} has nothing to draw on a timeline: no launch, copy, region or sample in it has a time on the "
            "session clock")


def _sample_events(session: Session, notes: list[str]) -> list[dict[str, Any]]:
    if not session.samples:
        return []
    placed = [s for s in session.samples if s.t_ns is not None]
    if len(placed) < len(session.samples):
        notes.append(f"{len(session.samples) - len(placed)} GPU samples have no time on the session clock "
                     "(no trace gave it an origin) and were left out")
    out: list[dict[str, Any]] = [_meta("process_name", PID_SAMPLES, "GPU samples (NVML/GPM)")] if placed else []
    for s in placed:
        for key, m in sorted(s.metrics.items()):
            if isinstance(m.value, (int, float)) and not isinstance(m.value, bool):
                out.append({"ph": "C", "name": f"{key} [{m.unit}]" if m.unit else key, "pid": PID_SAMPLES,
                            "ts": _us(s.t_ns), "args": {"value": m.value}, "cat": f"gpu{s.device_index}"})
    return out


# ====================================================================================================================
# Chrome / Perfetto export of a multi-GPU session: each rank in its own process tracks
# ("rank 1 · GPU 1: NVIDIA H200", "rank 1 · host (CPU)", ...), and each wait at a collective
# as a slice on a "collective waits" track of the waiting rank, named the methodology's way.

PIDS_PER_RANK = (
    1000  # a rank's tracks: pid = (rank + 1) * 1000 + the single-GPU pid (1 GPU, 2 host, 3 samples, 100+ blocks)
)
TID_WAITS = 1_000_001


def rank_session(session: Session, rank: int) -> Session:
    """The session with only this rank's launches, copies and regions (samples go with the first rank)."""
    first = min(r.rank for r in session.ranks)
    info = next(r for r in session.ranks if r.rank == rank)
    device = session.device
    if device is not None and info.device_index is not None:  # the rank's own GPU, not the session's first
        device = dataclasses.replace(device, index=info.device_index, name=info.device_name or device.name)
    return dataclasses.replace(
        session, device=device, launches=[x for x in session.launches if x.rank == rank],
        activities=[a for a in session.activities if a.rank == rank],
        regions=[g for g in session.regions if g.rank == rank],
        samples=session.samples if rank == first else [], host_syncs=[], operators=None)


def ranks_chrome_events(session: Session, one_rank: Callable[[Session], Any], report: RanksReport | None,
                        gpu_pid: int) -> tuple[list[Any], list[str]]:
    """Every rank's events from the one-GPU builder ``one_rank``, moved to the rank's own pids (event dicts,
    and runs of kernel events kept as columns (KernelRows), whose process id moves)."""
    events: list[Any] = []
    notes: list[str] = []
    for info in sorted(session.ranks, key=lambda r: r.rank):
        base = (info.rank + 1) * PIDS_PER_RANK
        trace = one_rank(rank_session(session, info.rank))
        shifted: list[Any] = []
        notes += [f"rank {info.rank}: {n}" for n in trace.notes]
        for e in trace.parts:
            if isinstance(e, BlockRows):
                e.pid += base
                events.append(e)
                continue
            if not isinstance(e, dict):
                if all(e.cols is not c for c in shifted):  # the rank's runs share their columns: move once
                    e.cols.pid += base
                    shifted.append(e.cols)
                events.append(e)
                continue
            e = dict(e, pid=base + e["pid"])
            if e["ph"] == "M" and e["name"] == "process_name":
                e["args"] = {"name": f"rank {info.rank} · {e['args']['name']}"}
            elif e["ph"] == "M" and e["name"] == "process_sort_index":
                e["args"] = {"name": str(e["pid"])}
            events.append(e)
    if report is not None:
        waits = [(t, row) for row in report.collectives.rows for t in row.ranks if t.wait_ns > 0]
        for r in sorted({t.rank for t, _ in waits}):
            events.append({"ph": "M", "name": "thread_name", "pid": (r + 1) * PIDS_PER_RANK + gpu_pid, "tid": TID_WAITS,
                           "args": {"name": "collective waits"}})
        for t, row in waits:
            events.append({"ph": "X", "cat": "collective-wait", "pid": (t.rank + 1) * PIDS_PER_RANK + gpu_pid,
                           "tid": TID_WAITS, "ts": t.start_ns / 1000.0, "dur": t.wait_ns / 1000.0,
                           "name": f"barrier: {row.name} GPU{t.rank} waits for GPU{row.straggler_rank}",
                           "args": {"process_group": row.process_group, "index": row.index, "wait_ns": t.wait_ns,
                                    "straggler_rank": row.straggler_rank}})
    return events, notes
