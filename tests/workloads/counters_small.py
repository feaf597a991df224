"""A small workload for counter-pass fixtures: Triton kernels (small cubins keep
the recorded .ncu-rep small), one cuBLAS GEMM and one PyTorch reduction, the
GEMM inside a kernelscope.region so the --region filter (NVTX) is exercised."""
from __future__ import annotations

import torch

import kernelscope
from kernelscope.kernels.tiled import matmul, softmax


def main() -> None:
    torch.manual_seed(0)
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    b = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    for _ in range(2):
        with kernelscope.region("triton_mm"):
            c = matmul(a, b)
        with kernelscope.region("softmax"):
            y = softmax(c)
        with kernelscope.region("cublas_mm"):
            d = a @ b
        s = y.float().sum() + d.float().abs().amax()
    torch.cuda.synchronize()
    print(f"counters_small: {float(s):.3f}")


if __name__ == "__main__":
    main()
