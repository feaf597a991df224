"""Occupancy rules: what limits the warps per SM and what would lift it; tail effect."""
from __future__ import annotations

import math
from typing import Any

from kernelscope.analyze import thresholds as th
from kernelscope.analyze.occupancy import OccupancyInputError, OccupancyResult, theoretical_occupancy
from kernelscope.analyze.rules.base import (NO_COUNTERS, NotEvaluated, Outcome, RuleContext, finding, headroom_pct,
                                           is_matmul, raw, rule, value)

NCU_LIMITS = ("launch__occupancy_limit_registers", "launch__occupancy_limit_shared_mem",
              "launch__occupancy_limit_warps", "launch__occupancy_limit_blocks")


def occupancy_of(ctx: RuleContext) -> OccupancyResult | None:
    """The calculator's result for the kernel's main configuration (trace pass, else ncu's launch values)."""
    occ = ctx.kernel.configs[0].occupancy if ctx.kernel.configs else None
    if occ is not None or ctx.arch is None or ctx.launch is None:
        return occ
    x = ctx.launch
    regs = value(x, "registers_per_thread")
    smem = [value(x, k) for k in ("shared_memory_static_bytes", "shared_memory_dynamic_bytes")]
    if regs is None or any(s is None for s in smem):
        return None
    try:
        return theoretical_occupancy(ctx.arch, x.threads_per_block, int(regs[0]), int(sum(s[0] for s in smem if s)))
    except OccupancyInputError:
        return None


def _try(ctx: RuleContext, threads: int, regs: int, smem: int) -> OccupancyResult | None:
    try:
        return theoretical_occupancy(ctx.arch, threads, regs, smem)  # type: ignore[arg-type]
    except OccupancyInputError:
        return None


def lift(ctx: RuleContext, occ: OccupancyResult) -> tuple[list[str], OccupancyResult | None]:
    """What change of each binding limiter gives more blocks per SM, and the occupancy with all of them."""
    threads, regs, smem = occ.threads_per_block, occ.registers_per_thread, occ.shared_memory_per_block_bytes
    steps: list[str] = []
    for limiter in occ.limiters:
        if limiter == "registers":
            r = next((r for r in range(regs - 1, 0, -1) if (o := _try(ctx, threads, r, smem))
                      and o.blocks_limit["registers"] > occ.active_blocks_per_sm), None)
            if r is not None:
                steps.append(f"at most {r} registers per thread (now {regs})")
                regs = r
        elif limiter == "shared_memory":
            s = next((s for s in range(smem - 128, -1, -128) if (o := _try(ctx, threads, regs, s))
                      and o.blocks_limit["shared_memory"] > occ.active_blocks_per_sm), None)
            if s is not None:
                steps.append(f"at most {s:,} bytes of shared memory per block (now {smem:,})")
                smem = s
        else:  # warps or blocks: the block size
            best = max((o for t in range(32, 1025, 32) if (o := _try(ctx, t, regs, smem))),
                       key=lambda o: (o.active_warps_per_sm, -abs(o.threads_per_block - threads)), default=None)
            if best is not None and best.active_warps_per_sm > occ.active_warps_per_sm:
                steps.append(f"blocks of {best.threads_per_block} threads (now {threads})")
                threads = best.threads_per_block
    after = _try(ctx, threads, regs, smem) if steps else None
    return steps, after if after and after.active_warps_per_sm > occ.active_warps_per_sm else None


@rule("occupancy-limit", "Occupancy limited by the launch configuration",
      "min(100 - busiest unit % of peak, (1 - theoretical occupancy / occupancy after the change) x 100)", symptom=1)
def occupancy_limit(ctx: RuleContext) -> Outcome:
    occ = occupancy_of(ctx)
    if occ is None:
        why = ctx.kernel.configs[0].occupancy_missing_reason if ctx.kernel.configs else None
        return NotEvaluated(occupancy_limit.rule_id, why or "registers or shared memory per block were not recorded")
    if occ.theoretical_occupancy_pct > th.OCCUPANCY_FINDING_MAX_PCT:
        return None
    head = headroom_pct(ctx.launch, ctx.ceilings)
    if head is None:
        return NotEvaluated(occupancy_limit.rule_id, f"theoretical occupancy is {occ.theoretical_occupancy_pct:.1f}%, "
                            f"but whether more warps would help needs the counters: {NO_COUNTERS}")
    if head[0] <= 0.0:
        return None  # a unit is at its ceiling: more warps would not make it faster
    # short of that, the gain is capped by the headroom: a unit at 61% of peak with 8 warps per SM still
    # has room (the suite's occupancy_regs pair: 61% -> 87% of the L1 peak with 64 warps, 29% faster)
    matmul = is_matmul(ctx.launch)
    if matmul and 100.0 - head[0] >= th.SOL_BOUND_PCT:
        return None  # the design note below (no estimate) is for tensor-core kernels no unit bounds
    evidence: list[tuple[str, Any]] = [("theoretical occupancy % (kernelscope occupancy calculator)",
                                        occ.theoretical_occupancy_pct)]
    ncu = [(n, v) for n in NCU_LIMITS if (v := raw(ctx.launch, n)) is not None]
    evidence += ncu or [(f"blocks per SM allowed by {k} (kernelscope occupancy calculator)", v)
                        for k, v in occ.blocks_limit.items()]
    evidence += head[1]
    if matmul:
        # A tensor-core kernel is built around few resident blocks (warp-specialized or software-pipelined
        # tiles staged in shared memory, one or two CTAs per SM): it hides latency inside the block, and
        # more blocks would need smaller tiles. The calculator cannot say what that would gain.
        limiters = " and ".join(k.replace("_", " ") for k in occ.limiters)
        n = occ.active_blocks_per_sm
        msg = (f"{'One block' if n == 1 else f'{n} blocks'} of {occ.warps_per_block} warps per SM "
               f"({occ.theoretical_occupancy_pct:.1f}% occupancy, "
               f"limited by {limiters}) in a tensor-core kernel: this is the design of tiled, pipelined matmul and "
               "attention kernels (cuBLAS, cuDNN, flash attention), which hide latency inside the block with "
               "asynchronous copies and several tiles in flight. More blocks per SM would need smaller tiles; "
               "not estimated.")
        return finding(occupancy_limit, "Occupancy", msg, None, evidence, severity="info")
    steps, after = lift(ctx, occ)
    limiters = " and ".join(k.replace("_", " ") for k in occ.limiters)
    msg = (f"{occ.active_blocks_per_sm} blocks of {occ.warps_per_block} warps fit per SM ({occ.active_warps_per_sm} of "
           f"{occ.max_warps_per_sm} warps, {occ.theoretical_occupancy_pct:.1f}%), limited by {limiters}, with the "
           f"busiest unit at {100 - head[0]:.1f}% of its peak.")
    gain = None
    if after is not None:
        msg += (f" With {' and '.join(steps)}, {after.active_blocks_per_sm} blocks fit "
                f"({after.theoretical_occupancy_pct:.1f}%).")
        gain = min(head[0], (1 - occ.theoretical_occupancy_pct / after.theoretical_occupancy_pct) * 100.0)
    else:
        msg += " No single change of the block size, registers or shared memory lifts it."
    return finding(occupancy_limit, "Occupancy", msg, gain, evidence)


def _library_fix(ctx: RuleContext) -> str:
    """A library kernel's grid is the library's answer to the problem's shape: the fix is the call, not the grid."""
    lib = ctx.library
    return (f"A {lib.name} kernel: the library sized the grid for this problem; what you control is {lib.controls}."
            if lib else "")


@rule("tail-effect", "Tail effect: a partly empty last wave",
      "(ceil(waves) - waves) / ceil(waves) x 100, capped by 100 - busiest unit % of peak when counters exist")
def tail_effect(ctx: RuleContext) -> Outcome:
    ncu_waves = value(ctx.launch, "waves_per_sm")
    cfg = ctx.kernel.configs[0] if ctx.kernel.configs else None
    if ncu_waves is not None:
        waves, source = ncu_waves[0], ncu_waves[1]
    elif cfg is not None and cfg.waves_per_sm is not None:
        waves, source = cfg.waves_per_sm, "waves per SM (kernelscope: grid blocks / (blocks per SM x SMs))"
    else:
        why = cfg.occupancy_missing_reason if cfg is not None and cfg.occupancy_missing_reason else "no waves per SM"
        return NotEvaluated(tail_effect.rule_id, why)
    if waves < 1:
        return None  # a grid under one wave has no tail: that is small-grid's finding
    short = ctx.median_duration_ns
    if short is not None and short < th.SHORT_KERNEL_NS:
        return None  # a kernel of a few microseconds is bound by its launch, not by its last wave
    full = math.ceil(waves)
    idle = (full - waves) / full
    if idle < th.TAIL_MIN_IDLE_SHARE:
        return None
    blocks = ctx.launch.blocks if ctx.launch is not None else (cfg.config.blocks if cfg else None)
    evidence: list[tuple[str, Any]] = [(source, waves), ("grid blocks", blocks)]
    gain = idle * 100.0
    head = headroom_pct(ctx.launch, ctx.ceilings)
    if head is not None:
        gain = min(gain, head[0])
        evidence += head[1]
    what = f"the grid of {blocks:,} blocks makes {waves:.2f} waves; the last one is {100 * (waves % 1):.0f}% full"
    fix = ("Use a grid that fills whole waves (a multiple of SMs x blocks per SM), or split the work into more, "
           "smaller blocks." if ctx.library is None else _library_fix(ctx))
    msg = f"{what}, so {100 * idle:.0f}% of the block slots of the launch stay empty. {fix}"
    return finding(tail_effect, "Launch statistics", msg, gain, evidence)


@rule("small-grid", "Grid smaller than the GPU: SMs idle",
      "idle SMs / SMs x 100 (1 - grid blocks / SMs), capped by 100 - busiest unit % of peak")
def small_grid(ctx: RuleContext) -> Outcome:
    blocks = ctx.launch.blocks if ctx.launch is not None else (
        ctx.kernel.configs[0].config.blocks if ctx.kernel.configs else None)
    sms = ctx.sm_count
    if blocks is None or not sms:
        return NotEvaluated(small_grid.rule_id, "the grid size or the SM count was not recorded")
    idle = 1.0 - min(blocks, sms) / sms
    if idle < th.SMALL_GRID_MIN_IDLE_SM_SHARE:
        return None
    short = ctx.median_duration_ns
    if short is not None and short < th.SHORT_KERNEL_NS:
        return None  # a few microseconds: the launch, not the idle SMs, is what it costs
    evidence: list[tuple[str, Any]] = [("grid blocks", blocks), ("SMs (device)", sms)]
    gain = idle * 100.0
    head = headroom_pct(ctx.launch, ctx.ceilings)
    if head is not None:
        gain = min(gain, head[0])
        evidence += head[1]
    fix = ("Split the work into at least as many blocks as SMs (one row or tile per block, or split-K), or run "
           "independent work beside it on other streams." if ctx.library is None else _library_fix(ctx))
    msg = (f"The grid has {blocks:,} block{'s' if blocks != 1 else ''} for {sms} SMs, so {sms - min(blocks, sms)} SMs "
           f"({100 * idle:.0f}%) get no work at all. {fix}")
    return finding(small_grid, "Launch statistics", msg, gain, evidence)
