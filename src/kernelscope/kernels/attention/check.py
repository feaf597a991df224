"""The accuracy criterion of the attention kernel, shared by the CPU and GPU tests.

A kernel in fp16/bf16 cannot match an fp32 reference exactly, so its error is
judged against the error of PyTorch doing the same computation in the same
precision: the kernel's error must be at most ``factor`` times PyTorch's, on
the largest and on the mean absolute deviation. A NaN or Inf never passes.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class ErrorVsReference:
    max_abs: float
    mean_abs: float
    finite: bool


def error_vs_reference(out: torch.Tensor, ref: torch.Tensor) -> ErrorVsReference:
    """Absolute deviation of ``out`` from the fp32 ``ref``; ``finite`` is False if out has NaN/Inf."""
    if out.shape != ref.shape:
        raise ValueError(f"output shape {tuple(out.shape)} differs from the reference's {tuple(ref.shape)}")
    finite = bool(torch.isfinite(out).all())
    diff = (out.float() - ref.float()).abs()
    return ErrorVsReference(float(diff.max()) if diff.numel() else 0.0,
                            float(diff.mean()) if diff.numel() else 0.0, finite)


def within_factor(kernel: ErrorVsReference, torch_same_precision: ErrorVsReference,
                  factor: float = 2.0) -> tuple[bool, str]:
    """(passed, one-line explanation) for the criterion in the module docstring."""
    why = (f"kernel max|err| {kernel.max_abs:.3g}, mean {kernel.mean_abs:.3g}; same-precision torch "
           f"max {torch_same_precision.max_abs:.3g}, mean {torch_same_precision.mean_abs:.3g}; allowed x{factor}")
    if not kernel.finite:
        return False, "the kernel output has NaN or Inf; " + why
    ok = (kernel.max_abs <= factor * torch_same_precision.max_abs
          and kernel.mean_abs <= factor * torch_same_precision.mean_abs)
    return ok, why
