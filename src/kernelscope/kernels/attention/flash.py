"""Triton flash-attention forward pass: ``softmax(q kᵀ · sm_scale) v`` without the scores matrix.

One program owns BLOCK_M query rows of one (batch, head) and streams the keys
and values past them BLOCK_N rows at a time, keeping a running row maximum
``m``, a running denominator ``l`` and an fp32 accumulator (the online softmax
of FlashAttention-2). Scores live in fp32 and use ``exp2`` with ``log2(e)``
folded into the scale.

Inputs are ``(batch, heads, seq, head_dim)``; k and v may have a different
sequence length than q. Tiles move through 4-D TMA tensor descriptors, which
zero-fill reads past the end of a head and clip writes to it, so any sequence
length works without padding. Causal masking is aligned to the bottom-right
corner (query i sees key j iff ``j <= i + seq_k - seq_q``), which is
PyTorch's top-left ``is_causal`` when the lengths are equal. A query row that
sees no key at all (causal with ``seq_q > seq_k``) is defined to be zero.

The key range of a program is split in two loops: blocks every row sees in
full (no mask arithmetic at all) and the few blocks on the diagonal or past
the end of the keys (masked with -inf, guarded against all-masked rows).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

HEAD_DIMS = (16, 32, 64, 128)
DTYPES = (torch.float16, torch.bfloat16)
LOG2_E = 1.4426950408889634


@dataclass(frozen=True)
class FlashConfig:
    """One launch configuration of the kernel (what the autotuner chooses among)."""

    block_m: int
    block_n: int
    num_warps: int
    num_stages: int
    # Hopper warp specialisation (_attn_fwd_ws): num_warps is the consumer warpgroup's 4 warps as
    # Triton counts them; the launch has 3 warpgroups (12 warps, 384 threads).
    warp_specialize: bool = False

    def __str__(self) -> str:
        ws = " warp-specialized" if self.warp_specialize else ""
        return f"BLOCK_M={self.block_m} BLOCK_N={self.block_n} warps={self.num_warps} stages={self.num_stages}{ws}"


# Hopper: BLOCK_M 128 feeds the 64-row wgmma of one or two warpgroups; the
# stages pipeline the TMA loads of K and V. Of the 12 combinations of BLOCK_N
# 64/128, warps 4/8 and stages 2-4, these won or came within 3% somewhere
# (docs/decisions/0003); the rest lost everywhere or did not fit in shared
# memory, and only cost compile time. BLOCK_M 64 (one warpgroup, more CTAs per
# SM) wins at head dim 64; BLOCK_M 256 lost everywhere.
HOPPER_CONFIGS = (
    FlashConfig(128, 64, 4, 2), FlashConfig(128, 64, 4, 3), FlashConfig(128, 64, 4, 4),
    FlashConfig(128, 64, 8, 3), FlashConfig(128, 128, 4, 3), FlashConfig(128, 128, 8, 3),
    FlashConfig(64, 64, 4, 3),
)
# Warp-specialised launches (sm_90 only; each compiles to a TMA producer warpgroup and two
# consumer warpgroups of BLOCK_M / 2 rows, 384 threads, like cuDNN's sm90 kernel).
HOPPER_WS_CONFIGS = (
    FlashConfig(128, 64, 4, 2, True), FlashConfig(128, 64, 4, 3, True), FlashConfig(128, 128, 4, 2, True),
)
# The CPU interpreter: small blocks, so the test sizes cross several blocks.
INTERPRETER_CONFIG = FlashConfig(32, 16, 4, 1)


@triton.jit
def _dot(a, b, acc, UPCAST: tl.constexpr):
    """a @ b (+ acc) in fp32; UPCAST only in the CPU interpreter, whose bf16 dot multiplies
    raw bit patterns (triton-lang/triton#11584). bf16 products are exact in fp32, so the
    result is the one the tensor cores give."""
    if UPCAST:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc)
    return tl.dot(a, b, acc)


@triton.jit
def _round_bf16(x):
    """fp32 to the nearest bf16 value (ties to even), kept in fp32. For the interpreter only:
    its fp32 -> bf16 cast truncates toward zero, where the GPU rounds to nearest."""
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def _attn_blocks(acc, l_i, m_i, q, desc_k, desc_v, off_b, off_h, lo, hi, offs_m, qk_scale, seq_k, causal_offset,
                 BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, MASKED: tl.constexpr, CAUSAL: tl.constexpr,
                 UPCAST: tl.constexpr, FLAT: tl.constexpr = False, WARP_SPEC: tl.constexpr = False):
    """Fold keys [lo, hi) into (acc, l_i, m_i); MASKED blocks may hold keys a row must not see.

    FLAT: k and v are 2-D descriptors over (batch·heads·seq_k, head_dim) and off_b is the head's
    first row (off_h unused); rows past the head's end belong to the next head or are zero-filled,
    and only a MASKED block can hold them. WARP_SPEC: Triton's Hopper warp specialisation (a TMA
    producer warpgroup and two consumer warpgroups of BLOCK_M / 2 rows each)."""
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=WARP_SPEC):
        if FLAT:
            k = desc_k.load([off_b + start_n, 0])
        else:
            k = desc_k.load([off_b, off_h, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        qk = _dot(q, k.T, None, UPCAST)
        if MASKED:
            cols = start_n + offs_n
            keep = cols[None, :] < seq_k
            if CAUSAL:
                keep = keep & (cols[None, :] <= offs_m[:, None] + causal_offset)
            qk = tl.where(keep, qk * qk_scale, float("-inf"))
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            # A row with no visible key yet has m = -inf; subtracting it would give NaN.
            m_sub = tl.where(m_ij == float("-inf"), 0.0, m_ij)
            p = tl.math.exp2(qk - m_sub[:, None])
            alpha = tl.math.exp2(m_i - m_sub)
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            p = tl.math.exp2(qk * qk_scale - m_ij[:, None])
            alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        if FLAT:
            v = desc_v.load([off_b + start_n, 0])
        else:
            v = desc_v.load([off_b, off_h, start_n, 0]).reshape(BLOCK_N, HEAD_DIM)
        acc = acc * alpha[:, None]
        if UPCAST:
            acc = _dot(_round_bf16(p), v, acc, UPCAST)
        else:
            acc = _dot(p.to(q.dtype), v, acc, UPCAST)
        m_i = m_ij
    return acc, l_i, m_i


@triton.jit
def _attn_fwd(desc_q, desc_k, desc_v, desc_o, heads, seq_q, seq_k, qk_scale, SEQ_BUCKET,
              HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr,
              BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # Causal blocks late in the sequence do the most work: start them first.
    start_m = tl.cdiv(seq_q, BLOCK_M) - 1 - tl.program_id(0)
    off_bh = tl.program_id(1)
    off_b = off_bh // heads
    off_h = off_bh % heads
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q = desc_q.load([off_b, off_h, start_m * BLOCK_M, 0]).reshape(BLOCK_M, HEAD_DIM)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        causal_offset = seq_k - seq_q
        hi = tl.minimum(seq_k, (start_m + 1) * BLOCK_M + causal_offset)  # past the last row's last key
        full = tl.minimum(seq_k, start_m * BLOCK_M + causal_offset + 1)  # keys the first row sees
    else:
        causal_offset = 0
        hi = seq_k
        full = seq_k
    hi = tl.maximum(hi, 0)
    full = tl.maximum(full, 0) // BLOCK_N * BLOCK_N
    acc, l_i, m_i = _attn_blocks(acc, l_i, m_i, q, desc_k, desc_v, off_b, off_h, 0, full, offs_m, qk_scale, seq_k,
                                 causal_offset, BLOCK_N, HEAD_DIM, False, CAUSAL, UPCAST)
    acc, l_i, m_i = _attn_blocks(acc, l_i, m_i, q, desc_k, desc_v, off_b, off_h, full, hi, offs_m, qk_scale, seq_k,
                                 causal_offset, BLOCK_N, HEAD_DIM, True, CAUSAL, UPCAST)
    # Rows that saw no key have acc = 0 and l = 0: their output is 0, not 0/0.
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    if UPCAST:
        out = _round_bf16(out)
    desc_o.store([off_b, off_h, start_m * BLOCK_M, 0], out.to(q.dtype).reshape(1, 1, BLOCK_M, HEAD_DIM))


@triton.jit
def _attn_fwd_ws(desc_q, desc_k, desc_v, out_ptr, heads, seq_q, seq_k, qk_scale, SEQ_BUCKET,
                 HEAD_DIM: tl.constexpr, CAUSAL: tl.constexpr, UPCAST: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, KEY_ALIGN: tl.constexpr, WARP_SPEC: tl.constexpr):
    """_attn_fwd in the shape Triton 3.6's Hopper warp specialisation compiles (docs/decisions/0003).

    The pass splits the BLOCK_M rows between two consumer warpgroups beside a TMA producer
    warpgroup (FlashAttention-3's layout). It cannot split a 4-D descriptor's reshape nor a
    descriptor store of the whole tile, and it fails on a second loop after the specialised one
    (and silently does nothing when the loop holds a branch), so: q, k, v are read through 2-D
    descriptors over (batch·heads·seq, head_dim), the output is written by a masked pointer store
    (out is contiguous), and there is ONE key loop, masked in every block when causal or when seq_k
    is not a multiple of BLOCK_N (KEY_ALIGN: the largest of 128, 64, 16, 1 dividing seq_k); rows of
    a tail block past the head's end belong to the next head and are masked out."""
    MASKED: tl.constexpr = CAUSAL or (KEY_ALIGN % BLOCK_N != 0)
    start_m = tl.cdiv(seq_q, BLOCK_M) - 1 - tl.program_id(0)
    off_bh = tl.program_id(1)
    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    q = desc_q.load([off_bh * seq_q + start_m * BLOCK_M, 0])

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    if CAUSAL:
        causal_offset = seq_k - seq_q
        hi = tl.maximum(tl.minimum(seq_k, (start_m + 1) * BLOCK_M + causal_offset), 0)
    else:
        causal_offset = 0
        hi = seq_k
    acc, l_i, m_i = _attn_blocks(acc, l_i, m_i, q, desc_k, desc_v, off_bh * seq_k, 0, 0, hi, offs_m, qk_scale, seq_k,
                                 causal_offset, BLOCK_N, HEAD_DIM, MASKED, CAUSAL, UPCAST, True, WARP_SPEC)
    out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
    if UPCAST:
        out = _round_bf16(out)
    offs_d = tl.arange(0, HEAD_DIM)
    rows = off_bh.to(tl.int64) * seq_q + offs_m
    tl.store(out_ptr + rows[:, None] * HEAD_DIM + offs_d[None, :], out.to(q.dtype), mask=(offs_m < seq_q)[:, None])


def _set_block_shapes(nargs: dict) -> None:
    """Autotuner pre-hook: the descriptors' tile shapes follow the config being tried."""
    d = nargs["HEAD_DIM"]
    nargs["desc_q"].block_shape = [1, 1, nargs["BLOCK_M"], d]
    nargs["desc_o"].block_shape = [1, 1, nargs["BLOCK_M"], d]
    nargs["desc_k"].block_shape = [1, 1, nargs["BLOCK_N"], d]
    nargs["desc_v"].block_shape = [1, 1, nargs["BLOCK_N"], d]


def _set_ws_block_shapes(nargs: dict) -> None:
    nargs["desc_q"].block_shape = [nargs["BLOCK_M"], nargs["HEAD_DIM"]]
    nargs["desc_k"].block_shape = [nargs["BLOCK_N"], nargs["HEAD_DIM"]]
    nargs["desc_v"].block_shape = [nargs["BLOCK_N"], nargs["HEAD_DIM"]]


# Key: head dim, causal and the power-of-two bucket of the key length; a new
# sequence length in a known bucket reuses the tuned config.
_attn_fwd_tuned = triton.autotune(
    configs=[triton.Config({"BLOCK_M": c.block_m, "BLOCK_N": c.block_n}, num_warps=c.num_warps,
                           num_stages=c.num_stages, pre_hook=_set_block_shapes) for c in HOPPER_CONFIGS],
    key=["HEAD_DIM", "CAUSAL", "SEQ_BUCKET"],
)(_attn_fwd)


_attn_fwd_ws_tuned = triton.autotune(
    configs=[triton.Config({"BLOCK_M": c.block_m, "BLOCK_N": c.block_n}, num_warps=c.num_warps,
                           num_stages=c.num_stages, pre_hook=_set_ws_block_shapes) for c in HOPPER_WS_CONFIGS],
    key=["HEAD_DIM", "CAUSAL", "SEQ_BUCKET", "KEY_ALIGN"],
)(_attn_fwd_ws)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def _describe(t: object) -> str:
    if isinstance(t, torch.Tensor):
        return f"{t.dtype} tensor of shape {tuple(t.shape)} on {t.device}"
    return type(t).__name__


def check_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float | None) -> None:
    """Raise one ValueError, in one sentence, for anything the kernel cannot take."""
    where = "flash_attention"
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, torch.Tensor) or t.dim() != 4 or t.dtype not in DTYPES:
            raise ValueError(f"{where}: {name} must be a float16 or bfloat16 tensor of shape "
                             f"(batch, heads, seq, head_dim), got {_describe(t)}.")
    b, h, s_q, d = q.shape
    if d not in HEAD_DIMS:
        raise ValueError(f"{where}: head_dim must be one of {', '.join(map(str, HEAD_DIMS))}, got {d}.")
    if k.dtype != q.dtype or v.dtype != q.dtype:
        raise ValueError(f"{where}: q, k and v must share one dtype, got {q.dtype}, {k.dtype} and {v.dtype}.")
    if k.shape != v.shape or k.shape[:2] != (b, h) or k.shape[3] != d:
        raise ValueError(f"{where}: k and v must have shape ({b}, {h}, seq_k, {d}) to match q "
                         f"{tuple(q.shape)}, got {tuple(k.shape)} and {tuple(v.shape)}.")
    if min(b, h, s_q, k.shape[2]) < 1:
        raise ValueError(f"{where}: every dimension must be at least 1, got q {tuple(q.shape)} and k {tuple(k.shape)}.")
    if q.device != k.device or q.device != v.device:
        raise ValueError(f"{where}: q, k and v must be on one device, got {q.device}, {k.device} and {v.device}.")
    if q.device.type == "cpu" and not _interpreting():
        raise ValueError(f"{where}: CPU tensors need the Triton interpreter; set TRITON_INTERPRET=1 before importing.")
    if sm_scale is not None and not (isinstance(sm_scale, (int, float)) and math.isfinite(sm_scale) and sm_scale > 0):
        raise ValueError(f"{where}: sm_scale must be a finite positive number, got {sm_scale!r}.")


def _strides(t: torch.Tensor) -> list[int]:
    """t's strides, with those of size-1 dims (never stepped) replaced by contiguous ones."""
    dense = [math.prod(t.shape[i + 1:]) for i in range(t.dim())]
    return [st if n > 1 else dense[i] for i, (st, n) in enumerate(zip(t.stride(), t.shape))]


def _tma_ready(t: torch.Tensor) -> torch.Tensor:
    """TMA needs a unit last stride, 16-byte aligned positive other strides and base; copy otherwise."""
    st = _strides(t)
    ok = st[-1] == 1 and all(s > 0 and s * t.element_size() % 16 == 0 for s in st[:-1]) and t.data_ptr() % 16 == 0
    return t if ok else t.contiguous()


def _descriptor(t: torch.Tensor, rows: int) -> TensorDescriptor:
    return TensorDescriptor(t, list(t.shape), _strides(t), [1, 1, rows, t.shape[-1]])


def _bucket(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def _key_align(n: int) -> int:
    return next(a for a in (128, 64, 16, 1) if n % a == 0)


def _flat_rows(t: torch.Tensor) -> torch.Tensor:
    """t as (batch·heads·seq, head_dim) rows: a view when the layout allows, else a contiguous copy."""
    flat = t.reshape(-1, t.shape[-1])
    return flat if flat.stride(-1) == 1 and flat.data_ptr() % 16 == 0 else flat.contiguous()


def _flash_ws(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, scale: float,
              config: FlashConfig | None, warp_spec: bool = True) -> torch.Tensor:
    """The warp-specialised kernel: 2-D descriptors over the flattened rows, contiguous output.
    ``warp_spec=False`` compiles the same code without the specialisation (an experiment's control)."""
    b, h, s_q, d = q.shape
    s_k = k.shape[2]
    qf, kf, vf = _flat_rows(q), _flat_rows(k), _flat_rows(v)
    out = torch.empty((b, h, s_q, d), dtype=q.dtype, device=q.device)
    bm = config.block_m if config else HOPPER_WS_CONFIGS[0].block_m
    bn = config.block_n if config else HOPPER_WS_CONFIGS[0].block_n
    descs = [
        TensorDescriptor(t, list(t.shape), list(t.stride()), [rows, d]) for t, rows in ((qf, bm), (kf, bn), (vf, bn))
    ]
    args = (*descs, out, h, s_q, s_k, scale, _bucket(s_k))
    flags = {"HEAD_DIM": d, "CAUSAL": bool(causal), "UPCAST": _interpreting() and q.dtype == torch.bfloat16,
             "KEY_ALIGN": _key_align(s_k), "WARP_SPEC": warp_spec and not _interpreting()}

    def grid(meta: dict) -> tuple[int, int]:
        return (triton.cdiv(s_q, meta["BLOCK_M"]), b * h)

    if config is None:
        _attn_fwd_ws_tuned[grid](*args, **flags)
    else:
        _attn_fwd_ws[grid](*args, **flags, BLOCK_M=config.block_m, BLOCK_N=config.block_n,
                           num_warps=config.num_warps, num_stages=config.num_stages)
    return out


def _use_warp_specialized(q: torch.Tensor) -> bool:
    """Never by default: the warp-specialised kernel compiles, but its first launch was measured not
    to finish on an H100 (docs/decisions/0003), so it runs only when a config asks for it."""
    return False


def gluon_runs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> bool:
    """Whether the default path is a Gluon kernel (gluon_hopper.py: sm_90, seq_q == seq_k a multiple of 128,
    head dim 64 or 128): at head dim 128 the warp-specialised one, measured faster than this file's kernel
    (docs/decisions/0003)."""
    if not q.is_cuda:
        return False
    try:
        from .gluon_hopper import supported
    except ImportError:  # a Triton without Gluon (before 3.4): this file's kernel
        return False
    return supported(q, k, v) is None


def flash_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    sm_scale: float | None = None, config: FlashConfig | None = None) -> torch.Tensor:
    """Attention forward, ``(batch, heads, seq_q, head_dim)`` out, in q's dtype.

    ``sm_scale`` defaults to ``1 / sqrt(head_dim)``. ``config`` pins a launch
    configuration of this file's kernel (``config.warp_specialize`` picks the experimental
    warp-specialised one). By default, inputs the Gluon kernel takes on an sm_90 GPU go to it
    (``gluon_runs``); the rest to this file's kernel, whose autotuner picks one of HOPPER_CONFIGS
    (the interpreter uses INTERPRETER_CONFIG).
    """
    check_inputs(q, k, v, sm_scale)
    if config is None and not _interpreting() and gluon_runs(q, k, v):
        from .gluon_hopper import hopper_attention

        return hopper_attention(q, k, v, causal, sm_scale)
    if config.warp_specialize if config is not None else (not _interpreting() and _use_warp_specialized(q)):
        scale = (1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else float(sm_scale)) * LOG2_E
        return _flash_ws(q, k, v, causal, scale, config)
    b, h, s_q, d = q.shape
    s_k = k.shape[2]
    q, k, v = _tma_ready(q), _tma_ready(k), _tma_ready(v)
    out = torch.empty_like(q)
    scale = (1.0 / math.sqrt(d) if sm_scale is None else float(sm_scale)) * LOG2_E
    if config is None and _interpreting():
        config = INTERPRETER_CONFIG
    bm = config.block_m if config else HOPPER_CONFIGS[0].block_m
    bn = config.block_n if config else HOPPER_CONFIGS[0].block_n
    descs = (_descriptor(q, bm), _descriptor(k, bn), _descriptor(v, bn), _descriptor(out, bm))
    args = (*descs, h, s_q, s_k, scale, _bucket(s_k))
    # The interpreter's bf16 dot and casts are wrong (see _dot, _round_bf16): emulate the GPU's.
    flags = {"HEAD_DIM": d, "CAUSAL": bool(causal), "UPCAST": _interpreting() and q.dtype == torch.bfloat16}

    def grid(meta: dict) -> tuple[int, int]:
        return (triton.cdiv(s_q, meta["BLOCK_M"]), b * h)

    if config is None:
        _attn_fwd_tuned[grid](*args, **flags)
    else:
        _attn_fwd[grid](*args, **flags, BLOCK_M=config.block_m, BLOCK_N=config.block_n,
                        num_warps=config.num_warps, num_stages=config.num_stages)
    return out


def tuned_config(head_dim: int, causal: bool, seq_k: int, warp_specialize: bool = False) -> FlashConfig | None:
    """The config the autotuner chose for this key, once flash_attention has run on it."""
    tuner = _attn_fwd_ws_tuned if warp_specialize else _attn_fwd_tuned
    for key, cfg in tuner.cache.items():
        if tuple(key[:3]) == (head_dim, bool(causal), _bucket(seq_k)):
            return FlashConfig(cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"], cfg.num_warps, cfg.num_stages,
                               warp_specialize)
    return None
