"""A small workload for counter-pass fixtures: Triton kernels (small cubins keep
the recorded .ncu-rep small), one cuBLAS GEMM, one cuDNN attention (SDPA) and one
PyTorch reduction, the GEMM inside a kernelscope.region so the --region filter
(NVTX) is exercised. The matmuls and the attention declare their work (FLOPs and
the bytes each must move at least), so the session carries a roofline position
from declared work beside the one from counters."""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import kernelscope
from kernelscope.kernels.tiled import matmul, softmax


def main() -> None:
    torch.manual_seed(0)
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    b = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    n = 2048
    mm_work = {"flops": 2 * n**3, "bytes": 3 * n * n * 2}  # read A, B and write C once, fp16
    q, k, v = (torch.randn(4, 16, 1024, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    attn_work = {"flops": 4 * 4 * 16 * 1024 * 1024 * 128, "bytes": 4 * q.numel() * 2}  # 4·B·H·S²·D; q, k, v, o
    for _ in range(2):
        with kernelscope.region("triton_mm", **mm_work):
            c = matmul(a, b)
        with kernelscope.region("softmax"):
            y = softmax(c)
        with kernelscope.region("cublas_mm", **mm_work):
            d = a @ b
        with kernelscope.region("cudnn_attention", **attn_work), sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            o = F.scaled_dot_product_attention(q, k, v)
        s = y.float().sum() + d.float().abs().amax() + o.float().abs().amax()
    torch.cuda.synchronize()
    print(f"counters_small: {float(s):.3f}")


if __name__ == "__main__":
    main()
