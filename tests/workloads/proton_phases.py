"""Phase scopes example: a Triton tiled fp16 matmul whose warps mark "setup", "load",
"compute" and "store" with Proton scopes, recorded with kernelscope's ProtonScopes.

    kernelscope run -o phases.json -- python tests/workloads/proton_phases.py [--keep-proton FILE]
    kernelscope show phases.json --kernel matmul_phases_kernel
    kernelscope export phases.json --chrome phases.trace.json

Needs an NVIDIA GPU to record; the kernel also runs in Triton's interpreter,
where the scopes do nothing (tests/test_proton_scopes.py). Recorded on an NVIDIA H100
80GB HBM3 on 2026-11-22: tests/data/session_h100_proton.json.gz and Proton's raw
tests/data/proton_h100_phases.chrome_trace.gz (tests/test_instrumented_sessions.py).
"""
from __future__ import annotations

import argparse
import sys

import torch
import triton
import triton.language as tl
import triton.profiler.language as pl

from kernelscope.collect.instrument.proton_scopes import ProtonScopes

KERNEL = "matmul_phases_kernel"


@triton.jit
def matmul_phases_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn, stride_cm,
                         stride_cn, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
                         SCOPES: tl.constexpr):
    # enter/exit under a constexpr flag rather than `with pl.scope(...)`: the interpreter cannot run Proton's
    # builtins, and a False branch is not generated at all
    if SCOPES:
        pl.enter_scope("setup")
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if SCOPES:
        pl.exit_scope("setup")
    for k0 in range(0, K, BLOCK_K):
        if SCOPES:
            pl.enter_scope("load")
        a = tl.load(a_ptr + offs_m[:, None] * stride_am + (k0 + offs_k)[None, :] * stride_ak,
                    mask=(offs_m[:, None] < M) & ((k0 + offs_k)[None, :] < K), other=0.0)
        b = tl.load(b_ptr + (k0 + offs_k)[:, None] * stride_bk + offs_n[None, :] * stride_bn,
                    mask=((k0 + offs_k)[:, None] < K) & (offs_n[None, :] < N), other=0.0)
        if SCOPES:
            pl.exit_scope("load")
            pl.enter_scope("compute")
        acc = tl.dot(a, b, acc)
        if SCOPES:
            pl.exit_scope("compute")
    if SCOPES:
        pl.enter_scope("store")
    tl.store(c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn, acc.to(c_ptr.dtype.element_ty),
             mask=(offs_m[:, None] < M) & (offs_n[None, :] < N))
    if SCOPES:
        pl.exit_scope("store")


def matmul(a: torch.Tensor, b: torch.Tensor, block_m: int = 128, block_n: int = 128, block_k: int = 64,
           num_warps: int = 4, num_stages: int = 2, scopes: bool = False) -> torch.Tensor:
    m, k = a.shape
    n = b.shape[1]
    c = torch.empty((m, n), device=a.device, dtype=a.dtype)
    grid = (triton.cdiv(m, block_m), triton.cdiv(n, block_n))
    matmul_phases_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
                               c.stride(1), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, SCOPES=scopes,
                               num_warps=num_warps, num_stages=num_stages)
    return c


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--keep-proton", metavar="FILE", help="also copy Proton's raw trace here")
    args = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("proton_phases: needs an NVIDIA GPU to record scopes", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    a = torch.randn(args.size, args.size, device="cuda", dtype=torch.float16)
    b = torch.randn(args.size, args.size, device="cuda", dtype=torch.float16)
    matmul(a, b)  # the plain variant, compiled and run outside Proton
    with ProtonScopes(KERNEL, keep=args.keep_proton) as ps:
        c = matmul(a, b, scopes=True)  # compiled with the scopes, one launch
    torch.cuda.synchronize()
    err = (c.float() - a.float() @ b.float()).abs().max().item()
    s = ps.scopes
    assert s is not None
    print(f"max abs error vs fp32 torch: {err:.4f}; scopes: {s.names}, {len(s.warps)} warps, problems: {s.problems}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
