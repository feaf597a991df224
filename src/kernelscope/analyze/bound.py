"""What bounds a kernel: memory, compute, latency, occupancy, or launches.

Order of the tests (thresholds in analyze.thresholds):
1. launch-bound (timeline): short kernel, and the GPU idled before its launches
   at least as long as it ran (gaps shorter than a host wait);
2. from the counter pass (ncu's speed-of-light %): compute-bound on the tensor
   pipe when it is the busiest unit at SOL_BOUND_PCT or more; else memory-bound or
   compute-bound when that unit is at SOL_BOUND_PCT or more, the larger wins;
3. below that everywhere: occupancy-limited when theoretical or achieved
   occupancy is under OCCUPANCY_LIMITED_PCT, latency-bound otherwise.
Without counters and without a launch-bound timeline the bound is unknown,
and the result says what is missing.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Sequence

from kernelscope.analyze import thresholds as th
from kernelscope.model import Launch

MEMORY, COMPUTE, LATENCY, OCCUPANCY, LAUNCH, UNKNOWN = (
    "memory-bound", "compute-bound", "latency-bound", "occupancy-limited", "launch-bound", "unknown")

# Memory levels whose % of peak names the memory unit that bounds a kernel (model metric, label).
MEMORY_LEVELS = (("dram_throughput_pct", "DRAM"), ("l2_throughput_pct", "L2"), ("l1_throughput_pct", "L1/TEX"),
                 ("shared_throughput_pct", "shared"))


@dataclass(frozen=True)
class Bound:
    bound: str
    basis: str  # "counters" | "timeline" | "" (unknown)
    reason: str  # one sentence with the numbers and the threshold
    evidence: tuple[tuple[str, Any], ...]  # (raw name or formula, value)
    limiter: str | None = None  # "DRAM", "L1/TEX", "SM", ...
    inside: "Bound | None" = None  # launch-bound kernels: what the counters say about the kernel itself


def _pct(x: Launch, key: str) -> tuple[float, str] | None:
    m = x.metrics.get(key)
    if m is None or m.is_missing or not isinstance(m.value, (int, float)):
        return None
    return float(m.value), m.raw_name


def busiest_memory_level(x: Launch) -> tuple[str, float, str] | None:
    """(label, % of peak, raw name) of the memory level closest to its peak."""
    levels = [(label, *v) for key, label in MEMORY_LEVELS if (v := _pct(x, key)) is not None]
    return max(levels, key=lambda t: t[1]) if levels else None


def launch_bound(durations_ns: Sequence[int], gaps_before_ns: Sequence[int]) -> Bound | None:
    """Launch-bound by the timeline, or None. ``gaps_before_ns``: idle gaps under a host wait."""
    if not durations_ns or not gaps_before_ns:
        return None
    med = float(statistics.median(durations_ns))
    gap = float(statistics.median(gaps_before_ns))
    if med < th.LAUNCH_BOUND_MAX_MEDIAN_NS and gap >= th.LAUNCH_BOUND_GAP_RATIO * med:
        return Bound(LAUNCH, "timeline",
                     f"median duration {med / 1e3:.1f} µs (< {th.LAUNCH_BOUND_MAX_MEDIAN_NS / 1e3:.0f} µs) and the GPU "
                     f"idled a median {gap / 1e3:.1f} µs before its launches (>= {th.LAUNCH_BOUND_GAP_RATIO:g}x its "
                     "duration): launching it costs more than running it",
                     (("median duration (trace pass)", med), ("median idle gap before launch", gap)), "CPU launches")
    return None


def from_counters(x: Launch) -> Bound:
    """Classify one counter-pass launch by ncu's speed-of-light percentages."""
    sm, mem = _pct(x, "sm_throughput_pct"), _pct(x, "memory_throughput_pct")
    if sm is None or mem is None:
        missing = [k for k, v in (("sm_throughput_pct", sm), ("memory_throughput_pct", mem)) if v is None]
        return Bound(UNKNOWN, "", f"the counter pass lacks {', '.join(missing)}", ())
    ev: list[tuple[str, Any]] = [(sm[1], sm[0]), (mem[1], mem[0])]
    cut = th.SOL_BOUND_PCT
    tensor = _pct(x, "tensor_pipe_pct")
    if tensor is not None and tensor[0] >= cut and tensor[0] >= mem[0] and tensor[0] > sm[0]:
        # ncu's SM throughput does not count the tensor pipe fully: a GEMM whose tensor pipe is the busiest unit is
        # compute-bound on it, whatever the L1 traffic of feeding it reads
        ev.append((tensor[1], tensor[0]))
        return Bound(COMPUTE, "counters", f"tensor pipe {tensor[0]:.1f}% of peak >= {cut:.0f}% and at or above "
                     f"memory {mem[0]:.1f}%", tuple(ev), "tensor pipe")
    if max(sm[0], mem[0]) >= cut:
        if mem[0] >= sm[0]:
            level = busiest_memory_level(x)
            where = f", busiest level {level[0]} at {level[1]:.1f}%" if level else ""
            if level:
                ev.append((level[2], level[1]))
            return Bound(MEMORY, "counters", f"memory throughput {mem[0]:.1f}% of peak >= {cut:.0f}% and above "
                         f"compute {sm[0]:.1f}%{where}", tuple(ev), level[0] if level else "memory")
        return Bound(COMPUTE, "counters", f"compute (SM) throughput {sm[0]:.1f}% of peak >= {cut:.0f}% and above "
                     f"memory {mem[0]:.1f}%", tuple(ev), "SM")
    occ = [v for v in (_pct(x, "ncu_theoretical_occupancy_pct"), _pct(x, "achieved_occupancy_pct")) if v is not None]
    low = [v for v in occ if v[0] < th.OCCUPANCY_LIMITED_PCT]
    ev.extend((raw, value) for value, raw in occ)
    both = f"compute {sm[0]:.1f}% and memory {mem[0]:.1f}% are both under {cut:.0f}% of peak"
    if low:
        value, raw = min(low)
        return Bound(OCCUPANCY, "counters", f"{both}, and occupancy is {value:.1f}% (< "
                     f"{th.OCCUPANCY_LIMITED_PCT:.0f}%, {raw}): too few warps to hide latency", tuple(ev))
    occ_text = f" with occupancy {min(occ)[0]:.1f}% or more" if occ else ""
    return Bound(LATENCY, "counters", f"{both}{occ_text}: warps wait (see the stall reasons)", tuple(ev))


def classify(counter_launch: Launch | None, durations_ns: Sequence[int], gaps_before_ns: Sequence[int]) -> Bound:
    """The bound of one kernel: its first counter-pass launch, trace durations and idle gaps."""
    by_timeline = launch_bound(durations_ns, gaps_before_ns)
    if by_timeline is not None:
        if counter_launch is not None:
            return Bound(**{**by_timeline.__dict__, "inside": from_counters(counter_launch)})
        return by_timeline
    if counter_launch is not None:
        return from_counters(counter_launch)
    return Bound(UNKNOWN, "", "no counter pass for this kernel (kernelscope run --counters) and its launches are "
                 "not launch-bound on the timeline", ())
