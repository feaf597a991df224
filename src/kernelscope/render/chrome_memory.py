"""Chrome / Perfetto trace events of memory: the caching allocator's allocated and reserved bytes as counter
tracks (one value per allocator event, from the session's history: the same running sums analyze/memory.py
names) and kernelscope.mark() points as instant events with their values."""
from __future__ import annotations

from typing import Any

from kernelscope.model import Session

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
