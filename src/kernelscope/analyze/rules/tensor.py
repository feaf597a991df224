"""Tensor-core rule: a matmul kernel whose tensor pipe is mostly idle."""
from __future__ import annotations

from typing import Any

from kernelscope.analyze import thresholds as th
from kernelscope.analyze.rules.base import (MMA_KINDS, NO_COUNTERS, NotEvaluated, Outcome, RuleContext, finding,
                                           headroom_pct, is_matmul, lacks, rule, value)


@rule("low-tensor-pipe", "Matmul kernel with low tensor-pipe use",
      "100 - busiest of SM, memory and tensor pipe % of peak (room before any unit saturates)")
def low_tensor_pipe(ctx: RuleContext) -> Outcome:
    x = ctx.launch
    if x is None:
        return NotEvaluated(low_tensor_pipe.rule_id, NO_COUNTERS)
    counts = [v for k in MMA_KINDS if (v := value(x, k)) is not None]
    inst, tensor = value(x, "instructions_executed"), value(x, "tensor_pipe_pct")
    if not counts or inst is None or tensor is None or inst[0] <= 0:
        return NotEvaluated(low_tensor_pipe.rule_id, lacks(x, *(() if counts else MMA_KINDS[:1]),
                                                           "instructions_executed", "tensor_pipe_pct")
                            or "the kernel executed no instructions")
    mma = max(counts)
    share = mma[0] / inst[0]
    if share < th.MATMUL_MIN_MMA_SHARE or not is_matmul(x) or tensor[0] >= th.LOW_TENSOR_PIPE_PCT:
        return None
    evidence: list[tuple[str, Any]] = [(tensor[1], tensor[0]), (mma[1], mma[0]), (inst[1], inst[0])]
    head = headroom_pct(x, ctx.ceilings)
    gain = None
    if head is not None:
        gain = min(head[0], 100.0 - tensor[0])
        evidence += head[1]
    msg = (f"{100 * share:.1f}% of executed instructions are MMAs, yet the tensor pipe is busy {tensor[0]:.1f}% of the "
           f"time (< {th.LOW_TENSOR_PIPE_PCT:.0f}%): operands do not arrive fast enough. Stage tiles in shared memory "
           "with asynchronous copies (cp.async / TMA), reuse each tile for more MMAs (larger tiles), and pipeline "
           "loads with math.")
    return finding(low_tensor_pipe, "Tensor cores", msg, gain, evidence)
