"""Warp stall reasons from the counter pass, ranked, with what each one means."""
from __future__ import annotations

from dataclasses import dataclass

from kernelscope.model import Launch, Metric

# What each stall reason means and what usually helps (kernelscope's words).
STALL_MEANING: dict[str, str] = {
    "long_scoreboard": "waiting for an L1TEX result (global/local memory): more loads in flight, better reuse",
    "short_scoreboard": "waiting for shared memory or special math: fewer bank conflicts, fewer MUFU ops",
    "barrier": "waiting at a block barrier: balance work between warps, fewer __syncthreads",
    "membar": "waiting on a memory fence",
    "mio_throttle": "shared-memory / special-math queue full: wider shared accesses, fewer instructions",
    "lg_throttle": "global/local memory queue full: wider (16-byte) accesses, fewer instructions",
    "tex_throttle": "texture/L1TEX queue full",
    "math_pipe_throttle": "the math pipe it needs is busy (compute-bound on that pipe)",
    "wait": "fixed-latency dependency between instructions",
    "not_selected": "ready, but another warp issued (enough parallelism)",
    "selected": "issuing an instruction (not a stall)",
    "dispatch_stall": "the dispatcher could not issue",
    "drain": "after EXIT, waiting for memory writes to drain",
    "no_instruction": "instruction not fetched (instruction cache miss, branch)",
    "imc_miss": "immediate constant cache miss",
    "branch_resolving": "waiting for a branch to resolve",
    "sleeping": "threads asleep (nanosleep, yield)",
    "misc": "miscellaneous",
    "gmma": "waiting for wgmma (Hopper tensor-core) resources",
}


@dataclass(frozen=True)
class Stall:
    reason: str
    cycles_per_issue: Metric  # ncu: warps stalled for this reason per issued instruction
    share_pct: float  # of the sum over all reasons (derived)
    meaning: str


@dataclass(frozen=True)
class WarpStateView:
    stalls: tuple[Stall, ...]  # largest first, zero and missing ones left out
    missing: tuple[str, ...]  # reasons the report did not have
    total_cycles_per_issue: float | None
    share_formula: str = "stall cycles per issued instruction / sum over all reasons x 100"


def warp_state(x: Launch) -> WarpStateView:
    present: list[tuple[str, Metric]] = []
    missing: list[str] = []
    for reason in STALL_MEANING:
        m = x.metrics.get(f"stall_{reason}")
        if m is None or m.is_missing:
            missing.append(reason)
        else:
            present.append((reason, m))
    total = sum(float(m.value) for _, m in present)
    stalls = tuple(sorted(
        (Stall(r, m, 100.0 * float(m.value) / total if total else 0.0, STALL_MEANING[r])
         for r, m in present if float(m.value) > 0),
        key=lambda s: -float(s.cycles_per_issue.value)))
    return WarpStateView(stalls, tuple(missing), total if present else None)
