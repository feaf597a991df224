"""Instrumented example: a Triton tiled matmul whose programs record the SM they ran
on and their start and end times (kernelscope's block recorder), run plain and
instrumented so the recorder's overhead can be measured.

    kernelscope run -o inst.json -- python tests/workloads/instrumented_example.py
    kernelscope show inst.json --kernel matmul_blocks_kernel
    kernelscope export inst.json --chrome inst.trace.json

Needs an NVIDIA GPU for RECORD=True (inline PTX); the kernel with RECORD=False
also runs in Triton's interpreter (tests/test_block_recorder.py). Recorded on an
NVIDIA H100 80GB HBM3 on 2026-11-22 (scripts/record.sh instrumented):
tests/data/session_h100_instrumented.json.gz, tested in tests/test_instrumented_sessions.py.

The table it prints is CUDA-event time around one call, host launch latency included;
the kernel-only comparison is the session's (CUPTI durations, Block -> SM layout panel).
In the recorded run the plain calls also allocated and zero-filled a one-value placeholder
inside the timed window (since fixed: allocated once, before timing).
"""
from __future__ import annotations

import statistics
import sys

import torch
import triton
import triton.language as tl

from kernelscope.collect.instrument.recorder import BlockRecorder
from kernelscope.collect.instrument.triton_blocks import block_clock, block_record
from kernelscope.kernels.tiled import tile_product  # the same tile loop as the plain tiled matmul

KERNEL = "matmul_blocks_kernel"


@triton.jit
def matmul_blocks_kernel(a_ptr, b_ptr, c_ptr, records_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                         stride_cm, stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         RECORD: tl.constexpr):
    t_start = block_clock(RECORD)
    acc, offs_m, offs_n = tile_product(a_ptr, b_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                                       BLOCK_M, BLOCK_N, BLOCK_K)
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
    block_record(records_ptr, t_start, RECORD)


def grid_for(m: int, n: int, block_m: int, block_n: int) -> tuple[int, int, int]:
    return (triton.cdiv(m, block_m), triton.cdiv(n, block_n), 1)


def matmul(a: torch.Tensor, b: torch.Tensor, recorder: BlockRecorder | None = None, block_m: int = 128,
           block_n: int = 128, block_k: int = 64, num_warps: int = 8, num_stages: int = 3) -> torch.Tensor:
    """C = A @ B; with an enabled recorder, every program writes its block record."""
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    grid = grid_for(m, n, block_m, block_n)
    if recorder is not None and recorder.grid != grid:
        raise ValueError(f"the recorder was sized for grid {recorder.grid}, this launch has {grid}")
    record = recorder is not None and recorder.enabled
    records = recorder.buffer if recorder is not None else torch.zeros(1, dtype=torch.int64, device=a.device)
    matmul_blocks_kernel[grid[:2]](a, b, c, records, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1),
                                   c.stride(0), c.stride(1), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k,
                                   RECORD=record, num_warps=num_warps, num_stages=num_stages)
    return c


def _time_ms(fn, reps: int) -> list[float]:
    out = []
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        out.append(start.elapsed_time(end))
    return out


def main(size: int = 4096, reps: int = 5) -> int:
    if not torch.cuda.is_available():
        print("instrumented_example: needs an NVIDIA GPU (the recorder reads %smid and %globaltimer)", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    a = torch.randn(size, size, device="cuda", dtype=torch.float16)
    b = torch.randn(size, size, device="cuda", dtype=torch.float16)
    grid = grid_for(size, size, 128, 128)
    matmul(a, b)  # compile both variants before anything is timed
    warm = BlockRecorder(grid)
    matmul(a, b, warm)
    warm.submit(KERNEL)  # submitted too, so that no instrumented launch is counted as a plain one
    off = BlockRecorder(grid, enabled=False)  # the placeholder buffer, allocated outside the timed window
    plain = _time_ms(lambda: matmul(a, b, off), reps)
    instrumented = []
    for _ in range(reps):
        rec = BlockRecorder(grid)
        instrumented += _time_ms(lambda: matmul(a, b, rec), 1)
        records = rec.submit(KERNEL)
        assert records is not None
    ref = a.float() @ b.float()
    err = (matmul(a, b).float() - ref).abs().max().item()
    print(f"{'variant':<14}{'median ms':>10}  (CUDA events around one call, host launch included)")
    print(f"{'plain':<14}{statistics.median(plain):>10.4f}")
    print(f"{'instrumented':<14}{statistics.median(instrumented):>10.4f}")
    print(f"max abs error vs fp32 torch: {err:.4f}; last records: {len(records)} rows, problems: {records.problems}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
