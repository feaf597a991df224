"""A small mixed GPU workload used to record test fixtures on a real GPU.

It launches kernels from several libraries (cuBLAS, cuDNN, PyTorch native,
SDPA flash attention, Triton) inside named regions, so that the trace pass,
the occupancy calculator and region attribution are checked on real launches.
Run it with `kernelscope run -- python tests/workloads/mixed.py`.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.profiler import record_function

try:  # Triton is optional: the workload still covers the other libraries.
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the machine
    triton = None


if triton is not None:

    @triton.jit
    def _scaled_add(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs, mask=mask)
        tl.store(out_ptr + offs, x * alpha + y, mask=mask)


def main() -> None:
    dev = torch.device("cuda")
    torch.manual_seed(0)
    a = torch.randn(4096, 4096, device=dev, dtype=torch.float16)
    b = torch.randn(4096, 4096, device=dev, dtype=torch.float16)
    img = torch.randn(32, 64, 56, 56, device=dev, dtype=torch.float16)
    w = torch.randn(128, 64, 3, 3, device=dev, dtype=torch.float16)
    q = torch.randn(4, 16, 1024, 64, device=dev, dtype=torch.float16)
    k = torch.randn_like(q)
    v = torch.randn_like(q)
    for _ in range(2):
        with record_function("gemm"):
            c = a @ b
        with record_function("conv"):
            y = F.conv2d(img, w, padding=1)
        with record_function("norm"):
            z = F.layer_norm(c.float(), (4096,))
            s = torch.softmax(z, dim=-1)
            total = s.sum()
        with record_function("attention"):
            with torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.FLASH_ATTENTION):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        with record_function("elementwise"):
            g = F.gelu(c) + y.mean()
            if triton is not None:
                out = torch.empty_like(g)
                n = g.numel()
                _scaled_add[(triton.cdiv(n, 1024),)](g, c, out, n, 0.5, BLOCK=1024)
    torch.cuda.synchronize()
    print(f"checksum {float(total):.3f} {float(o.float().mean()):.5f}")


if __name__ == "__main__":
    main()
