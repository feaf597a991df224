"""Marlin INT4 weights (format) and the W4A16 GEMM that consumes them (a Triton kernel, and a Gluon decode kernel
for Hopper). A launch is a :class:`LaunchConfig`, decided by :func:`decide_launch` (module :mod:`launch`).

Importing this package needs torch and numpy only; triton is imported on the
first call of :func:`w4a16_matmul`, so the format works on machines without it.
"""

from .format import (
    GROUPSIZES,
    check_shape,
    dequantize,
    pack,
    quantize,
    quantize_with_scales,
    unpack,
)
from .gemm import reference_matmul, to_kernel_layout
from .launch import LaunchConfig, LaunchDecision, decide_launch, w4a16_matmul
from .matmul import launch_grid, tma_supported
from .linear import W4A16Linear, swap_linears

__all__ = [
    "GROUPSIZES",
    "check_shape",
    "dequantize",
    "pack",
    "quantize",
    "quantize_with_scales",
    "reference_matmul",
    "to_kernel_layout",
    "launch_grid",
    "LaunchConfig",
    "LaunchDecision",
    "decide_launch",
    "tma_supported",
    "unpack",
    "w4a16_matmul",
    "W4A16Linear",
    "swap_linears",
]
