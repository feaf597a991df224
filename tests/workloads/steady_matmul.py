"""About 3 s of steady GPU work with an idle gap, for the live sampler:

  kernelscope run --sample-interval 50 -o s.json -- python tests/workloads/steady_matmul.py

Phases (each a named region): bf16 8192² matmuls (tensor cores busy), an idle
gap (clocks and power drop), a memory-bound add over 1 GiB tensors (DRAM busy).
The iteration counts are fixed, so the work is the same on every run; the
script prints its own GPU-timed phase durations (CUDA events) as one JSON line
starting with STEADY, which is how the sampler's cost is compared with
sampling on and off. With KS_CLOCK_CHECK=FILE it also writes time.time_ns()
taken just before a region starts, to check the trace's clock against it.
"""
from __future__ import annotations

import json
import os
import time

import torch
from torch.profiler import record_function

GEMM_ITERS = int(os.environ.get("STEADY_GEMM_ITERS", "700"))
COPY_ITERS = int(os.environ.get("STEADY_COPY_ITERS", "500"))
IDLE_S = 0.4


def _timed(name: str, fn, iters: int) -> float:
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with record_function(name):
        start.record()
        for _ in range(iters):
            fn()
        end.record()
    end.synchronize()
    return start.elapsed_time(end)


def main() -> None:
    dev = torch.device("cuda")
    torch.manual_seed(0)
    a = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device=dev, dtype=torch.bfloat16)
    c = torch.empty_like(a)
    x = torch.randn(256 * 2**20, device=dev)  # 1 GiB of fp32
    y = torch.randn_like(x)
    z = torch.empty_like(x)
    for _ in range(3):  # cuBLAS heuristics, allocator
        torch.matmul(a, b, out=c)
        torch.add(x, y, out=z)
    torch.cuda.synchronize()

    check = os.environ.get("KS_CLOCK_CHECK")
    before = time.time_ns()
    with record_function("clock_check"):
        inside = time.time_ns()
    if check:
        with open(check, "w") as f:
            json.dump({"before_region_ns": before, "inside_region_ns": inside}, f)

    wall0 = time.perf_counter()
    gemm_ms = _timed("gemm_bf16_8192", lambda: torch.matmul(a, b, out=c), GEMM_ITERS)
    with record_function("idle"):
        time.sleep(IDLE_S)
    copy_ms = _timed("add_fp32_1GiB", lambda: torch.add(x, y, out=z), COPY_ITERS)
    wall_s = time.perf_counter() - wall0
    tflops = 2 * 8192**3 * GEMM_ITERS / (gemm_ms / 1e3) / 1e12
    gbps = 3 * x.numel() * 4 * COPY_ITERS / (copy_ms / 1e3) / 1e9
    print("STEADY " + json.dumps({"gemm_ms": round(gemm_ms, 3), "copy_ms": round(copy_ms, 3),
                                  "gemm_tflops": round(tflops, 1), "copy_gb_per_s": round(gbps, 1),
                                  "wall_s": round(wall_s, 4)}))


if __name__ == "__main__":
    main()
