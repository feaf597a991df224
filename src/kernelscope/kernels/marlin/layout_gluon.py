"""The weight layout of the Gluon W4A16 kernel (:mod:`gluon_hopper`), as pure torch (no triton needed).

``Bg`` regroups the kernel layout ``Bk`` of :mod:`gemm` (int32 ``(k // 8, n)``, blocks of 16 word rows per 128 k)
so that a block of 128 k for consecutive columns is contiguous: row ``b * n + c`` of the int32
``(k // 128 * n, 16)`` matrix holds block b of column c, and its word ``4 q + v`` is Bk's word ``16 b + q + 4 v``
(the four words whose f16x2 pairs lane q of an MMA row group holds: one 16-byte load).
"""
from __future__ import annotations

import torch

WORDS = 16  # int32 words per column of a 128-deep block of k (8 nibbles a word)
_GROUPS = 4  # lanes q of an MMA row group; each holds 4 words v of a block


def to_gluon_layout(Bk: torch.Tensor) -> torch.Tensor:
    """``Bk`` (k // 8, n) of :func:`gemm.to_kernel_layout` -> ``Bg`` (k // 128 * n, 16) (module docstring)."""
    kw, n = Bk.shape
    if Bk.dim() != 2 or kw % WORDS:
        raise ValueError(f"to_gluon_layout: Bk must be 2-D with a multiple of {WORDS} rows, got {tuple(Bk.shape)}.")
    blocks = kw // WORDS
    g = Bk.reshape(blocks, _GROUPS, _GROUPS, n).permute(0, 3, 2, 1)  # (b, v, q, c) -> (b, c, q, v)
    return g.reshape(blocks * n, WORDS).contiguous()


def from_gluon_layout(Bg: torch.Tensor, n: int) -> torch.Tensor:
    """Inverse of :func:`to_gluon_layout`: ``Bg`` and the number of columns n -> ``Bk``."""
    if Bg.dim() != 2 or Bg.shape[1] != WORDS or Bg.shape[0] % n:
        raise ValueError(f"from_gluon_layout: Bg must be ({WORDS}-word rows) x a multiple of n={n}, "
                         f"got {tuple(Bg.shape)}.")
    blocks = Bg.shape[0] // n
    return Bg.reshape(blocks, n, _GROUPS, _GROUPS).permute(0, 3, 2, 1).reshape(blocks * WORDS, n).contiguous()
