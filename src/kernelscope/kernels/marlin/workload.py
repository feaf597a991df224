"""The demo workload: the Triton W4A16 GEMM on Marlin INT4 weights, profiled end to end.

`kernelscope demo` and `kernelscope learn marlin` call :func:`record_session` on a GPU: it
records only what the demo is about. Preparing the weights (quantize, pack, relayout: dozens of
elementwise and reduction kernels that take far longer than the GEMM), compiling the kernel and
allocating the buffers all happen before the profiler starts, so the session's kernel table opens
with the W4A16 GEMM and what runs with it. Recorded, in named regions:

* ``l2_flush`` / ``w4a16_gemm``: a buffer larger than L2 is overwritten before each
  timed call, so the weights come from DRAM as they would in a model's forward;
* ``copy_bandwidth``: device-to-device copies, the measured bandwidth ceiling.

The result is then checked against the fp32 reference on a slice of the columns.
:func:`main` (``python -m kernelscope.kernels.marlin.workload``, e.g. under `kernelscope run`) runs the
whole workload, preparation included, with ``prepare``, ``warmup`` and ``check`` as regions too.
"""
from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any

import torch

from kernelscope.collect.trace.regions import region
from kernelscope.kernels.marlin import (
    pack, quantize, reference_matmul, tma_supported, to_kernel_layout, w4a16_matmul,
)
from kernelscope.kernels.marlin.plan import (
    COMPILED_KEY, COPY_REGION, FLUSH_REGION, GEMM_REGION, PLAN_KEY, GemmPlan,
)
from kernelscope.model import Session

DEMO_PLAN = GemmPlan(m=16, k=8192, n=8192)  # a realistic layer: an 8192 x 8192 projection, 16 tokens
CALLS = 5
COPIES = 3
CHECK_COLUMNS = 256  # whole 64-column chunks of B, so B and s slice cleanly
TOLERANCE = 1e-2
L2_MULTIPLE = 4  # flush and copy buffers are this many times the L2, so they stream from DRAM


@dataclass
class Problem:
    a: torch.Tensor  # (m, k) fp16
    B: torch.Tensor  # Marlin int32 (k / 16, 2n)
    s: torch.Tensor  # Marlin scales
    bk: torch.Tensor  # kernel layout int32 (k / 8, n)
    sk: torch.Tensor  # plain scales
    out: torch.Tensor  # (m, n) fp16


def prepare(plan: GemmPlan, device: str = "cuda", seed: int = 0) -> Problem:
    """Random weights ~ N(0, 1/k), quantized and packed the way a Marlin checkpoint is."""
    gen = torch.Generator(device=device).manual_seed(seed)
    w = (torch.randn((plan.n, plan.k), generator=gen, device=device) / math.sqrt(plan.k)).half()
    q, scales = quantize(w, plan.groupsize)
    B, s = pack(q, scales, plan.groupsize)
    bk, sk = to_kernel_layout(B, s, plan.groupsize)
    a = torch.randn((plan.m, plan.k), generator=gen, device=device).half()
    out = torch.empty((plan.m, plan.n), dtype=torch.float16, device=device)
    return Problem(a, B, s, bk, sk, out)


def for_this_gpu(plan: GemmPlan) -> GemmPlan:
    """The plan as this GPU can run it: tiles copied by TMA only on sm_90 and later."""
    if plan.tma and not tma_supported("cuda"):
        return replace(plan, tma=0)
    return plan


def gemm(p: Problem, plan: GemmPlan) -> torch.Tensor:
    return w4a16_matmul(p.a, p.bk, p.sk, plan.groupsize, out=p.out, config=plan.launch_config())


def stream_bytes(device: str = "cuda") -> int:
    """A size that cannot stay in L2: L2_MULTIPLE times the L2 the driver reports."""
    l2 = getattr(torch.cuda.get_device_properties(device), "L2_cache_size", None)
    if not l2:
        from kernelscope.collect.driver import query_device

        l2 = query_device(torch.cuda.current_device()).value("l2_cache_bytes")
    return L2_MULTIPLE * int(l2)


def timed_calls(p: Problem, plan: GemmPlan, flush: torch.Tensor, calls: int = CALLS) -> None:
    for _ in range(calls):
        with region(FLUSH_REGION):
            flush.zero_()
        with region(GEMM_REGION):
            gemm(p, plan)


def copy_buffers(nbytes: int, device: str = "cuda") -> tuple[torch.Tensor, torch.Tensor]:
    """Source and destination of the copies, made (and filled) before anything is recorded."""
    src = torch.ones(nbytes, dtype=torch.uint8, device=device)
    return src, torch.empty_like(src)


def copies(src: torch.Tensor, dst: torch.Tensor, count: int = COPIES) -> None:
    """Contiguous same-dtype copies: torch issues cudaMemcpyAsync DtoD, which CUPTI records with its bytes."""
    with region(COPY_REGION):
        for _ in range(count):
            dst.copy_(src)
    torch.cuda.synchronize()


def relative_error(p: Problem, plan: GemmPlan) -> float:
    """|C - ref| / |ref| on the first CHECK_COLUMNS columns (the fp32 reference would dominate otherwise)."""
    cols = min(CHECK_COLUMNS, plan.n)
    ref = reference_matmul(p.a, p.B[:, : 2 * cols].contiguous(), p.s[:, :cols].contiguous(), plan.groupsize)
    return ((p.out[:, :cols].float() - ref).norm() / ref.norm()).item()


def compiled_info() -> dict[str, Any]:
    """What Triton compiled for the GEMM: MMA opcodes in its PTX and the shared memory it allocated."""
    try:
        from kernelscope.kernels.marlin.gemm import triton_kernel  # the jitted kernel, built on first call

        cache = triton_kernel().device_caches[torch.cuda.current_device()][0]
        compiled = list(cache.values())[-1]
        ops = Counter(re.findall(r"\b((?:wgmma\.mma_async|mma\.sync)[\w.]*)", compiled.asm["ptx"]))
        return {"mma_instructions": dict(ops), "shared_bytes": int(compiled.metadata.shared),
                "compiled_variants": len(cache), "source": "Triton compiled kernel: PTX text and metadata"}
    except Exception as e:  # a Triton internals change must not cost the session
        return {"error": f"{type(e).__name__}: {e}"}


def record_session(plan: GemmPlan, calls: int = CALLS, command: list[str] | None = None) -> Session:
    """Profile the timed calls and copies only; preparing the weights, compiling and allocating stay
    outside the recorded window. Then check the result."""
    from kernelscope.collect.trace.api import profile

    plan = for_this_gpu(plan)
    p = prepare(plan)
    gemm(p, plan)  # compiles
    flush = torch.empty(stream_bytes(), dtype=torch.uint8, device="cuda")
    src, dst = copy_buffers(stream_bytes())
    torch.cuda.synchronize()  # nothing of the preparation may still run when the profiler starts
    with profile(command=command) as session:
        timed_calls(p, plan, flush, calls)
        copies(src, dst)
    err = relative_error(p, plan)
    if not err < TOLERANCE:
        raise RuntimeError(f"the W4A16 GEMM is wrong: relative error {err:.2e} against the fp32 reference.")
    session.environment[PLAN_KEY] = plan.to_dict()
    session.environment[COMPILED_KEY] = compiled_info()
    session.environment["w4a16_relative_error"] = err
    return session


def main(plan: GemmPlan = DEMO_PLAN) -> None:
    plan = for_this_gpu(plan)
    torch.manual_seed(0)
    with region("prepare"):
        p = prepare(plan)
    flush = torch.empty(stream_bytes(), dtype=torch.uint8, device="cuda")
    with region("warmup"):
        gemm(p, plan)
        torch.cuda.synchronize()
    timed_calls(p, plan, flush)
    copies(*copy_buffers(stream_bytes()))
    with region("check"):
        err = relative_error(p, plan)
    print(f"demo: W4A16 GEMM (Triton, Marlin INT4 weights, groupsize {plan.groupsize}) m={plan.m} k={plan.k} "
          f"n={plan.n}, relative error vs fp32 reference {err:.2e} (first {CHECK_COLUMNS} columns)")
    if not err < TOLERANCE:
        raise SystemExit(f"demo: result is wrong (relative error {err:.2e})")


if __name__ == "__main__":
    main()
