"""Attention forward: a Triton flash-attention kernel and the PyTorch versions it is measured against.

Importing this package needs torch only; the Triton kernel (``flash``) is
imported on first use, so the references work without triton and the
``TRITON_INTERPRET`` switch is read when the kernel module is first imported.

``IMPLEMENTATIONS`` names every implementation the benchmark and the profile
workload accept; :func:`get_impl` turns a name into ``fn(q, k, v, causal)``.
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable

import torch

from .reference import SDPA_BACKENDS, causal_mask, naive_attention, reference_attention, sdpa_attention

AttentionFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, bool], torch.Tensor]

IMPLEMENTATIONS = ("flash", "naive", *(f"sdpa-{b}" for b in SDPA_BACKENDS))


def get_impl(name: str) -> AttentionFn:
    """The attention function called ``name`` (one of IMPLEMENTATIONS); ValueError otherwise."""
    if name == "flash":
        from .flash import flash_attention

        return flash_attention
    if name == "naive":
        return naive_attention
    if name.startswith("sdpa-") and name[5:] in SDPA_BACKENDS:
        return partial(sdpa_attention, backend=name[5:])
    raise ValueError(f"unknown attention implementation {name!r}; choose from {', '.join(IMPLEMENTATIONS)}")


def __getattr__(name: str) -> Any:
    if name in ("flash_attention", "FlashConfig", "HOPPER_CONFIGS", "tuned_config"):
        from . import flash

        return getattr(flash, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "IMPLEMENTATIONS",
    "SDPA_BACKENDS",
    "causal_mask",
    "flash_attention",
    "get_impl",
    "naive_attention",
    "reference_attention",
    "sdpa_attention",
]
