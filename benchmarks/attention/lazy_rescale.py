"""Lazy rescaling in the flash kernel: the same launch with and without it, and SDPA cuDNN, timed interleaved.

    PYTHONPATH=src python3 benchmarks/attention/lazy_rescale.py

fp16, B*S = 16384 tokens, hidden 2048 (as the benchmark); the launch config is pinned to the one the
autotuner chose in run 4 at each head dim, so only LAZY_RESCALE differs. Each variant is first checked
against the fp32 reference (error within 2x torch's own).
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from kernelscope.bench.timing import time_cuda_interleaved
from kernelscope.kernels.attention.check import error_vs_reference, within_factor
from kernelscope.kernels.attention.flash import FlashConfig, flash_attention
from kernelscope.kernels.attention.reference import naive_attention, reference_attention

PINNED = {64: FlashConfig(128, 64, 4, 3), 128: FlashConfig(128, 64, 4, 2)}


def main() -> None:
    print(f"{'D':>4} {'mask':>6} {'S':>6} {'plain TF/s':>11} {'lazy TF/s':>10} {'cuDNN TF/s':>11} "
          f"{'lazy/plain':>10} {'lazy/cuDNN':>10}")
    for d in (64, 128):
        for causal in (False, True):
            for s in (2048, 4096, 16384):
                b, h = 16384 // s, 2048 // d
                q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=torch.float16) for _ in range(3))
                if s <= 4096:  # the reference materialises the scores: check at the smaller sizes
                    ref = reference_attention(q[:1], k[:1], v[:1], causal)
                    theirs = error_vs_reference(naive_attention(q[:1], k[:1], v[:1], causal), ref)
                    for lazy in (False, True):
                        out = flash_attention(q[:1], k[:1], v[:1], causal, config=PINNED[d], lazy_rescale=lazy)
                        ok, why = within_factor(error_vs_reference(out, ref), theirs)
                        assert ok, f"D={d} causal={causal} S={s} lazy={lazy}: {why}"
                fns = {
                    "plain": lambda: flash_attention(q, k, v, causal, config=PINNED[d]),
                    "lazy": lambda: flash_attention(q, k, v, causal, config=PINNED[d], lazy_rescale=True),
                    "cudnn": lambda: _cudnn(q, k, v, causal),
                }
                t = time_cuda_interleaved(fns, warmup=5, repeats=20)
                flops = 4 * b * h * s * s * d // (2 if causal else 1)
                tf = {n: flops / (t[n].median_ms * 1e-3) / 1e12 for n in t}
                print(f"{d:>4} {'causal' if causal else 'full':>6} {s:>6} {tf['plain']:>11.0f} {tf['lazy']:>10.0f} "
                      f"{tf['cudnn']:>11.0f} {tf['lazy'] / tf['plain']:>10.3f} {tf['lazy'] / tf['cudnn']:>10.3f}",
                      flush=True)


def _cudnn(q, k, v, causal):
    with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal)


if __name__ == "__main__":
    main()
