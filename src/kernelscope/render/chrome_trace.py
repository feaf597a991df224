"""A session as a Chrome / Perfetto trace (Trace Event Format JSON): plain dicts, no Rich.

Tracks: one per stream with the kernel launches and memcpy/memset (the trace
pass's start and duration); the regions' GPU spans beside them and their CPU
spans in a host process; GPU samples as counter tracks; and, for every launch
with block records, one track per resident-block slot of each SM ("SM 12 ·
slot 0") with its blocks; for every launch with
phase scopes, one track per warp (render/chrome_scopes.py). ``ts``/``dur`` are
microseconds on the session clock (ns since ``time_origin_ns``, kept in
``otherData``). Anything that has no time on that clock is left out with a
note, never placed at a made-up time.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Union

from kernelscope.model import Launch, Session
from kernelscope.model.launch_table import LaunchShape
from kernelscope.render.chrome_memory import memory_events
from kernelscope.render.chrome_kernel_rows import KernelColumns, KernelRows
from kernelscope.render.chrome_scopes import scope_events
from kernelscope.render.chrome_tracks import assign_lanes, split_partial_overlaps
from kernelscope.render.text import visible
from kernelscope.model.blocks import block_xyz
from kernelscope.model.names import short_kernel_name

PID_GPU, PID_HOST, PID_SAMPLES, PID_BLOCKS = 1, 2, 3, 100  # block tracks: PID_BLOCKS + launch index
TID_REGIONS = 1_000_000  # beside the stream tracks, clear of any stream id
TID_UNKNOWN_STREAM = 999_999
SLOTS_PER_SM_TID = 1000  # block tracks: tid = SM * 1000 + slot (an SM holds at most 32 blocks at once)


Part = Union[dict[str, Any], KernelRows]  # one event, or a run of kernel launch events kept as columns
DICTS_PER_CHUNK = 5000


@dataclass
class ChromeTrace:
    parts: list[Part] = field(default_factory=list)  # the events in order; launch events mostly as KernelRows
    notes: list[str] = field(default_factory=list)  # what was left out, and why
    time_origin_ns: int = 0

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
        return sum(p.count() if isinstance(p, KernelRows) else p["ph"] != "M" for p in self.parts)

    def _other(self) -> dict[str, Any]:
        return {"displayTimeUnit": "ns",
                "otherData": {"generator": "kernelscope", "time_origin_ns": self.time_origin_ns,
                              "clock": "ts in us since time_origin_ns (session clock)", "notes": list(self.notes)}}

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
            if isinstance(p, KernelRows):
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


def _launch_event(i: int, x: Launch) -> dict[str, Any]:
    args: dict[str, Any] = {"kernel": x.kernel, "launch_index": i, "grid": list(x.grid), "block": list(x.block),
                            "correlation_id": x.correlation_id, "regions": list(x.regions)}
    for key in ("registers_per_thread", "shared_memory_per_block_bytes"):
        v = x.value(key)
        if v is not None:
            args[key] = v
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


def _block_events(i: int, x: Launch, notes: list[str]) -> list[dict[str, Any]]:
    rec = x.block_records
    assert rec is not None
    rows = [r for r in zip(rec.block_id, rec.smid, rec.start_ns, rec.end_ns) if 0 < r[2] <= r[3]]
    if len(rows) < len(rec):
        notes.append(f"{len(rec) - len(rows)} block record(s) of launch {i} have a zero time or end before they "
                     "start and were left out")
    if not rows:
        return []
    if rec.clock_offset_ns is not None:
        shift, how = rec.clock_offset_ns, "session clock (measured offset)"
    elif x.start_ns is not None:
        shift, how = x.start_ns - min(r[2] for r in rows), "aligned to the launch's start"
        notes.append(f"block times of launch {i} ({short_kernel_name(x.kernel)}) are aligned to the launch's "
                     "start: the offset from %globaltimer to the session clock was not measured")
    else:
        notes.append(f"block records of launch {i} were left out: neither the launch nor a clock offset places "
                     "them on the session clock")
        return []
    pid = PID_BLOCKS + i
    out = [_meta("process_name", pid, f"blocks by SM · {short_kernel_name(x.kernel)} (launch {i})"),
           _meta("process_sort_index", pid, str(pid))]
    # Blocks resident on one SM at once run side by side, not nested: each goes to the first slot track of
    # its SM that is free at its start, so an SM has as many tracks as it held blocks at once.
    by_sm: dict[int, list[int]] = {}
    for k, r in enumerate(rows):
        by_sm.setdefault(r[1], []).append(k)
    slot = [0] * len(rows)
    for sm, ks in by_sm.items():
        for k, lane in zip(ks, assign_lanes([(rows[k][2], rows[k][3]) for k in ks], nest=False)):
            slot[k] = lane
    for sm in sorted(by_sm):
        for lane in range(max(slot[k] for k in by_sm[sm]) + 1):
            out.append(_meta("thread_name", pid, f"SM {sm} · slot {lane}", sm * SLOTS_PER_SM_TID + lane))
    for (b, sm, s, e), lane in zip(rows, slot):
        out.append({"ph": "X", "cat": "block", "name": f"block {b}", "pid": pid, "tid": sm * SLOTS_PER_SM_TID + lane,
                    "ts": _us(s + shift), "dur": _us(e - s),
                    "args": {"block_id": b, "block_xyz": list(block_xyz(b, rec.grid)), "smid": sm, "slot": lane,
                             "start_ns_raw": s, "end_ns_raw": e, "clock": how}})
    return out


def session_to_chrome_trace(session: Session, ranks_report=None) -> ChromeTrace:
    """The trace; a multi-GPU session puts each rank in its own process tracks (render/chrome_ranks.py), with
    the waits at collectives of ``ranks_report`` (analyze/ranks.RanksReport) on a track of each waiting rank."""
    if len(session.ranks) > 1:
        from kernelscope.render.chrome_ranks import ranks_chrome_events

        out = ChromeTrace(time_origin_ns=session.time_origin_ns)
        out.parts, out.notes = ranks_chrome_events(session, _one_process_trace, ranks_report, PID_GPU)
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
    cols = KernelColumns(table, [_shape_event(sh) for sh in table.shapes], PID_GPU)
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
            ev.append(_plain_text(_launch_event(i, x)))
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
    ev += _sample_events(session, notes)
    ev += memory_events(session, notes)  # run --memory's allocator counters and kernelscope.mark() instants
    # nested or disjoint, else a track; launch events were made plain text per shape above
    out.parts = [e if not isinstance(e, dict) or e.get("cat") == "kernel" else _plain_text(e)
                 for e in split_partial_overlaps(ev, notes)]
    return out


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
