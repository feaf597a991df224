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
from .unpack_ptx import UNPACK_PTX as _UNPACK_PTX

tl: Any = None  # triton.language, bound by _kernel() before the first compile
_UNPACK_ASM: Any = None  # _UNPACK_PTX as a triton constexpr, bound by _kernel()

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


def _interleave8(q0, q1, q2, q3, q4, q5, q6, q7, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """8 tensors (BLOCK_N, BLOCK_K // 8), nibble p of each word -> (BLOCK_N, BLOCK_K), k = 8 * word + p.

    join adds a trailing axis, so the last join pairs p with p + 1, the one before p with
    p + 2, the first p with p + 4: element [n, r, i, j, l] is nibble 4i + 2j + l of word r,
    all in one thread's registers, and the reshape moves no data.
    """
    w = tl.join(tl.join(tl.join(q0, q4), tl.join(q2, q6)), tl.join(tl.join(q1, q5), tl.join(q3, q7)))
    return tl.reshape(w, (BLOCK_N, BLOCK_K))


def _unpack_t(words, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, DEQUANT_ASM: tl.constexpr):
    """(BLOCK_N, BLOCK_K // 8) int32 words -> (BLOCK_N, BLOCK_K) fp16 q - 8; k = 8 * word + nibble."""
    q = _nibbles8(words, DEQUANT_ASM)
    return _interleave8(q[0], q[1], q[2], q[3], q[4], q[5], q[6], q[7], BLOCK_N, BLOCK_K)


def _nibble(words, p: tl.constexpr):
    """Nibble p (low first) of each word as fp16 q - 8 (see _nibbles8)."""
    return (((words >> (4 * p)) & 0xF) | 0x6400).to(tl.int16).to(tl.float16, bitcast=True) - 1032.0


def _w4a16_kernel(
    a_ptr, b_ptr, s_ptr, c_ptr, part_ptr, count_ptr,
    M, N, K_SPLIT,
    stride_am, stride_ak,
    stride_bk, stride_bn,
    stride_sg, stride_sn,
    stride_cm, stride_cn,
    SPLIT_K: tl.constexpr,
    GROUP_K: tl.constexpr,
    PER_CHANNEL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    SWAP_AB: tl.constexpr,
    DEQUANT_ASM: tl.constexpr,
    PREFETCH: tl.constexpr,
    RAGGED_M: tl.constexpr,
):
    """One (BLOCK_M, BLOCK_N) tile of C over one K_SPLIT-long slice of k.

    With SPLIT_K > 1 every program stores its fp32 partial tile, then counts
    itself in on a per-tile counter; the program that arrives last adds the
    partials in split order (deterministic) and writes fp16 C, then resets the
    counter, so the whole product is one launch.
    SWAP_AB computes C^T = W^T A^T: n fills the MMA's M side (>= 64 on Hopper's
    warpgroup MMA) when m is a handful of tokens.
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
    mask_m = offs_m < M

    k_start = pid_k * K_SPLIT
    # The weights are loaded transposed, (BLOCK_N, BLOCK_K // 8) words: the 8 nibbles of
    # a word become 8 neighbouring k of one column, in the registers of one thread.
    b_ptrs = b_ptr + offs_n[:, None] * stride_bn + (k_start // 8 + offs_w)[None, :] * stride_bk
    if SWAP_AB:
        a_ptrs = a_ptr + offs_m[None, :] * stride_am + (k_start + offs_k)[:, None] * stride_ak
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    else:
        a_ptrs = a_ptr + offs_m[:, None] * stride_am + (k_start + offs_k)[None, :] * stride_ak
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    # PREFETCH slices of weights are loaded ahead into registers (loop-carried), so that
    # their DRAM latency overlaps the unpack and MMA of the slices before them.
    step = (BLOCK_K // 8) * stride_bk
    if PREFETCH >= 1:
        ahead1 = tl.load(b_ptrs)
    if PREFETCH >= 2:
        ahead2 = tl.load(b_ptrs + step, mask=BLOCK_K < K_SPLIT, other=0)
    for kk in range(0, K_SPLIT, BLOCK_K):
        if PREFETCH == 0:
            words = tl.load(b_ptrs)
        elif PREFETCH == 1:
            words = ahead1
            ahead1 = tl.load(b_ptrs + step, mask=kk + BLOCK_K < K_SPLIT, other=0)
        else:
            words = ahead1
            ahead1 = ahead2
            ahead2 = tl.load(b_ptrs + 2 * step, mask=kk + 2 * BLOCK_K < K_SPLIT, other=0)
        if not PER_CHANNEL:
            scale = tl.load(s_ptr + ((k_start + kk) // GROUP_K) * stride_sg + offs_n * stride_sn)
        if SWAP_AB:
            w_t = _unpack_t(words, BLOCK_N, BLOCK_K, DEQUANT_ASM)  # (BLOCK_N, BLOCK_K) fp16, q - 8
            if not PER_CHANNEL:
                w_t = w_t * scale[:, None]
            a = tl.load(a_ptrs, mask=mask_m[None, :], other=0.0)
            acc = tl.dot(w_t, a, acc)
        else:
            w_t = _unpack_t(words, BLOCK_N, BLOCK_K, DEQUANT_ASM)
            if not PER_CHANNEL:
                w_t = w_t * scale[:, None]
            a = tl.load(a_ptrs, mask=mask_m[:, None], other=0.0)
            acc = tl.dot(a, tl.trans(w_t), acc)
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += step
    if SWAP_AB:
        acc = tl.trans(acc)
    if PER_CHANNEL:
        acc = acc * tl.load(s_ptr + offs_n * stride_sn).to(tl.float32)[None, :]
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    _finish_tile(acc, c_ptrs, mask_m, offs_n < N, part_ptr, count_ptr, pid, pid_k, SPLIT_K, BLOCK_M, BLOCK_N, RAGGED_M)


def _finish_tile(acc, c_ptrs, mask_m, mask_n, part_ptr, count_ptr, tile_id, pid_k, SPLIT_K: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, RAGGED_M: tl.constexpr):
    """Store a fp32 (BLOCK_M, BLOCK_N) tile of C as fp16, or with SPLIT_K > 1 add it to the others.

    With SPLIT_K > 1 every program stores its fp32 partial tile, then counts itself in on
    the tile's counter; the program that arrives last adds the partials in split order
    (deterministic), writes fp16 C and resets the counter, so the product is one launch.
    """
    c_mask = mask_m[:, None] & mask_n[None, :]
    if SPLIT_K == 1:
        tl.store(c_ptrs, acc.to(c_ptrs.dtype.element_ty), mask=c_mask)
    else:
        tile = tl.arange(0, BLOCK_M)[:, None] * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
        parts = part_ptr + tile_id * (SPLIT_K * BLOCK_M * BLOCK_N)
        # RAGGED_M (m not a multiple of BLOCK_M): only the rows of C that exist, since at m = 1 a
        # 16-row tile would move 16x the partial sums; full tiles store unmasked (masks cost ~25 %
        # at m = 256, measured on the H100: benchmarks/w4a16/NOTES.md)
        part_mask = mask_m[:, None] if RAGGED_M else None
        tl.store(parts + pid_k * (BLOCK_M * BLOCK_N) + tile, acc, mask=part_mask)
        tl.debug_barrier()  # every thread's partial is stored before the counter says so
        arrived = tl.atomic_add(count_ptr + tile_id, 1, sem="acq_rel", scope="gpu")
        if arrived == SPLIT_K - 1:
            total = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for i in tl.static_range(SPLIT_K):
                if RAGGED_M:
                    total += tl.load(parts + i * (BLOCK_M * BLOCK_N) + tile, mask=part_mask, other=0.0,
                                     cache_modifier=".cg")
                else:
                    total += tl.load(parts + i * (BLOCK_M * BLOCK_N) + tile, cache_modifier=".cg")
            tl.store(c_ptrs, total.to(c_ptrs.dtype.element_ty), mask=c_mask)
            tl.atomic_xchg(count_ptr + tile_id, 0, sem="relaxed", scope="gpu")  # ready for the next launch


def _nibbles8(words, DEQUANT_ASM: tl.constexpr):
    """The 8 nibbles of each word as 8 fp16 tensors q - 8, nibble p at index p.

    q | 0x6400 is the fp16 bit pattern of 1024 + q: exact q - 8 after subtracting 1032,
    cheaper than an int-to-float conversion per weight (the interpreter's path); the PTX
    does the same two nibbles at a time.
    """
    if DEQUANT_ASM:
        return tl.inline_asm_elementwise(_UNPACK_ASM, "=h,=h,=h,=h,=h,=h,=h,=h,r", [words],
                                         dtype=(tl.float16,) * 8, is_pure=True, pack=1)
    return (_nibble(words, 0), _nibble(words, 1), _nibble(words, 2), _nibble(words, 3),
            _nibble(words, 4), _nibble(words, 5), _nibble(words, 6), _nibble(words, 7))


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
    global _unpack_t, _interleave8, _nibble, _nibbles8, _finish_tile, _UNPACK_ASM
    _UNPACK_ASM = language.constexpr(_UNPACK_PTX)  # a jitted function may read only constexpr globals
    _unpack_t, _interleave8, _nibble = triton.jit(_unpack_t), triton.jit(_interleave8), triton.jit(_nibble)
    _nibbles8, _finish_tile = triton.jit(_nibbles8), triton.jit(_finish_tile)
    # M is not specialized: decode batches of 1, 4, 16 tokens share one compile per configuration.
    return triton.jit(_w4a16_kernel, do_not_specialize=["M"])
