"""One recorded launch of the W4A16 kernel, phase by phase, with the numbers of that run.

:func:`build_walkthrough` takes a Session that holds the kernel's launches and
the plan it was launched with (shapes and tile sizes) and returns plain data:
the launch as CUPTI recorded it, the bytes and FLOPs of each phase computed
from the shapes, and the measured durations with the rates they imply. Every
derived figure names its formula; what was not measured says why.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass

from kernelscope.model import Launch, Metric, Session
from kernelscope.model.names import short_kernel_name
from kernelscope.kernels.marlin.panel_data import Walkthrough

from .phases import gemm_phases
from .plan import COMPILED_KEY, COPY_REGION, FLUSH_REGION, GEMM_REGION, KERNEL_NAME, PLAN_KEY, GemmPlan

# The plan and the session's names live in plan.py (phases.py needs them too); they stay importable from here.
__all__ = ["COMPILED_KEY", "COPY_REGION", "FLUSH_REGION", "GEMM_REGION", "KERNEL_NAME", "PLAN_KEY", "GemmPlan",
           "RecordedCalls", "build_walkthrough", "copy_bandwidth", "find_calls", "plan_of"]


@dataclass(frozen=True)
class RecordedCalls:
    """The kernel's launches in the timed region, and the kernels each call launched after it."""

    launches: tuple[Launch, ...]
    epilogues: tuple[tuple[Launch, ...], ...]  # per call: the split-k sum and cast kernels


def plan_of(session: Session) -> GemmPlan | None:
    d = session.environment.get(PLAN_KEY)
    return GemmPlan.from_dict(d) if isinstance(d, dict) else None


def find_calls(session: Session, plan: GemmPlan) -> RecordedCalls:
    """The launches of the plan's kernel (those in the timed region when there is one)."""
    ordered = sorted((x for x in session.launches if x.start_ns is not None), key=lambda x: x.start_ns or 0)
    mine = [x for x in ordered if short_kernel_name(x.kernel) == KERNEL_NAME]
    if not mine:
        raise ValueError(f"the session has no {KERNEL_NAME} launch; record one with kernelscope learn marlin on a GPU.")
    if any(GEMM_REGION in x.regions for x in mine):
        ordered = [x for x in ordered if GEMM_REGION in x.regions]
        mine = [x for x in ordered if short_kernel_name(x.kernel) == KERNEL_NAME]
    block = (plan.threads, 1, 1)
    match = [x for x in mine if x.grid == plan.grid and x.block == block]
    if not match:
        seen = ", ".join(sorted({f"grid {x.grid} block {x.block}" for x in mine}))
        raise ValueError(f"no {KERNEL_NAME} launch in the session has the grid {plan.grid} and block {block} of "
                         f"m={plan.m}, k={plan.k}, n={plan.n} with this tiling (it has {seen}).")
    epilogues = []
    for x in match:
        after = ordered[ordered.index(x) + 1:]
        tail = []
        for y in after:
            if short_kernel_name(y.kernel) == KERNEL_NAME:
                break
            tail.append(y)
        epilogues.append(tuple(tail) if plan.split_k > 1 and not plan.fused_split_sum else ())
    return RecordedCalls(tuple(match), tuple(epilogues))


def copy_bandwidth(session: Session) -> Metric:
    """Median device-to-device copy bandwidth over the session's memcpy records (CUPTI)."""
    raw = "Memcpy DtoD bytes / duration"
    copies = [a for a in session.activities if a.kind == "memcpy" and "DtoD" in a.name and a.bytes and a.duration_ns]
    if not copies:
        return Metric.missing(raw, "no device-to-device copy was recorded in this session (the W4A16 workload "
                              "records one in its copy_bandwidth region)", "derived", "byte/s")
    rates = [2 * a.bytes / (a.duration_ns * 1e-9) for a in copies]
    return Metric(statistics.median(rates), "byte/s", "derived", raw,
                  formula=f"median over {len(copies)} DtoD copies of {max(a.bytes for a in copies):,} B of "
                          "2 x bytes / duration (CUPTI memcpy records; each byte read once and written once)")


def build_walkthrough(session: Session, plan: GemmPlan) -> Walkthrough:
    """Phases of the recorded launch; raises ValueError (one sentence) if the session lacks it."""
    calls = find_calls(session, plan)
    device = session.device.name if session.device else "an unrecorded GPU"
    problem = (f"C[{plan.m}, {plan.n}] = A[{plan.m}, {plan.k}] @ W[{plan.k}, {plan.n}], fp16 activations, "
               f"int4 weights (groupsize {plan.groupsize}), fp32 accumulation")
    phases = gemm_phases(session, plan, calls.launches, calls.epilogues, copy_bandwidth(session),
                         session.environment.get(COMPILED_KEY))
    needs_gpu = (
        "the launch's grid, block, registers and shared memory (CUPTI, through the PyTorch profiler)",
        "the kernel and epilogue durations (CUPTI) and the device-to-device copy bandwidth (CUPTI memcpy records)",
        "the SM count and L2 size (CUDA driver) and the MMA instruction (the Triton compiler's PTX)",
    )
    return Walkthrough(kernel=KERNEL_NAME, device=device, recorded=session.created_utc, problem=problem,
                       phases=phases, needs_gpu=needs_gpu)
