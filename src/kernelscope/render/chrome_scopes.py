"""Phase scopes of a launch as Chrome / Perfetto tracks: one track per warp (block, warp).

Proton's times inside a block are SM cycles, not session-clock ns, and cycles
are never converted with a made-up clock rate: each launch's scopes get their
own process, placed at the launch's start, with a block at its measured
%globaltimer offset and its scopes at one cycle per ns (Proton's own
convention). The process name and a note say so.
"""
from __future__ import annotations

from typing import Any

from kernelscope.model import Launch
from kernelscope.model.names import short_kernel_name

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
