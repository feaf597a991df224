"""Compute rules: warps that run with idle lanes (thread divergence), and matmul-like math
on the FMA pipes that the tensor cores could do."""
from __future__ import annotations

from typing import Any

from kernelscope.analyze import thresholds as th
from kernelscope.analyze.bound import COMPUTE
from kernelscope.analyze.source_lines import rule_lines, with_lines
from kernelscope.analyze.rules.base import (MMA_KINDS, NO_COUNTERS, NotEvaluated, Outcome, RuleContext, finding,
                                           is_matmul, lacks, mma_per_warp, raw, rule, value)
from kernelscope.model import Launch

THREADS_PER_INST = "smsp__thread_inst_executed_per_inst_executed.ratio"
THREADS_PER_INST_PRED_ON = "smsp__thread_inst_executed_pred_on_per_inst_executed.ratio"
WARP_SIZE = 32


def ncu_evidence(x: Launch, metric: str) -> float | None:
    """A metric value NVIDIA's rules attached to their findings (the counter pass may not collect it itself)."""
    for f in x.findings:
        for name, v in f.evidence:
            if name == metric and isinstance(v, (int, float)) and not isinstance(v, bool):
                return float(v)
    return None


@rule("thread-divergence", "Thread divergence: warps run with idle lanes",
      "(1 - active threads per executed instruction / 32) x issue slots busy %: the issue time a converged "
      "warp would not spend")
def thread_divergence(ctx: RuleContext) -> Outcome:
    x = ctx.launch
    if x is None:
        return NotEvaluated(thread_divergence.rule_id, NO_COUNTERS)
    got = value(x, "threads_per_instruction")
    active, source = got if got is not None else (ncu_evidence(x, THREADS_PER_INST), None)
    if source is None:
        source = f"{THREADS_PER_INST} (from ncu's ThreadDivergence rule)"
    if active is None:
        return NotEvaluated(thread_divergence.rule_id, lacks(x, "threads_per_instruction"))
    if active > th.DIVERGENCE_MAX_ACTIVE_THREADS:
        return None
    evidence: list[tuple[str, Any]] = [(source, active)]
    pred = value(x, "threads_per_instruction_pred_on")
    if pred is None and (v := ncu_evidence(x, THREADS_PER_INST_PRED_ON)) is not None:
        pred = (v, THREADS_PER_INST_PRED_ON)
    if pred is not None:
        evidence.append((pred[1], pred[0]))
    busy = value(x, "issue_slots_busy_pct")
    gain = None
    if busy is not None:
        evidence.append((busy[1], busy[0]))
        gain = (1.0 - active / WARP_SIZE) * busy[0]
    msg = (f"On average {active:.1f} of a warp's {WARP_SIZE} threads are active per executed instruction: lanes of "
           "one warp take different branches (or finish early), and the warp runs each path with the others masked "
           "off. Make the branch uniform per warp (map the cases to different warps or blocks, sort the work), or "
           "turn short branches into selects.")
    where, at = rule_lines(x.source_lines, thread_divergence.rule_id)  # run --source: the lines responsible
    return finding(thread_divergence, "Warp state", with_lines(msg, where), gain, evidence + at)


def ncu_peak_ratio(x: Launch) -> tuple[float, list[tuple[str, Any]]] | None:
    """FP32 FMA FLOPs per cycle / TF32 tensor FLOPs per cycle at ncu's peak rates (roofline sections; ncu counts
    2 tensor ops per multiply-add, so ops are FLOPs), the slowest tensor path: None when the report lacks them."""
    ffma, tf32 = value(x, "fp32_fma_peak_inst_per_cycle"), value(x, "tensor_tf32_peak_ops_per_cycle")
    if ffma is None or tf32 is None or tf32[0] <= 0:
        return None
    return 2.0 * ffma[0] / tf32[0], [(ffma[1], ffma[0]), (tf32[1], tf32[0])]


def tensor_gain(ctx: RuleContext, x: Launch) -> tuple[float | None, list[tuple[str, Any]]]:
    """(1 - FMA rate / tensor rate) x 100 and its evidence: the measured rates (calibration; the slower matmul
    rate, as the operands' type is not in the counters), else the report's own peaks; None without either."""
    fma_roof = ctx.ceilings.compute_roof(tensor=False)
    tc = [(label, float(m.value)) for label, m in ctx.ceilings.compute if "matmul" in label]
    tc_roof = min(tc, key=lambda t: t[1]) if tc else None
    if fma_roof is not None and tc_roof is not None and tc_roof[1] > 0:
        return (1.0 - fma_roof[1] / tc_roof[1]) * 100.0, [
            (f"measured {fma_roof[0]} rate, FLOP/s (calibration)", fma_roof[1]),
            (f"measured {tc_roof[0]} rate, FLOP/s (calibration)", tc_roof[1])]
    peaks = ncu_peak_ratio(x)  # no calibration (an imported report, another machine): ncu's own peaks
    return (None, []) if peaks is None else ((1.0 - peaks[0]) * 100.0, peaks[1])


@rule(
    "fma-instead-of-tensor",
    "Matmul math on the FMA pipes instead of the tensor cores",
    "(1 - measured fp32 FMA rate / slower measured matmul (tensor-core) rate) x 100, the time the math would lose "
    "on the tensor pipe, for a compute-bound kernel (the kernel's time is its math); without a calibration, the "
    "report's own peaks: (1 - 2 x peak FP32 FMA thread instructions per cycle / peak TF32 tensor ops per cycle) x 100",
)
def fma_instead_of_tensor(ctx: RuleContext) -> Outcome:
    x = ctx.launch
    if x is None:
        return NotEvaluated(fma_instead_of_tensor.rule_id, NO_COUNTERS)
    mm = is_matmul(x)
    tensor = value(x, "tensor_pipe_pct")
    if mm is None or tensor is None:
        return NotEvaluated(fma_instead_of_tensor.rule_id, lacks(x, *(() if mm is not None else MMA_KINDS[:1]),
                                                                 "tensor_pipe_pct"))
    if mm or tensor[0] >= th.FMA_MATMUL_MAX_TENSOR_PIPE_PCT:
        return None
    fma_pipe, inst = value(x, "fma_pipe_instructions"), value(x, "instructions_executed")
    fma = fma_pipe[0] if fma_pipe is not None else None
    fma_share = fma / inst[0] if fma is not None and inst is not None and inst[0] > 0 else None
    # a SIMT matmul is compute-bound when it tiles its operands, and memory- or latency-bound on cache traffic when
    # it reads them from global memory: there its FMA share of the instructions tells it from other cache-bound code
    dram = value(x, "dram_bytes")
    per_byte = fma * 32 / dram[0] if fma is not None and dram is not None and dram[0] > 0 else None
    if ctx.bound.bound != COMPUTE and (fma_share is None or fma_share < th.FMA_MATMUL_MIN_FMA_SHARE or
                                       per_byte is None or per_byte < th.FMA_MATMUL_MIN_FMA_PER_DRAM_BYTE):
        return None
    loads, dram_read = value(x, "global_load_sectors"), value(x, "dram_bytes_read")
    if loads is None or dram_read is None or dram_read[0] <= 0:
        return NotEvaluated(fma_instead_of_tensor.rule_id, "operand reuse: " + lacks(x, "global_load_sectors",
                                                                                      "dram_bytes_read"))
    reuse = loads[0] * 32 / dram_read[0]
    if reuse < th.FMA_MATMUL_MIN_OPERAND_REUSE:
        return None
    per = mma_per_warp(x)
    evidence: list[tuple[str, Any]] = [(tensor[1], tensor[0])] + (per[1] if per else [])
    evidence += [(loads[1], loads[0]), (dram_read[1], dram_read[0]),
                 ("operand reuse: global load bytes / DRAM bytes read (derived)", reuse)]
    sm = value(x, "sm_throughput_pct")
    if sm is not None:
        evidence.append((sm[1], sm[0]))
    if fma_share is not None:
        evidence.append(("FMA-pipe share of executed instructions (derived)", fma_share))
    if per_byte is not None:
        evidence.append(("FMA-pipe thread instructions per DRAM byte (derived)", per_byte))
    if fma_pipe is not None:
        evidence.append((fma_pipe[1], fma_pipe[0]))
    if (n := raw(x, "sm__inst_executed_pipe_fma_type_fp16.sum")) is not None:  # the targeted pass on sm_90
        evidence.append(("sm__inst_executed_pipe_fma_type_fp16.sum", n))
    gain, basis = tensor_gain(ctx, x)
    evidence += basis
    state = "Compute-bound" if ctx.bound.bound == COMPUTE else f"{ctx.bound.bound.capitalize()}, FMA-heavy,"
    fix = ("With fp16/bf16 (or tf32) operands, use tensor cores: tl.dot in Triton, mma/wgmma (CUTLASS) in CUDA, or "
           "cuBLAS through torch.matmul." if ctx.library is None else
           f"A {ctx.library.name} kernel computing in FP32: the library runs it on the tensor cores when you allow it; "
           f"what you control is {ctx.library.controls}.")
    msg = (f"{state} with no MMA instruction (tensor pipe {tensor[0]:.1f}% busy) while each operand byte is "
           f"read {reuse:.0f} times from cache per byte from DRAM: a matmul-like loop done with FMAs on the CUDA "
           f"cores. {fix}")
    where, at = rule_lines(ctx.launch.source_lines if ctx.launch else None, fma_instead_of_tensor.rule_id)
    return finding(fma_instead_of_tensor, "Tensor cores", with_lines(msg, where), gain, list(evidence) + at)
