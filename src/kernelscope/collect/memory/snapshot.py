"""torch.cuda.memory._snapshot() -> model.MemoryHistory: the device's allocator events in columns, stacks stored
once, times on the session clock. Reads plain dicts (as pickled or JSON-dumped), so recorded snapshots parse
without torch."""
from __future__ import annotations

from typing import Any

from kernelscope.model.memory import MEMORY_ACTIONS, MemoryHistory


class SnapshotFormatError(ValueError):
    """Not an allocator snapshot; one sentence."""


def _frame(f: Any) -> str:
    if not isinstance(f, dict):
        return "?"
    return f"{f.get('name', '?')} ({f.get('filename', '?')}:{f.get('line', '?')})"


def _interesting(frames: list[str]) -> list[str]:
    """Frames of the program, innermost first: torch's own Python frames (the allocator's callers inside torch)
    are dropped from the front, never from the middle."""
    i = 0
    while i < len(frames) - 1 and "/torch/" in frames[i]:
        i += 1
    return frames[i:]


def history_from_snapshot(snapshot: dict[str, Any], time_origin_ns: int, device_index: int,
                          max_entries: int | None = None) -> MemoryHistory:
    if not isinstance(snapshot, dict) or not isinstance(snapshot.get("segments"), list) \
            or not isinstance(snapshot.get("device_traces"), list):
        raise SnapshotFormatError("not a caching-allocator snapshot: no segments and device_traces lists")
    traces = snapshot["device_traces"]
    trace = traces[device_index] if device_index < len(traces) else []
    out = MemoryHistory(device_index=device_index, max_entries=max_entries)
    codes = {a: i for i, a in enumerate(MEMORY_ACTIONS)}
    stack_ids: dict[tuple[str, ...], int] = {}
    unknown: dict[str, int] = {}
    untimed = 0
    for e in trace:
        action = e.get("action")
        if action not in codes:
            unknown[str(action)] = unknown.get(str(action), 0) + 1
            continue
        t_us = e.get("time_us")
        if not isinstance(t_us, (int, float)):
            untimed += 1
            continue
        frames = tuple(_interesting([_frame(f) for f in e.get("frames") or []]))
        sid = -1
        if frames:
            sid = stack_ids.setdefault(frames, len(stack_ids))
        out.t_ns.append(int(t_us) * 1000 - time_origin_ns)
        out.action.append(codes[action])
        out.address.append(int(e.get("addr") or 0))
        out.size.append(int(e.get("size") or 0))
        out.stack.append(sid)
    out.stacks = [list(s) for s in stack_ids]
    segments = [g for g in snapshot["segments"] if g.get("device", device_index) == device_index]
    out.end_allocated_bytes = sum(int(g.get("allocated_size") or 0) for g in segments)
    out.end_reserved_bytes = sum(int(g.get("total_size") or 0) for g in segments)
    if unknown:
        out.problems.append("allocator events of unknown kinds left out: " +
                            ", ".join(f"{n} {a}" for a, n in sorted(unknown.items())))
    if untimed:
        out.problems.append(f"{untimed} allocator events without a time left out")
    if max_entries is not None and len(trace) >= max_entries:
        out.problems.append(f"the allocator's history held its limit of {max_entries:,} events, so the earliest "
                            "events of the window were dropped")
    return out
