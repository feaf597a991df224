"""Triton W4A16 GEMM, ``C = A @ dequant(B, s)``, for Marlin-quantized weights.

Marlin's own layout is tailored to the register fragments of the CUDA ``mma``
instruction, which Triton does not expose; gathering it inside a Triton kernel
would turn every weight load into a scatter.  So the weights are converted
once, by :func:`to_kernel_layout`, into a layout that Triton loads well:

* ``Bk``: int32 ``(k // 8, n)``; nibble ``p`` (low first) of word ``(r, c)`` is
  ``q[8 * r + p, c]``.  A row of words is contiguous along n, so a block of
  weights is one dense 2-D load that can vectorize to 16-byte accesses along
  n, and each word is read once.
* ``sk``: plain fp16 scales ``(k // groupsize, n)`` (Marlin's permutation undone).

Dequantization is ``w = (q - 8) * scale``.  With several groups the scale is
applied in fp16 before the MMA (each BLOCK_K slice lies in one group); with one
group it is applied to the fp32 accumulator at the end, as Marlin does.

triton is imported lazily (on the first launch), so that this module and the
format can be imported on machines without triton, and so that the
``TRITON_INTERPRET`` switch is read when the kernel is built, not at import.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any, Callable

import torch

from .format import NIBBLES, ZERO, check_shape, describe, group_rows, unpack

tl: Any = None  # triton.language, bound by _kernel() before the first compile

_SHIFTS = tuple(4 * i for i in range(NIBBLES))


def to_kernel_layout(B: torch.Tensor, s: torch.Tensor, groupsize: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Convert Marlin ``(B, s)`` once into the ``(Bk, sk)`` layout of the kernel.

    Done once per weight (at load time), not per call.  See the module docstring
    for the layout; the conversion is lossless, via :func:`format.unpack`.
    """
    q, scales = unpack(B, s, groupsize)
    k, n = q.shape
    vals = q.to(torch.int64).reshape(k // NIBBLES, NIBBLES, n)
    shifts = torch.tensor(_SHIFTS, dtype=torch.int64, device=q.device).view(1, NIBBLES, 1)
    words = (vals << shifts).sum(dim=1)
    words = torch.where(words >= 2**31, words - 2**32, words).to(torch.int32)
    return words.contiguous(), scales.contiguous()


def reference_matmul(a: torch.Tensor, B: torch.Tensor, s: torch.Tensor, groupsize: int) -> torch.Tensor:
    """fp32 reference for ``a @ dequant(B, s)`` from Marlin-layout ``(B, s)``.

    It shares no code with the kernel path beyond :func:`format.unpack` (which is
    tested bit for bit against Marlin), so it is an independent check.  Returns
    fp32 ``(m, n)``.
    """
    q, scales = unpack(B, s, groupsize)
    k = q.shape[0]
    w = (q.float() - ZERO) * scales.float().repeat_interleave(group_rows(k, groupsize), dim=0)
    return a.float() @ w.to(a.device)


def _w4a16_kernel(
    a_ptr, b_ptr, s_ptr, c_ptr,
    M, N,
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_sg, stride_sn,
    stride_cs, stride_cm, stride_cn,
    K_SPLIT: tl.constexpr,
    GROUP_K: tl.constexpr,
    PER_CHANNEL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """One (BLOCK_M, BLOCK_N) tile of C over one K_SPLIT-long slice of k.

    K_SPLIT is a constexpr (one compile per layer shape, a handful per model):
    a runtime loop bound trips the Triton 3.6 interpreter under numpy >= 2.4
    (triton-lang/triton#9171), and a fixed trip count costs nothing on the GPU.
    """
    # Tutorial-style grouped ordering of the output tiles, for L2 reuse of B.
    pid = tl.program_id(0)
    pid_k = tl.program_id(1)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * num_n
    first_m = (pid // per_group) * GROUP_M
    group_m = min(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_m
    pid_n = (pid % per_group) // group_m

    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    offs_k = tl.arange(0, BLOCK_K)
    offs_w = tl.arange(0, BLOCK_K // 8)
    shifts = tl.arange(0, 8) * 4
    mask_m = offs_m < M

    k_start = pid_k * K_SPLIT
    a_ptrs = a_ptr + offs_m[:, None] * stride_am + (k_start + offs_k)[None, :] * stride_ak
    b_ptrs = b_ptr + (k_start // 8 + offs_w)[:, None] * stride_bk + offs_n[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for kk in range(0, K_SPLIT, BLOCK_K):
        a = tl.load(a_ptrs, mask=mask_m[:, None], other=0.0)
        words = tl.load(b_ptrs)  # (BLOCK_K // 8, BLOCK_N) int32, one read per word
        q = (words[:, None, :] >> shifts[None, :, None]) & 0xF
        w = (tl.reshape(q, (BLOCK_K, BLOCK_N)) - 8).to(tl.float16)
        if not PER_CHANNEL:
            g = (k_start + kk) // GROUP_K
            scale = tl.load(s_ptr + g * stride_sg + offs_n * stride_sn)
            w = w * scale[None, :]
        acc = tl.dot(a, w, acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += (BLOCK_K // 8) * stride_bk
    if PER_CHANNEL:
        acc = acc * tl.load(s_ptr + offs_n * stride_sn).to(tl.float32)[None, :]
    c_ptrs = c_ptr + pid_k * stride_cs + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask_m[:, None] & (offs_n < N)[None, :])


@lru_cache(maxsize=None)
def _kernel() -> Callable:
    """Import triton and jit the kernel on first use (see the module docstring)."""
    global tl
    try:
        import triton
        import triton.language as language
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("w4a16_matmul needs triton; install it or use reference_matmul.") from exc
    tl = language
    return triton.jit(_w4a16_kernel)


def _cdiv(x: int, y: int) -> int:
    """Ceiling division (triton.cdiv without importing triton)."""
    return -(-x // y)


def _pow2_at_least(x: int, lo: int, hi: int) -> int:
    """Smallest power of two >= x, kept within [lo, hi]."""
    p = lo
    while p < x and p < hi:
        p *= 2
    return p


def _check(a: torch.Tensor, B: torch.Tensor, s: torch.Tensor, groupsize: int,
           out: torch.Tensor | None, split_k: int, block_k: int) -> tuple[int, int, int]:
    """Validate the inputs of :func:`w4a16_matmul`; return (m, k, n)."""
    where = "w4a16_matmul"
    if not isinstance(a, torch.Tensor) or a.dtype != torch.float16 or a.dim() != 2 or a.shape[0] < 1:
        desc = describe(a)
        raise ValueError(
            f"{where}: a must be a 2-D float16 tensor of shape (m, k) with m >= 1, got {desc}."
        )
    m, k = a.shape
    if not isinstance(B, torch.Tensor) or B.dtype != torch.int32 or B.dim() != 2:
        desc = describe(B)
        raise ValueError(f"{where}: B must be a 2-D int32 tensor of shape (k // 8, n), got {desc}.")
    if B.shape[0] * 16 == k and isinstance(s, torch.Tensor) and B.shape[1] == 2 * s.shape[-1]:
        raise ValueError(f"{where}: B has Marlin's shape (k // 16, 2 * n); convert it once with "
                         "to_kernel_layout(B, s, groupsize).")
    if B.shape[0] * 8 != k:
        raise ValueError(f"{where}: B must have k // 8 = {k // 8} rows for a with k={k}, got {B.shape[0]}.")
    n = B.shape[1]
    check_shape(k, n, groupsize, where)
    rows = k // group_rows(k, groupsize)
    if not isinstance(s, torch.Tensor) or s.dtype != torch.float16 or tuple(s.shape) != (rows, n):
        desc = describe(s)
        raise ValueError(f"{where}: s must be a float16 tensor of shape {(rows, n)}, got {desc}.")
    if a.device != B.device or a.device != s.device:
        raise ValueError(
            f"{where}: a, B and s must be on one device, got {a.device}, {B.device}, {s.device}."
        )
    if a.device.type == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        raise ValueError(
            f"{where}: CPU tensors need the Triton interpreter; set TRITON_INTERPRET=1 before the first call."
        )
    bad_out = out is not None and (
        out.dtype != torch.float16 or tuple(out.shape) != (m, n) or out.device != a.device
    )
    if bad_out:
        raise ValueError(f"{where}: out must be a float16 tensor of shape {(m, n)} on {a.device}.")
    if block_k not in (16, 32, 64, 128):
        raise ValueError(f"{where}: block_k must be 16, 32, 64 or 128 (a divisor of 128), got {block_k}.")
    if split_k < 1 or k % (split_k * block_k):
        raise ValueError(f"{where}: k={k} must be a multiple of split_k * BLOCK_K = {split_k} * {block_k}.")
    return m, k, n


def w4a16_matmul(
    a: torch.Tensor,
    B: torch.Tensor,
    s: torch.Tensor,
    groupsize: int,
    *,
    out: torch.Tensor | None = None,
    split_k: int = 1,
    block_m: int | None = None,
    block_n: int = 128,
    block_k: int = 64,
    group_m: int = 8,
    num_warps: int = 4,
    num_stages: int = 3,
) -> torch.Tensor:
    """``a @ dequant(B, s)`` in fp16, with ``(B, s)`` from :func:`to_kernel_layout`.

    a is fp16 ``(m, k)`` for any m >= 1.  ``split_k > 1`` splits k across
    programs (more parallelism for small m); the fp32 partial sums are then
    added in a fixed order, so results are deterministic.  ``out``, if given,
    receives the result.  Block sizes are powers of two; BLOCK_K must divide 128
    so that a slice of k never straddles two scale groups.
    """
    m, k, n = _check(a, B, s, groupsize, out, split_k, block_k)
    if block_m is None:
        block_m = _pow2_at_least(m, 16, 64)
    if block_m not in (16, 32, 64, 128) or block_n not in (16, 32, 64, 128, 256) or group_m < 1:
        raise ValueError(f"w4a16_matmul: block_m must be one of 16..128 and block_n of 16..256 "
                         f"(powers of two) and group_m >= 1, got {block_m}, {block_n} and {group_m}.")
    kernel = _kernel()
    if out is None:
        out = torch.empty((m, n), dtype=torch.float16, device=a.device)
    target = out if split_k == 1 else torch.empty((split_k, m, n), dtype=torch.float32, device=a.device)
    c_strides = (0, *out.stride()) if split_k == 1 else target.stride()
    grid = (_cdiv(m, block_m) * _cdiv(n, block_n), split_k)
    kernel[grid](
        a, B, s, target,
        m, n,
        a.stride(0), a.stride(1),
        B.stride(0), B.stride(1),
        s.stride(0), s.stride(1),
        *c_strides,
        K_SPLIT=k // split_k,
        GROUP_K=group_rows(k, groupsize),
        PER_CHANNEL=k // group_rows(k, groupsize) == 1,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=group_m,
        num_warps=num_warps, num_stages=num_stages,
    )
    if split_k > 1:
        out.copy_(target.sum(dim=0))
    return out
