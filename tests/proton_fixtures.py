"""SYNTHETIC Proton traces, written the way Triton 3.6's Proton writes them
(third_party/proton/common/lib/TraceDataIO/TraceWriter.cpp, StreamChromeTraceWriter::writeKernel),
so the parser can be tested before a trace recorded on a GPU exists. Not measured data.

Per event: pid "<kernel> Core<sm> CTA<block>", tid "warp <w> (line <n>)", name = scope,
cat = kernel, ph "X", ts = float32(cycle - block's min cycle + block init ns - min init ns) / 1000,
dur = float32(cycles) / 1000, args {Finalization Time (ns), Frequency (MHz): 1000, call_stack};
keys sorted (nlohmann::json objects are std::map), one object on one line.
"""
from __future__ import annotations

import json
import struct

COLORS = ("cq_build_passed", "cq_build_failed", "thread_state_iowait", "thread_state_running")


def f32(x: float) -> float:
    return struct.unpack("f", struct.pack("f", x))[0]


# block -> (sm, init_time_ns, {warp: [(scope, start_cycle, end_cycle), ...]})
Blocks = dict[int, tuple[int, int, dict[int, list[tuple[str, int, int]]]]]


def _lines(events: list[tuple[str, int, int]]) -> list[int]:
    """Proton's assignLineIds: the first line where an event overlaps nothing already placed."""
    order = sorted(range(len(events)), key=lambda i: events[i][1])
    lines: list[list[tuple[int, int]]] = []
    out = [0] * len(events)
    for i in order:
        s, e = events[i][1], events[i][2]
        for n, placed in enumerate(lines):
            if all(not (s < pe and e > ps) for ps, pe in placed):
                placed.append((s, e))
                out[i] = n
                break
        else:
            lines.append([(s, e)])
            out[i] = len(lines) - 1
    return out


def proton_trace_text(kernel: str, blocks: Blocks) -> str:
    min_init = min(init for _, init, _ in blocks.values())
    colors: dict[str, str] = {}
    events = []
    by_sm: dict[int, list[int]] = {}
    for b, (sm, _, _) in blocks.items():
        by_sm.setdefault(sm, []).append(b)
    for sm in sorted(by_sm):
        for b in by_sm[sm]:
            _, init, warps = blocks[b]
            min_cycle = min(s for evs in warps.values() for _, s, _ in evs)
            for w, evs in warps.items():
                for (name, s, e), line in zip(evs, _lines(evs)):
                    colors.setdefault(name, COLORS[len(colors) % len(COLORS)])
                    ts = (s - min_cycle) + (init - min_init)
                    events.append({
                        "args": {"Finalization Time (ns)": 1520, "Frequency (MHz)": 1000.0,
                                 "call_stack": ["ROOT", kernel]},
                        "cat": kernel, "cname": colors[name], "dur": f32(f32(float(e - s)) / f32(1000.0)),
                        "name": name, "ph": "X", "pid": f"{kernel} Core{sm} CTA{b}",
                        "tid": f"warp {w} (line {line})", "ts": f32(f32(float(ts)) / f32(1000.0))})
    doc = {"displayTimeUnit": "ns", "traceEvents": events}
    return json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n"


def two_block_pipeline() -> Blocks:
    """Two blocks, two warps each: warp 0 loads while warp 1 computes (a producer/consumer split)."""
    def warps(shift: int) -> dict[int, list[tuple[str, int, int]]]:
        w0 = [("setup", 100 + shift, 300 + shift), ("load", 300 + shift, 1300 + shift),
              ("load", 1500 + shift, 2500 + shift), ("store", 3600 + shift, 3900 + shift)]
        w1 = [("setup", 120 + shift, 320 + shift), ("compute", 1300 + shift, 2300 + shift),
              ("compute", 2500 + shift, 3500 + shift), ("store", 3600 + shift, 4000 + shift)]
        return {0: w0, 1: w1}
    return {0: (3, 5_000_000, warps(0)), 1: (7, 5_000_800, warps(40))}
