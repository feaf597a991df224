"""Launch configurations that stress each occupancy limit, from several libraries.

Triton matmuls with different tiles, warps and pipeline depths (registers and
shared memory vary), a row softmax at several widths, cuBLAS in fp32/bf16,
cuDNN and memory-efficient attention, and PyTorch reductions. Used to check
the occupancy calculator against Nsight Compute on a real GPU.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from kernelscope.kernels.tiled import matmul, softmax

CONFIGS = [  # (BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages)
    (64, 64, 32, 2, 2), (64, 64, 64, 4, 3), (128, 64, 32, 4, 4), (128, 128, 64, 4, 3),
    (128, 128, 64, 8, 4), (128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (64, 256, 32, 4, 4),
    (32, 32, 32, 1, 2), (128, 128, 32, 16, 2),
]


def main() -> None:
    torch.manual_seed(0)
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    b = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    for bm, bn, bk, w, s in CONFIGS:
        matmul(a, b, bm, bn, bk, num_warps=w, num_stages=s)
    for cols in (128, 1024, 4096, 16384):
        softmax(torch.randn(512, cols, device="cuda"))
    torch.backends.cuda.matmul.allow_tf32 = False
    af, bf = a.float(), b.float()
    _ = af @ bf
    _ = a.bfloat16() @ b.bfloat16()
    q = torch.randn(2, 8, 512, 128, device="cuda", dtype=torch.bfloat16)
    for backend in (SDPBackend.CUDNN_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.FLASH_ATTENTION):
        try:
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(q, q, q)
        except RuntimeError as e:  # a backend this build or GPU lacks
            print(f"skipped {backend}: {e}")
    _ = af.sum(dim=0), af.amax(dim=1), torch.cumsum(af, dim=1)
    torch.cuda.synchronize()
    print("sweep done")


if __name__ == "__main__":
    main()
