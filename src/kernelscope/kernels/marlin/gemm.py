"""Triton W4A16 GEMM, ``C = A @ dequant(B, s)``, for Marlin-quantized weights.

Marlin's own layout is tailored to the register fragments of the CUDA ``mma``
instruction, which Triton does not expose; gathering it inside a Triton kernel
would turn every weight load into a scatter.  So the weights are converted
once, by :func:`to_kernel_layout`, into a layout that Triton loads well:

* ``Bk``: int32 ``(k // 8, n)``, in blocks of ``PACK_K = 128`` rows of k: word
  ``(16 b + j, c)`` holds ``q[128 b + 32 i + 2 j, c]`` in nibble ``i`` and
  ``q[128 b + 32 i + 2 j + 1, c]`` in nibble ``i + 4`` (i = 0..3, low nibble
  first).  A row of words is contiguous along n, so a block of weights is one
  dense 2-D load that vectorizes along n, each word read once.  The unpack
  turns nibbles i and i + 4 into one f16x2 register: two neighbouring k of
  32-deep slice i, as the MMA's register operand holds them, so the unpacked
  weights go to the tensor cores as they are (no shuffle, no trip through
  shared memory).
* ``sk``: plain fp16 scales ``(k // groupsize, n)`` (Marlin's permutation undone).

Dequantization is ``w = (q - 8) * scale``.  The MMAs take q - 8 (exact in fp16)
and the scale multiplies their fp32 sums: once per block of k with groups of
128 (a block is one group), once at the end with one group, as Marlin does.

triton is imported lazily (on the first launch), so that this module and the
format can be imported on machines without triton, and so that the
``TRITON_INTERPRET`` switch is read when the kernel is built, not at import.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Callable

import torch

from .format import NIBBLES, ZERO, group_rows, unpack
from .unpack_ptx import UNPACK_PTX as _UNPACK_PTX

tl: Any = None  # triton.language, bound by triton_kernel() before the first compile
_UNPACK_ASM: Any = None  # _UNPACK_PTX as a triton constexpr, bound by triton_kernel()
block_clock: Any = None  # kernelscope's block recorder helpers (collect.instrument), bound by triton_kernel()
block_record: Any = None

_SHIFTS = tuple(4 * i for i in range(NIBBLES))
PACK_K = 128  # rows of k per block of the kernel layout; BLOCK_K is one block
GROUP_M = 8  # row tiles per group of the grouped tile order (L2 reuse of the weights)
_PAIRS = NIBBLES // 2  # f16x2 registers per word, one per 32-deep slice of a block


def to_kernel_layout(B: torch.Tensor, s: torch.Tensor, groupsize: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Convert Marlin ``(B, s)`` once into the ``(Bk, sk)`` layout of the kernel.

    Done once per weight (at load time), not per call.  See the module docstring
    for the layout; the conversion is lossless, via :func:`format.unpack`.
    """
    q, scales = unpack(B, s, groupsize)
    k, n = q.shape
    # q[128 b + 32 i + 2 j + h, c] -> nibble i + 4 h of word (16 b + j, c)
    vals = q.to(torch.int64).reshape(k // PACK_K, _PAIRS, PACK_K // NIBBLES, 2, n)  # (b, i, j, h, c)
    vals = vals.permute(0, 2, 3, 1, 4).reshape(k // PACK_K, PACK_K // NIBBLES, NIBBLES, n)  # (b, j, 4h + i, c)
    shifts = torch.tensor(_SHIFTS, dtype=torch.int64, device=q.device).view(1, 1, NIBBLES, 1)
    words = (vals << shifts).sum(dim=2).reshape(k // NIBBLES, n)
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


def _nibble(words, p: tl.constexpr):
    """Nibble p (low first) of each word as fp16 q - 8 (see _unpack_slices)."""
    return (((words >> (4 * p)) & 0xF) | 0x6400).to(tl.int16).to(tl.float16, bitcast=True) - 1032.0


def _halves(pair, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """int32 f16x2 registers (BLOCK_N, BLOCK_K // 8) -> fp16 (BLOCK_N, BLOCK_K // 4), low half first.

    join puts the two halves side by side in one thread, so the result is the register as it was.
    """
    lo = pair.to(tl.int16).to(tl.float16, bitcast=True)
    hi = (pair >> 16).to(tl.int16).to(tl.float16, bitcast=True)
    return tl.reshape(tl.join(lo, hi), (BLOCK_N, BLOCK_K // 4))


def _concat_k(x, y, BLOCK_N: tl.constexpr, K_EACH: tl.constexpr):
    """(BLOCK_N, K_EACH) twice -> (BLOCK_N, 2 K_EACH), x's k first; registers stay where they are."""
    return tl.reshape(tl.permute(tl.join(x, y), (0, 2, 1)), (BLOCK_N, 2 * K_EACH))


def _unpack_block(words, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, DEQUANT_ASM: tl.constexpr):
    """(BLOCK_N, BLOCK_K // 8) words -> (BLOCK_N, BLOCK_K) fp16 q - 8 in k order.

    Slice i (k = 32 i + 2 j + h) is nibble i + 4 h of word j. q | 0x6400 is the fp16 bit pattern
    of 1024 + q: exact q - 8 after subtracting 1032, cheaper than an int-to-float conversion per
    weight (the interpreter's path); the PTX does the same two nibbles per instruction. The four
    slices are concatenated along k, so one dot takes the block and Triton issues its MMAs back to
    back with one wait, where four dots wait after each (SASS compiled for sm_90).
    """
    if DEQUANT_ASM:
        t0, t1, t2, t3 = tl.inline_asm_elementwise(_UNPACK_ASM, "=r,=r,=r,=r,r", [words],
                                                   dtype=(tl.int32,) * 4, is_pure=True, pack=1)
        s0, s1 = _halves(t0, BLOCK_N, BLOCK_K), _halves(t1, BLOCK_N, BLOCK_K)
        s2, s3 = _halves(t2, BLOCK_N, BLOCK_K), _halves(t3, BLOCK_N, BLOCK_K)
    else:
        s0 = tl.reshape(tl.join(_nibble(words, 0), _nibble(words, 4)), (BLOCK_N, BLOCK_K // 4))
        s1 = tl.reshape(tl.join(_nibble(words, 1), _nibble(words, 5)), (BLOCK_N, BLOCK_K // 4))
        s2 = tl.reshape(tl.join(_nibble(words, 2), _nibble(words, 6)), (BLOCK_N, BLOCK_K // 4))
        s3 = tl.reshape(tl.join(_nibble(words, 3), _nibble(words, 7)), (BLOCK_N, BLOCK_K // 4))
    return _concat_k(_concat_k(s0, s1, BLOCK_N, BLOCK_K // 4), _concat_k(s2, s3, BLOCK_N, BLOCK_K // 4),
                     BLOCK_N, BLOCK_K // 2)


def _w4a16_kernel(
    a_ptr, b_ptr, s_ptr, c_ptr, part_ptr, count_ptr, records_ptr,
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
    DEQUANT_ASM: tl.constexpr,
    RAGGED_M: tl.constexpr,
    TMA: tl.constexpr,
    RECORD: tl.constexpr,
):
    """One (BLOCK_M, BLOCK_N) tile of C over one K_SPLIT-long slice of k, as the swapped product
    C^T = W^T A^T: n fills the MMA's M side (>= 64 on Hopper's warpgroup MMA) when m is a handful of tokens.

    With SPLIT_K > 1 the partial tiles are added inside the launch (:func:`_finish_tile`).
    DEQUANT_ASM: the PTX unpack (GPU); the interpreter runs the plain Triton unpack.
    TMA: a_ptr and b_ptr are tensor descriptors (sm_90 and later). RECORD: each program writes
    the block recorder's row (SM, start and end time).
    """
    t_start = block_clock(RECORD)  # kernelscope's block recorder: SM, start and end time per program
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
    offs_j = tl.arange(0, BLOCK_K // 8)  # word rows of a block
    offs_k = tl.arange(0, BLOCK_K)
    mask_m = offs_m < M

    k_start = pid_k * K_SPLIT
    acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    if not TMA:
        # The weights are loaded transposed, (BLOCK_N, BLOCK_K // 8) words, so that the unpacked
        # block is an MMA operand of n x k (the n side of the swapped product) as it comes.
        b_ptrs = b_ptr + offs_n[:, None] * stride_bn + (k_start // 8 + offs_j)[None, :] * stride_bk
        a_ptrs = a_ptr + offs_m[None, :] * stride_am + (k_start + offs_k)[:, None] * stride_ak
    for kk in range(0, K_SPLIT, BLOCK_K):
        if TMA:  # b_ptr and a_ptr are tensor descriptors: one bulk copy per tile, zero-filled past m
            words = tl.trans(b_ptr.load([(k_start + kk) // 8, pid_n * BLOCK_N]))
            a = tl.trans(a_ptr.load([pid_m * BLOCK_M, k_start + kk]))
        else:
            words = tl.load(b_ptrs)
            a = tl.load(a_ptrs, mask=mask_m[None, :], other=0.0)
            a_ptrs += BLOCK_K * stride_ak
            b_ptrs += (BLOCK_K // 8) * stride_bk
        w = _unpack_block(words, BLOCK_N, BLOCK_K, DEQUANT_ASM)  # (BLOCK_N, BLOCK_K) fp16 q - 8
        if PER_CHANNEL:  # one scale per column, applied at the end
            acc = tl.dot(w, a, acc)
        else:
            # A block is one scale group: its sum is taken unscaled (q - 8 and the products are
            # exact in the MMA), then scaled once in fp32, not weight by weight.
            part = tl.dot(w, a)
            scale = tl.load(s_ptr + ((k_start + kk) // GROUP_K) * stride_sg + offs_n * stride_sn).to(tl.float32)
            acc += part * scale[:, None]
    acc = tl.trans(acc)
    if PER_CHANNEL:
        acc = acc * tl.load(s_ptr + offs_n * stride_sn).to(tl.float32)[None, :]
    c_ptrs = c_ptr + offs_m[:, None] * stride_cm + offs_n[None, :] * stride_cn
    _finish_tile(acc, c_ptrs, mask_m, offs_n < N, part_ptr, count_ptr, pid, pid_k, SPLIT_K, BLOCK_M, BLOCK_N, RAGGED_M)
    block_record(records_ptr, t_start, RECORD)


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
        # 16-row tile would move 16x the partial sums; full tiles store unmasked (cheaper).
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


@lru_cache(maxsize=None)
def triton_kernel() -> Callable:
    """Import triton and jit the kernel on first use (see the module docstring)."""
    global tl
    try:
        import triton
        import triton.language as language
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("w4a16_matmul needs triton; install it or use reference_matmul.") from exc
    tl = language
    from kernelscope.collect.instrument import triton_blocks

    global block_clock, block_record
    block_clock, block_record = triton_blocks.block_clock, triton_blocks.block_record
    global _nibble, _halves, _concat_k, _unpack_block, _finish_tile, _UNPACK_ASM
    _UNPACK_ASM = language.constexpr(_UNPACK_PTX)  # a jitted function may read only constexpr globals
    _nibble, _halves, _concat_k = triton.jit(_nibble), triton.jit(_halves), triton.jit(_concat_k)
    _unpack_block = triton.jit(_unpack_block)
    _finish_tile = triton.jit(_finish_tile)
    # M is not specialized: decode batches of 1, 4, 16 tokens share one compile per configuration.
    return triton.jit(_w4a16_kernel, do_not_specialize=["M"])
