"""A tiny Triton kernel for the fp32 FMA ceiling: CHAINS independent FMA chains per
element, ITERATIONS steps each, one store at the end so nothing is optimised away.

Counted work: 2 FLOPs per FMA, n x ITERATIONS x CHAINS FMAs. The few setup
operations per element (index scaling, chain offsets, the final sum) are not
counted: under 0.2% of the work at the iteration counts calibrate uses.
"""
from __future__ import annotations

from typing import Any

import triton
import triton.language as tl

CHAINS = 4  # independent chains per element: the scheduler always has an FMA to issue


@triton.jit
def fma_kernel(out_ptr, a, b, ITERATIONS: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x0 = offs.to(tl.float32) * 1e-7
    x1 = x0 + 1.0
    x2 = x0 + 2.0
    x3 = x0 + 3.0
    for _ in range(ITERATIONS):
        x0 = tl.fma(x0, a, b)
        x1 = tl.fma(x1, a, b)
        x2 = tl.fma(x2, a, b)
        x3 = tl.fma(x3, a, b)
    tl.store(out_ptr + offs, x0 + x1 + x2 + x3)


def fma_flops(elements: int, iterations: int, chains: int = CHAINS) -> int:
    """FLOPs the kernel is credited with: 2 per FMA."""
    return 2 * elements * iterations * chains


def launch(out: Any, a: float, b: float, iterations: int, block: int = 1024) -> None:
    """Run the kernel over every element of ``out`` (float32, a multiple of ``block`` long)."""
    n = out.numel()
    if n % block:
        raise ValueError(f"{n} elements is not a multiple of the block of {block}")
    fma_kernel[(n // block,)](out, a, b, ITERATIONS=iterations, BLOCK=block)


def reference(elements: int, a: float, b: float, iterations: int, block: int = 1024) -> list[float]:
    """What the kernel computes, in float32 arithmetic step by step (numpy), for the tests."""
    import numpy as np

    x0 = np.arange(elements, dtype=np.float32) * np.float32(1e-7)
    xs = [x0, x0 + np.float32(1.0), x0 + np.float32(2.0), x0 + np.float32(3.0)]
    fa, fb = np.float32(a), np.float32(b)
    for _ in range(iterations):
        xs = [(x.astype(np.float64) * fa + fb).astype(np.float32) for x in xs]  # one rounding per step, as an FMA
    return list((xs[0] + xs[1] + xs[2] + xs[3]).astype(np.float32))
