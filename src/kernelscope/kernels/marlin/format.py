"""Marlin INT4 weight format: symmetric 4-bit quantization, pack and unpack.

The functions here are pure tensor code (torch only, any device, no GPU needed)
and reproduce the layout of IST-DASLab/marlin bit for bit, so that weights packed
here can be fed to the original CUDA kernel and vice versa.

Conventions (those of Marlin's ``gen_quant4`` and ``Layer.pack``):

* a weight is an ``nn.Linear`` weight of shape ``(n, k)``; quantized values ``q``
  are stored transposed, ``(k, n)``, as integers 0..15 with a +8 offset;
* one fp16 scale per group of ``groupsize`` consecutive k rows and per column,
  ``scale = max|w| * 2 / 15`` (the largest magnitude maps to 7.5 and rounds to
  -8 or +8, the latter clamped to 7); ``groupsize == -1`` means one group;
* dequantization is ``w = (q - 8) * scale``.
"""

from __future__ import annotations

import torch

from .layout import CHUNK, NIBBLES, TILE, inverse, scale_perm, weight_perm

#: Group sizes that the Marlin kernel supports; -1 means one group per column.
GROUPSIZES = (128, -1)
#: k must be a multiple of this (Marlin's smallest k tile).
K_MULTIPLE = 128
#: n must be a multiple of this (Marlin's largest n tile).
N_MULTIPLE = 256
#: Offset that makes the signed range -8..7 unsigned.
ZERO = 8
MAXQ = 15

_SHIFTS = tuple(4 * i for i in range(NIBBLES))


def group_rows(k: int, groupsize: int) -> int:
    """Rows of k that share one scale: ``groupsize``, or all of k for -1."""
    return k if groupsize == -1 else groupsize


def check_shape(k: int, n: int, groupsize: int, where: str) -> None:
    """Raise one ValueError sentence unless (k, n, groupsize) suit Marlin.

    Checked up front so that a bad shape fails with a plain message rather than
    an obscure reshape error deep in the permutation code.
    """
    if groupsize not in GROUPSIZES:
        raise ValueError(f"{where}: groupsize must be 128 or -1 (per-channel), got {groupsize}.")
    if k <= 0 or k % K_MULTIPLE:
        raise ValueError(f"{where}: k must be a positive multiple of {K_MULTIPLE}, got k={k}.")
    if n <= 0 or n % N_MULTIPLE:
        raise ValueError(f"{where}: n must be a positive multiple of {N_MULTIPLE}, got n={n}.")


def describe(x: object) -> str:
    """Dtype and shape of a tensor (or the type of anything else), for messages."""
    if isinstance(x, torch.Tensor):
        return f"{x.dtype} of shape {tuple(x.shape)}"
    return type(x).__name__


def _check_scales(scales: torch.Tensor, k: int, n: int, groupsize: int, where: str) -> None:
    rows = k // group_rows(k, groupsize)
    if not isinstance(scales, torch.Tensor) or scales.dtype != torch.float16:
        got = scales.dtype if isinstance(scales, torch.Tensor) else type(scales).__name__
        raise ValueError(f"{where}: scales must be a float16 tensor, got {got}.")
    if tuple(scales.shape) != (rows, n):
        raise ValueError(
            f"{where}: scales must have shape (k // groupsize, n) = {(rows, n)}, "
            f"got {tuple(scales.shape)}."
        )


def _check_q(q: torch.Tensor, groupsize: int, where: str) -> tuple[int, int]:
    integer = isinstance(q, torch.Tensor) and not (
        q.dtype.is_floating_point or q.dtype.is_complex or q.dtype == torch.bool
    )
    if not integer or q.dim() != 2:
        desc = describe(q)
        raise ValueError(f"{where}: q must be a 2-D integer tensor of shape (k, n), got {desc}.")
    k, n = q.shape
    check_shape(k, n, groupsize, where)
    if q.numel() and (int(q.min()) < 0 or int(q.max()) > MAXQ):
        raise ValueError(f"{where}: q values must lie in 0..{MAXQ}, got {int(q.min())}..{int(q.max())}.")
    return k, n


def _check_weight(weight: torch.Tensor, groupsize: int, where: str) -> tuple[int, int]:
    if not isinstance(weight, torch.Tensor) or weight.dtype != torch.float16 or weight.dim() != 2:
        desc = describe(weight)
        raise ValueError(f"{where}: weight must be a 2-D float16 tensor of shape (n, k), got {desc}.")
    n, k = weight.shape
    check_shape(k, n, groupsize, where)
    if not bool(torch.isfinite(weight).all()):
        raise ValueError(f"{where}: weight must be finite, but it holds inf or NaN values.")
    return k, n


def quantize_with_scales(weight: torch.Tensor, scales: torch.Tensor, groupsize: int) -> torch.Tensor:
    """Round an fp16 ``(n, k)`` weight to 4-bit values with given scales.

    This is the rounding step of Marlin's ``Layer.pack``: ``w / s`` is formed in
    fp16 (as Marlin does, so ties land the same way), rounded half to even,
    offset by 8 and clamped to 0..15.  A zero scale (an all-zero group) gives
    q = 8 rather than NaN.  Returns q of shape ``(k, n)``, dtype uint8.
    """
    k, n = _check_weight(weight, groupsize, "quantize_with_scales")
    _check_scales(scales, k, n, groupsize, "quantize_with_scales")
    s = scales.float().repeat_interleave(group_rows(k, groupsize), dim=0)
    ratio = (weight.t().float() / s).half().float()
    ratio = torch.where(s == 0, torch.zeros_like(ratio), ratio)
    return (torch.round(ratio) + ZERO).clamp(0, MAXQ).to(torch.uint8)


def quantize(weight: torch.Tensor, groupsize: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric 4-bit quantization of an fp16 ``nn.Linear`` weight ``(n, k)``.

    Returns ``(q, scales)``: q ``(k, n)`` uint8 in 0..15, scales fp16
    ``(k // groupsize, n)`` (``(1, n)`` for groupsize -1).  The scale is
    ``max|w| * 2 / 15`` over each group, computed in fp32 and rounded to fp16,
    which is what torch does for Marlin's in-place fp16 ``s *= 2 / 15``.
    """
    k, n = _check_weight(weight, groupsize, "quantize")
    rows = group_rows(k, groupsize)
    maxabs = weight.t().float().reshape(k // rows, rows, n).abs().amax(dim=1)
    scales = (maxabs * (2 / MAXQ)).half()
    return quantize_with_scales(weight, scales, groupsize), scales


def dequantize(q: torch.Tensor, scales: torch.Tensor, groupsize: int) -> torch.Tensor:
    """Return ``(q - 8) * scale`` as an fp16 ``(k, n)`` tensor.

    The product is exact in fp32 and rounded once to fp16, so for weights that
    came out of :func:`quantize` this is Marlin's fake-quantized weight,
    transposed, bit for bit.
    """
    k, n = _check_q(q, groupsize, "dequantize")
    _check_scales(scales, k, n, groupsize, "dequantize")
    s = scales.float().repeat_interleave(group_rows(k, groupsize), dim=0)
    return ((q.to(torch.int32) - ZERO).float() * s).half()


def _scale_order(k: int, groupsize: int) -> tuple[int, ...]:
    # Marlin picks the scale order by the number of groups, not by the groupsize
    # argument: groupsize 128 with k == 128 is packed like per-channel.
    return scale_perm(k // group_rows(k, groupsize) > 1)


def _index(perm: tuple[int, ...], device: torch.device) -> torch.Tensor:
    return torch.tensor(perm, dtype=torch.int64, device=device)


def _to_int32(words: torch.Tensor) -> torch.Tensor:
    """Reinterpret int64 values in 0..2**32-1 as int32 bit patterns."""
    return torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)


def pack(q: torch.Tensor, scales: torch.Tensor, groupsize: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Pack ``q (k, n)`` and plain ``scales`` into Marlin's ``(B, s)``.

    B is int32 ``(k // 16, 2 * n)``: each row holds one 16-row slice of k, cut
    into 16x16 tiles along n, every four tiles reordered by
    :func:`layout.weight_perm` and packed 8 values per word, low nibble first.
    s has the shape of ``scales`` with columns reordered by
    :func:`layout.scale_perm`.
    """
    k, n = _check_q(q, groupsize, "pack")
    _check_scales(scales, k, n, groupsize, "pack")
    perm = _index(weight_perm(), device=q.device)
    tiles = q.to(torch.int64).reshape(k // TILE, TILE, n // TILE, TILE).permute(0, 2, 1, 3)
    vals = tiles.reshape(k // TILE, n * TILE // CHUNK, CHUNK)[:, :, perm]
    vals = vals.reshape(k // TILE, 2 * n, NIBBLES)
    shifts = torch.tensor(_SHIFTS, dtype=torch.int64, device=q.device)
    B = _to_int32((vals << shifts).sum(dim=-1))
    sp = _index(_scale_order(k, groupsize), device=scales.device)
    s = scales.reshape(-1, sp.numel())[:, sp].reshape(scales.shape).contiguous()
    return B, s


def unpack(B: torch.Tensor, s: torch.Tensor, groupsize: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact inverse of :func:`pack`: Marlin ``(B, s)`` back to ``(q, scales)``.

    q comes back as uint8 ``(k, n)``, scales as plain fp16 ``(k // groupsize, n)``.
    """
    if not isinstance(B, torch.Tensor) or B.dtype != torch.int32 or B.dim() != 2 or B.shape[1] % 2:
        desc = describe(B)
        raise ValueError(f"unpack: B must be a 2-D int32 tensor of shape (k // 16, 2 * n), got {desc}.")
    k, n = B.shape[0] * TILE, B.shape[1] // 2
    check_shape(k, n, groupsize, "unpack")
    _check_scales(s, k, n, groupsize, "unpack")
    shifts = torch.tensor(_SHIFTS, dtype=torch.int64, device=B.device)
    words = B.to(torch.int64) & 0xFFFFFFFF
    vals = (words.unsqueeze(-1) >> shifts) & 0xF
    inv = _index(inverse(weight_perm()), device=B.device)
    vals = vals.reshape(k // TILE, n * TILE // CHUNK, CHUNK)[:, :, inv]
    q = vals.reshape(k // TILE, n // TILE, TILE, TILE).permute(0, 2, 1, 3).reshape(k, n)
    sp_inv = _index(inverse(_scale_order(k, groupsize)), device=s.device)
    scales = s.reshape(-1, sp_inv.numel())[:, sp_inv].reshape(s.shape).contiguous()
    return q.to(torch.uint8).contiguous(), scales
