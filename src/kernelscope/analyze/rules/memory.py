"""Memory rules: uncoalesced global access, shared-memory bank conflicts, register
spills, and memory-bound kernels far from the bandwidth ceiling."""
from __future__ import annotations

from typing import Any

from kernelscope.analyze import thresholds as th
from kernelscope.analyze.bound import MEMORY
from kernelscope.analyze.counters import SECTOR_BYTES, transactions
from kernelscope.analyze.rules.base import (NO_COUNTERS, RAW_BEFORE_MODEL_NAME, NotEvaluated, Outcome, RuleContext,
                                           finding, lacks, raw, rule, value)
from kernelscope.analyze.source_lines import rule_lines, with_lines
from kernelscope.analyze.warp_state import warp_state



def memory_time_share(ctx: RuleContext) -> tuple[float, list[tuple[str, Any]]] | None:
    """Share of the kernel's time the memory system is busy: its memory throughput % of peak / 100
    (cutting a share of the traffic cuts that share of the busy time, not of the rest)."""
    mem = value(ctx.launch, "memory_throughput_pct")
    if mem is None:
        return None
    return mem[0] / 100.0, [(mem[1], mem[0])]


def memory_traffic_bytes(x) -> tuple[float, list[tuple[str, Any]]] | None:
    """The memory traffic the SMs cause: the larger of L1/TEX bytes and L2 bytes less DRAM bytes.

    TMA copies bypass L1/TEX and show only in L2, so LSU sectors alone can be a sliver of what a
    kernel moves; and lts__t_bytes also counts the L2's own fills from and evictions to DRAM (on
    the H100 copy kernels L2 bytes = L1/TEX bytes + DRAM bytes read, within 3%), which are not more
    traffic of the kernel's accesses."""
    l1, l2, dram = value(x, "l1_bytes"), value(x, "l2_bytes"), value(x, "dram_bytes")
    got: list[tuple[float, list[tuple[str, Any]]]] = []
    if l1 is not None:
        got.append((l1[0], [(l1[1], l1[0])]))
    if l2 is not None:
        less = dram[0] if dram is not None else 0.0
        got.append((max(0.0, l2[0] - less), [(l2[1], l2[0])] + ([(dram[1], dram[0])] if dram else [])))
    if not got:
        return None
    top = max(got, key=lambda t: t[0])
    return top[0], [e for _, ev in got for e in ev]


@rule("uncoalesced-global", "Uncoalesced global memory access",
      "wasted bytes of the flagged global sectors / the kernel's memory traffic (max of L1/TEX bytes and L2 bytes "
      "less DRAM bytes) "
      "x memory throughput % of peak")
def uncoalesced(ctx: RuleContext) -> Outcome:
    x = ctx.launch
    if x is None:
        return NotEvaluated(uncoalesced.rule_id, NO_COUNTERS)
    rows = transactions(x).global_access
    total = sum(float(r.sectors.value) for r in rows if not r.sectors.is_missing)
    traffic = memory_traffic_bytes(x)
    flagged, unmeasured = [], []
    for r in rows:
        bps = r.bytes_used_per_sector
        if bps.is_missing:
            if not r.sectors.is_missing and float(r.sectors.value) > 0:
                unmeasured.append(f"global {r.kind}s: {bps.missing_reason}")
            continue
        sectors = float(r.sectors.value) if not r.sectors.is_missing else 0.0
        # share of the kernel's traffic, not only of its LSU sectors: a TMA GEMM's few LSU sectors do not count
        base = max(total * SECTOR_BYTES, traffic[0] if traffic else 0.0)
        share = sectors * SECTOR_BYTES / base if base else 0.0
        if float(bps.value) <= th.UNCOALESCED_MAX_BYTES_PER_SECTOR and share >= th.UNCOALESCED_MIN_SECTOR_SHARE:
            flagged.append((r, float(bps.value), sectors))
    if not flagged and all(r.bytes_used_per_sector.is_missing for r in rows):  # nothing to judge by
        return NotEvaluated(uncoalesced.rule_id, "; ".join(unmeasured) or lacks(x, "global_load_bytes_per_sector"))
    if not flagged:
        return NotEvaluated(uncoalesced.rule_id, "; ".join(unmeasured)) if unmeasured else None
    evidence: list[tuple[str, Any]] = []
    parts = []
    wasted = 0.0
    for r, bps, sectors in flagged:
        wasted += sectors * (SECTOR_BYTES - bps)
        evidence += [(r.bytes_used_per_sector.raw_name, bps), (r.sectors.raw_name, sectors)]
        if not r.sectors_per_request.is_missing:
            evidence.append((r.sectors_per_request.raw_name, float(r.sectors_per_request.value)))
        parts.append(f"{r.kind}s use {bps:g} of each {SECTOR_BYTES}-byte sector ({100 * bps / SECTOR_BYTES:.1f}%)")
    gain = None
    time_share = memory_time_share(ctx)
    if time_share is not None and total > 0:
        # without L1/TEX and L2 bytes in the report, the global sectors are all the traffic it shows
        evidence += (traffic[1] if traffic else []) + time_share[1]
        traffic_bytes = max(traffic[0] if traffic else 0.0, total * SECTOR_BYTES)
        evidence.append(("wasted sector bytes / memory traffic (derived)" if traffic else
                         "wasted sector bytes / global sector bytes (derived; no L1/TEX or L2 bytes)",
                         wasted / traffic_bytes))
        gain = wasted / traffic_bytes * time_share[0] * 100.0
    msg = (f"Global {'; '.join(parts)}: neighbouring threads read or write addresses far apart, so most of every "
           "sector moved is thrown away. Make consecutive threads touch consecutive addresses (change the layout, "
           "stage through shared memory, or loop so a warp covers contiguous bytes).")
    where, at = rule_lines(x.source_lines, uncoalesced.rule_id)  # run --source: the lines responsible
    return finding(uncoalesced, "Memory transactions", with_lines(msg, where), gain, list(evidence) + at)


# the raw counters behind local_sectors and local_spill_requests in kernelscope's own counter pass
LOCAL_COUNTERS = RAW_BEFORE_MODEL_NAME["local_sectors"]
LOCAL_COUNTER = LOCAL_COUNTERS[0]
SPILL_COUNTER = RAW_BEFORE_MODEL_NAME["local_spill_requests"][0]


@rule("local-memory", "Local-memory traffic (dynamically indexed arrays or spills)",
      "local bytes (the local-memory sector counters, else L1/TEX bytes no global load or store explains) / the "
      "kernel's memory traffic x memory throughput % of peak")
def local_memory(ctx: RuleContext) -> Outcome:
    x = ctx.launch
    if x is None:
        return NotEvaluated(local_memory.rule_id, NO_COUNTERS)
    traffic = memory_traffic_bytes(x)
    local = value(x, "local_sectors")
    evidence: list[tuple[str, Any]] = []
    if local is not None:
        local_bytes = local[0] * SECTOR_BYTES
        split = [(n, v) for n in LOCAL_COUNTERS if (v := raw(x, n)) is not None]  # loads and stores apart
        evidence += split if len(split) == len(LOCAL_COUNTERS) else [(local[1], local[0])]
        how = "local loads and stores move"
    else:
        # The targeted pass before these counters: L1/TEX bytes minus the global LSU sectors is what
        # local memory (or texture, atomics, cp.async) moved. cp.async fills shared memory, so a kernel
        # with shared-memory traffic is not judged this way.
        l1 = value(x, "l1_bytes")
        sectors = [value(x, f"global_{k}_sectors") for k in ("load", "store")]
        shared = value(x, "shared_bytes")
        if l1 is None or any(v is None for v in sectors) or shared is None:
            return NotEvaluated(local_memory.rule_id, lacks(x, "local_sectors"))
        if shared[0] > 0:
            return NotEvaluated(local_memory.rule_id, f"the report has no {LOCAL_COUNTER}, and L1/TEX bytes "
                                "beyond global sectors cannot be told from cp.async copies in a kernel that uses "
                                "shared memory")
        global_bytes = sum(v[0] for v in sectors if v) * SECTOR_BYTES
        local_bytes = max(0.0, l1[0] - global_bytes)
        evidence += [(l1[1], l1[0])] + [(v[1], v[0]) for v in sectors if v] + [(shared[1], shared[0])]
        how = (f"L1/TEX moves that no global load or store explains ({LOCAL_COUNTER} was not collected: "
               "local memory, or texture or global atomics)")
    if traffic is None or traffic[0] <= 0:
        return NotEvaluated(local_memory.rule_id, "the kernel's memory traffic: " + lacks(x, "l1_bytes", "l2_bytes"))
    share = local_bytes / max(traffic[0], local_bytes)
    if share < th.LOCAL_MIN_TRAFFIC_SHARE:
        return None
    evidence += [(k, v) for k, v in traffic[1] if k not in dict(evidence)]
    evidence.append(("local bytes / memory traffic (derived)", share))
    gain = None
    time_share = memory_time_share(ctx)
    if time_share is not None:
        evidence += time_share[1]
        gain = share * time_share[0] * 100.0
    stack = raw(x, "launch__stack_size")
    msg = (f"{local_bytes / 2**20:,.1f} MiB ({100 * share:.0f}% of the kernel's memory traffic) is what {how}. "
           "Local memory is per-thread memory in DRAM behind L1: a per-thread array indexed with a value the compiler "
           "cannot resolve at compile time, or registers spilled. Index arrays with compile-time constants (unrolled "
           "loops), keep them in shared memory, or give the kernel more registers.")
    if stack is not None:
        evidence.append(("launch__stack_size", stack))
    where, at = rule_lines(x.source_lines, local_memory.rule_id)  # run --source: the lines responsible
    return finding(local_memory, "Memory workload", with_lines(msg, where), gain, list(evidence) + at)


@rule("shared-bank-conflicts", "Shared-memory bank conflicts",
      "extra (conflict) share of shared wavefronts x share of stall cycles waiting on shared memory "
      "(short scoreboard + MIO throttle)")
def bank_conflicts(ctx: RuleContext) -> Outcome:
    x = ctx.launch
    if x is None:
        return NotEvaluated(bank_conflicts.rule_id, NO_COUNTERS)
    flagged, evidence, waves_all, conflicts_all = [], [], 0.0, 0.0
    for kind in ("load", "store"):
        c, w, i = (value(x, f"shared_{kind}_{k}") for k in ("bank_conflicts", "wavefronts", "instructions"))
        if c is None or w is None or i is None:
            continue
        waves_all += w[0]
        conflicts_all += c[0]
        if i[0] >= th.BANK_CONFLICT_MIN_INSTRUCTIONS and w[0] > 0 and c[0] / w[0] >= th.BANK_CONFLICT_MIN_SHARE:
            flagged.append((kind, c[0] / w[0], w[0] / i[0]))
            evidence += [(c[1], c[0]), (w[1], w[0]), (i[1], i[0])]
    if not flagged and not waves_all and value(x, "shared_load_wavefronts") is None:
        return NotEvaluated(bank_conflicts.rule_id, lacks(x, "shared_load_wavefronts"))
    if not flagged:
        return None
    parts = [f"{kind}s: {100 * share:.0f}% of wavefronts are conflict replays, {ways:.1f} wavefronts per "
             f"instruction (~{ways:.0f}-way for 32-bit accesses)" for kind, share, ways in flagged]
    view = warp_state(x)
    gain = None
    if view.total_cycles_per_issue:
        waiting = sum(float(s.cycles_per_issue.value) for s in view.stalls
                      if s.reason in ("short_scoreboard", "mio_throttle"))
        stall_share = waiting / view.total_cycles_per_issue
        gain = conflicts_all / waves_all * stall_share * 100.0
        evidence.append(("stall share short_scoreboard + mio_throttle (derived)", stall_share))
    msg = (f"Shared {'; '.join(parts)}. Threads of a warp hit the same bank at different addresses, and the "
           "accesses are replayed one after another. Pad the shared array (e.g. [32][33]) or swizzle the index.")
    where, at = rule_lines(x.source_lines, bank_conflicts.rule_id)  # run --source: the lines responsible
    return finding(bank_conflicts, "Memory transactions", with_lines(msg, where), gain, list(evidence) + at)


@rule("register-spills", "Register spills to local memory",
      "spill requests / (spill + global load and store requests) x memory throughput % of peak")
def spills(ctx: RuleContext) -> Outcome:
    x = ctx.launch
    if x is None:
        return NotEvaluated(spills.rule_id, NO_COUNTERS)
    got = value(x, "local_spill_requests")
    if got is None:
        return NotEvaluated(spills.rule_id, lacks(x, "local_spill_requests"))
    n = got[0]
    if n < th.SPILL_MIN_REQUESTS:
        return None
    evidence: list[tuple[str, Any]] = [(got[1], n)]
    regs = value(x, "registers_per_thread")
    if regs is not None:
        evidence.append((regs[1], regs[0]))
    reqs = [value(x, f"global_{k}_requests") for k in ("load", "store")]
    mem = value(x, "memory_throughput_pct")
    gain = None
    if mem is not None and all(r is not None for r in reqs):
        gain = n / (n + sum(r[0] for r in reqs if r)) * mem[0]
        evidence.append((mem[1], mem[0]))
    regs_text = f" at {regs[0]:.0f} registers per thread" if regs else ""
    msg = (f"{n:,.0f} local-memory spill requests{regs_text}: values that do not fit in registers go to local "
           "memory (through L1/L2). Give the kernel more registers (fewer threads per block, __launch_bounds__, "
           "Triton num_warps) or keep fewer values live (smaller tiles, less unrolling).")
    return finding(spills, "Memory workload", msg, gain, evidence)


@rule("far-from-bandwidth", "Memory-bound, far from the bandwidth ceiling",
      "100 - DRAM bandwidth achieved as % of the ceiling (measured copy bandwidth, else ncu's DRAM peak)")
def far_from_bandwidth(ctx: RuleContext) -> Outcome:
    x = ctx.launch
    if x is None:
        return NotEvaluated(far_from_bandwidth.rule_id, NO_COUNTERS)
    if ctx.bound.bound != MEMORY or ctx.bound.limiter != "DRAM":
        return None
    dram, nbytes, dur = value(x, "dram_throughput_pct"), value(x, "dram_bytes"), value(x, "duration_ns")
    bw = ctx.ceilings.memory_bandwidth
    evidence: list[tuple[str, Any]] = []
    if not bw.is_missing and nbytes is not None and dur is not None and dur[0] > 0:
        achieved = nbytes[0] / (dur[0] * 1e-9)
        pct, basis = 100.0 * achieved / float(bw.value), "of the measured copy bandwidth"
        evidence += [(nbytes[1], nbytes[0]), (dur[1], dur[0]),
                     ("measured copy bandwidth (calibration)", float(bw.value))]
    elif dram is not None:
        pct, basis = dram[0], "of ncu's DRAM peak (no measured ceiling: run kernelscope calibrate)"
        evidence.append((dram[1], dram[0]))
    else:
        return NotEvaluated(far_from_bandwidth.rule_id, "neither DRAM bytes and duration nor ncu's DRAM %: "
                            + lacks(x, "dram_bytes", "duration_ns", "dram_throughput_pct"))
    if pct >= th.FAR_FROM_BANDWIDTH_PCT:
        return None
    msg = (f"DRAM is the busiest level, yet it moves {pct:.1f}% {basis} (< {th.FAR_FROM_BANDWIDTH_PCT:.0f}%). "
           "Keep more bytes in flight: wider (16-byte) loads, several independent loads per thread, enough blocks "
           "per SM; and check coalescing, since wasted sectors count as traffic.")
    return finding(far_from_bandwidth, "Speed of light", msg, 100.0 - pct, evidence)
