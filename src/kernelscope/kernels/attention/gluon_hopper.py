"""Flash-attention forward for Hopper in Gluon (Triton 3.6's explicit-layout dialect), FlashAttention-3's order.

Triton's `tl.dot` waits for each QK^T before the softmax that reads it and cannot keep a warpgroup MMA in flight
across it (docs/decisions/0003). Gluon issues the warpgroup MMAs itself (`warpgroup_mma(...,
is_async=True)`, `warpgroup_mma_wait`) and moves K and V through shared memory with TMA copies and mbarriers it
allocates, so each key block is processed in the order FlashAttention-3 gives one warpgroup:

    issue S_j = Q K_j^T;  issue O += P_{j-1} V_{j-1};  wait for S_j;  softmax(S_j) -> P_j while the PV MMA runs;
    wait for the PV MMA;  rescale O by exp2(m_old - m_new)

Scores are fp32, exp2 with log2(e) folded into the scale, as in ``flash.py``. K and V blocks are double-buffered
(STAGES copies, one mbarrier each); a buffer is reloaded once the MMA that read it has been waited for.
Scope: sm_90, fp16/bf16, head dim 64 or 128, seq_q == seq_k a multiple of BLOCK_M, causal (top-left, as PyTorch's
``is_causal``) or not; ``flash.py`` handles every other case. The result is checked against SDPA by the tests on
the GPU (tests/gpu/test_attention_gpu.py).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.language.nvidia.hopper import fence_async_shared
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

LOG2_E = 1.4426950408889634
_GL_DTYPES = {torch.float16: gl.float16, torch.bfloat16: gl.bfloat16}


@dataclass(frozen=True)
class GluonConfig:
    """One launch of the Gluon kernel. The default, one warpgroup for 128 query rows with 64-key blocks and two
    K/V stages (98 KB of shared memory: two programs per SM), was the fastest of the launches measured at head dim
    128 (docs/decisions/0003)."""

    block_m: int = 128
    block_n: int = 64
    num_warps: int = 4
    stages: int = 2

    def __str__(self) -> str:
        return f"gluon BLOCK_M={self.block_m} BLOCK_N={self.block_n} warps={self.num_warps} stages={self.stages}"


@gluon.jit
def _softmax_block(s, m_i, l_i, qk_scale, q_start, start_n, s_layout: gl.constexpr, CAUSAL: gl.constexpr,
                   BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr):
    """One key block of the online softmax: (p, alpha, m, l). Causal blocks that reach past the diagonal mask
    the keys a row must not see (the first block always holds key 0, so no row's maximum stays -inf)."""
    if CAUSAL:
        if start_n + BLOCK_N > q_start:
            rows = q_start + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
            cols = start_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
            s = gl.where(gl.expand_dims(cols, 0) <= gl.expand_dims(rows, 1), s, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(s, 1) * qk_scale)
    p = gl.exp2(s * qk_scale - gl.expand_dims(m_new, 1))
    alpha = gl.exp2(m_i - m_new)
    l_i = l_i * alpha + gl.sum(p, 1)
    return p, alpha, m_new, l_i


@gluon.jit
def _load_kv(desc, bars, smem, index, row0, n, STAGES: gl.constexpr, BLOCK_N: gl.constexpr):
    """TMA copy of key/value block ``index`` (if it exists) into its stage."""
    stage = index % STAGES
    mbarrier.expect(bars.index(stage), desc.block_type.nbytes, pred=index < n)
    tma.async_copy_global_to_shared(desc, [row0 + index * BLOCK_N, 0], bars.index(stage), smem.index(stage),
                                    pred=index < n)


@gluon.jit
def _release(free_bars, ready_bars, desc, smem, stage, reload_index, row0, n, STAGES: gl.constexpr,
             BLOCK_N: gl.constexpr, WS: gl.constexpr):
    """A stage's MMA is done: tell the producer (warp-specialised), or reload the stage with block reload_index."""
    if WS:
        mbarrier.arrive(free_bars.index(stage), count=1)
    else:
        _load_kv(desc, ready_bars, smem, reload_index, row0, n, STAGES, BLOCK_N)


@gluon.jit
def _key_loop(q, q_bar, k_smem, v_smem, k_ready, v_ready, k_free, v_free, k_desc, v_desc, row0, n, q_start, qk_scale,
              s_layout: gl.constexpr, o_layout: gl.constexpr, ROWS: gl.constexpr, HEAD_DIM: gl.constexpr,
              BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr, WS: gl.constexpr):
    """FlashAttention-3's loop for ROWS query rows over n key blocks: returns (O unnormalised, row sums).
    Per block j: issue S_j = Q K_j^T and O += P_{j-1} V_{j-1}; wait for S_j (the PV MMA may run on); softmax;
    wait for the PV MMA; rescale O. A stage is released (_release) once the MMA that read it is done."""
    dtype: gl.constexpr = k_desc.dtype
    p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    s_zero = gl.zeros([ROWS, BLOCK_N], gl.float32, layout=s_layout)
    acc = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=o_layout)
    m_i = gl.full([ROWS], float("-inf"), gl.float32, layout=gl.SliceLayout(1, s_layout))
    l_i = gl.zeros([ROWS], gl.float32, layout=gl.SliceLayout(1, s_layout))

    # block 0: scores and softmax, nothing to overlap yet
    mbarrier.wait(q_bar, 0)
    mbarrier.wait(k_ready.index(0), 0)
    s = warpgroup_mma(q, k_smem.index(0).permute((1, 0)), s_zero, use_acc=False)
    _release(k_free, k_ready, k_desc, k_smem, 0, STAGES, row0, n, STAGES, BLOCK_N, WS)
    p, alpha, m_i, l_i = _softmax_block(s, m_i, l_i, qk_scale, q_start, 0, s_layout, CAUSAL, ROWS, BLOCK_N)
    p_op = gl.convert_layout(p.to(dtype), p_layout)

    for j in range(1, n):
        stage = j % STAGES
        prev = (j - 1) % STAGES
        mbarrier.wait(k_ready.index(stage), (j // STAGES) & 1)
        s_tok = warpgroup_mma(q, k_smem.index(stage).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        mbarrier.wait(v_ready.index(prev), ((j - 1) // STAGES) & 1)
        o_tok = warpgroup_mma(p_op, v_smem.index(prev), acc, is_async=True)
        s = warpgroup_mma_wait(num_outstanding=1, deps=(s_tok, ))  # S_j done; the PV MMA may still run
        _release(k_free, k_ready, k_desc, k_smem, stage, j + STAGES, row0, n, STAGES, BLOCK_N, WS)
        p, alpha, m_i, l_i = _softmax_block(s, m_i, l_i, qk_scale, q_start, j * BLOCK_N, s_layout, CAUSAL,
                                            ROWS, BLOCK_N)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(o_tok, ))
        _release(v_free, v_ready, v_desc, v_smem, prev, j - 1 + STAGES, row0, n, STAGES, BLOCK_N, WS)
        acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
        p_op = gl.convert_layout(p.to(dtype), p_layout)

    last = (n - 1) % STAGES
    mbarrier.wait(v_ready.index(last), ((n - 1) // STAGES) & 1)
    acc = warpgroup_mma(p_op, v_smem.index(last), acc)
    if WS:
        mbarrier.arrive(v_free.index(last), count=1)
    return acc, l_i


@gluon.jit
def _program_rows(seq, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
    """This program's rows: the first row of its (batch, head) in the 2-D views, its first query row, and how many
    key blocks it visits (causal: up to its diagonal; the longest rows are handed out first)."""
    n_m = seq // BLOCK_M
    pid = gl.program_id(0)
    if CAUSAL:
        start_m = n_m - 1 - pid
    else:
        start_m = pid
    row0 = gl.program_id(1) * seq
    q_start = start_m * BLOCK_M
    if CAUSAL:
        n = (q_start + BLOCK_M) // BLOCK_N
    else:
        n = seq // BLOCK_N
    return row0, q_start, n


@gluon.jit
def _attn_fwd_gluon(q_desc, k_desc, v_desc, o_desc, seq, qk_scale, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
                    BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr, num_warps: gl.constexpr):
    row0, q_start, n = _program_rows(seq, BLOCK_M, BLOCK_N, CAUSAL)
    dtype: gl.constexpr = q_desc.dtype

    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)

    q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], q_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_bars.index(i), count=1)
        mbarrier.init(v_bars.index(i), count=1)

    mbarrier.expect(q_bar, q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [row0 + q_start, 0], q_bar, q_smem)
    for i in gl.static_range(STAGES):
        _load_kv(k_desc, k_bars, k_smem, i, row0, n, STAGES, BLOCK_N)
        _load_kv(v_desc, v_bars, v_smem, i, row0, n, STAGES, BLOCK_N)

    acc, l_i = _key_loop(q_smem, q_bar, k_smem, v_smem, k_bars, v_bars, k_bars, v_bars, k_desc, v_desc, row0, n,
                         q_start, qk_scale, s_layout, o_layout, BLOCK_M, HEAD_DIM, BLOCK_N, CAUSAL, STAGES, False)

    mbarrier.invalidate(q_bar)
    for i in gl.static_range(STAGES):
        mbarrier.invalidate(k_bars.index(i))
        mbarrier.invalidate(v_bars.index(i))
    out = acc / gl.expand_dims(gl.convert_layout(l_i, row_o), 1)
    o_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], o_desc.layout)
    o_smem.store(out.to(dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(o_desc, [row0 + q_start, 0], o_smem)
    tma.store_wait(pendings=0)


def supported(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, config: GluonConfig = GluonConfig()) -> str | None:
    """None when the Gluon kernel runs these inputs, else why not (one sentence)."""
    if not q.is_cuda or torch.cuda.get_device_capability(q.device)[0] != 9:
        return "the Gluon kernel is written for sm_90 (Hopper) GPUs"
    if q.dtype not in _GL_DTYPES or not (q.dtype == k.dtype == v.dtype):
        return "the Gluon kernel takes fp16 or bf16 q, k and v of one dtype"
    if q.dim() != 4 or q.shape != k.shape or q.shape != v.shape:
        return "the Gluon kernel takes (batch, heads, seq, head_dim) q, k and v of one shape (seq_q == seq_k)"
    if q.shape[-1] not in (64, 128):
        return "the Gluon kernel takes head dim 64 or 128"
    if q.shape[2] % config.block_m:
        return f"the Gluon kernel takes a sequence length that is a multiple of {config.block_m}"
    return None


def _operands(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, sm_scale: float | None, q_rows: int,
              block_n: int) -> tuple[torch.Tensor, tuple[TensorDescriptor, ...], float]:
    """(out as (b·h·seq, d) rows, TMA descriptors of q, k, v, out over those rows, qk scale with log2(e))."""
    b, h, seq, d = q.shape
    q2, k2, v2 = (t.contiguous().view(b * h * seq, d) for t in (q, k, v))
    out = torch.empty_like(q2)
    gdt = _GL_DTYPES[q.dtype]
    q_layout = gl.NVMMASharedLayout.get_default_for([q_rows, d], gdt)
    kv_layout = gl.NVMMASharedLayout.get_default_for([block_n, d], gdt)
    descs = (TensorDescriptor.from_tensor(q2, [q_rows, d], q_layout),
             TensorDescriptor.from_tensor(k2, [block_n, d], kv_layout),
             TensorDescriptor.from_tensor(v2, [block_n, d], kv_layout),
             TensorDescriptor.from_tensor(out, [q_rows, d], q_layout))
    return out, descs, (d ** -0.5 if sm_scale is None else sm_scale) * LOG2_E


def gluon_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    sm_scale: float | None = None, config: GluonConfig = GluonConfig()) -> torch.Tensor:
    """``softmax(q k^T * sm_scale) v`` for (batch, heads, seq, head_dim) inputs on a Hopper GPU (see ``supported``)."""
    why = supported(q, k, v, config)
    if why:
        raise ValueError(f"gluon_attention: {why}.")
    b, h, seq, d = q.shape
    out, (q_desc, k_desc, v_desc, o_desc), scale = _operands(q, k, v, sm_scale, config.block_m, config.block_n)
    grid = (triton.cdiv(seq, config.block_m), b * h)
    _attn_fwd_gluon[grid](q_desc, k_desc, v_desc, o_desc, seq, scale, HEAD_DIM=d, BLOCK_M=config.block_m,
                          BLOCK_N=config.block_n, CAUSAL=bool(causal), STAGES=config.stages,
                          num_warps=config.num_warps)
    return out.view(b, h, seq, d)


# ---- warp-specialised kernel (FlashAttention-3's partitions), the default at head dim 128: a 1-warp TMA producer
# and two consumer warpgroups of 64 query rows each, sharing K and V through mbarrier-guarded stages (ready: the
# producer's TMA arrived; empty: both consumers are done with it). The consumers wait on their own MMAs only, so
# while one waits the other's softmax runs (docs/decisions/0003).

@gluon.jit
def _ws_consumer(descs, bars, bufs, row0, q_start, n, qk_scale, half, HEAD_DIM: gl.constexpr,
                 BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr):
    q_desc, k_desc, v_desc, o_desc = descs
    q_bar, k_ready, k_empty, v_ready, v_empty = bars
    q_smem, k_smem, v_smem, o_smem = bufs
    ROWS: gl.constexpr = q_smem.type.shape[1]
    dtype: gl.constexpr = q_desc.dtype
    s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, BLOCK_N, 16])
    o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                       instr_shape=[16, HEAD_DIM, 16])
    row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
    my_start = q_start + half * ROWS
    q = q_smem.index(half)

    acc, l_i = _key_loop(q, q_bar, k_smem, v_smem, k_ready, v_ready, k_empty, v_empty, k_desc, v_desc, row0, n,
                         my_start, qk_scale, s_layout, o_layout, ROWS, HEAD_DIM, BLOCK_N, CAUSAL, STAGES, True)
    out = acc / gl.expand_dims(gl.convert_layout(l_i, row_o), 1)
    o = o_smem.index(half)
    o.store(out.to(dtype))
    fence_async_shared()
    tma.async_copy_shared_to_global(o_desc, [row0 + my_start, 0], o)
    tma.store_wait(pendings=0)


@gluon.jit
def _ws_loader(descs, bars, bufs, row0, q_start, n, BLOCK_N: gl.constexpr, STAGES: gl.constexpr):
    """One warp: both halves of the Q block, then each key block's K and V into a free stage."""
    q_desc, k_desc, v_desc, o_desc = descs
    q_bar, k_ready, k_empty, v_ready, v_empty = bars
    q_smem, k_smem, v_smem, o_smem = bufs
    ROWS: gl.constexpr = q_smem.type.shape[1]
    mbarrier.expect(q_bar, 2 * q_desc.block_type.nbytes)
    tma.async_copy_global_to_shared(q_desc, [row0 + q_start, 0], q_bar, q_smem.index(0))
    tma.async_copy_global_to_shared(q_desc, [row0 + q_start + ROWS, 0], q_bar, q_smem.index(1))
    for i in range(n):
        stage = i % STAGES
        phase = (i // STAGES) & 1
        mbarrier.wait(k_empty.index(stage), phase ^ 1)  # a fresh barrier passes phase 1 at once
        mbarrier.expect(k_ready.index(stage), k_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(k_desc, [row0 + i * BLOCK_N, 0], k_ready.index(stage), k_smem.index(stage))
        mbarrier.wait(v_empty.index(stage), phase ^ 1)
        mbarrier.expect(v_ready.index(stage), v_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(v_desc, [row0 + i * BLOCK_N, 0], v_ready.index(stage), v_smem.index(stage))


@gluon.jit
def _attn_fwd_gluon_ws(q_desc, k_desc, v_desc, o_desc, seq, qk_scale, HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr,
                       BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr, STAGES: gl.constexpr,
                       CONSUMER_REGS: gl.constexpr, num_warps: gl.constexpr):
    ROWS: gl.constexpr = BLOCK_M // 2
    row0, q_start, n = _program_rows(seq, BLOCK_M, BLOCK_N, CAUSAL)
    dtype: gl.constexpr = q_desc.dtype
    q_smem = gl.allocate_shared_memory(dtype, [2, ROWS, HEAD_DIM], q_desc.layout)
    o_smem = gl.allocate_shared_memory(dtype, [2, ROWS, HEAD_DIM], o_desc.layout)
    k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
    v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
    q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
    k_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    k_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    v_empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    mbarrier.init(q_bar, count=1)
    for i in gl.static_range(STAGES):
        mbarrier.init(k_ready.index(i), count=1)
        mbarrier.init(v_ready.index(i), count=1)
        mbarrier.init(k_empty.index(i), count=2)  # both consumers
        mbarrier.init(v_empty.index(i), count=2)
    descs = (q_desc, k_desc, v_desc, o_desc)
    bars = (q_bar, k_ready, k_empty, v_ready, v_empty)
    bufs = (q_smem, k_smem, v_smem, o_smem)
    gl.warp_specialize([
        (_ws_consumer, (descs, bars, bufs, row0, q_start, n, qk_scale, 0, HEAD_DIM, BLOCK_N, CAUSAL, STAGES)),
        (_ws_consumer, (descs, bars, bufs, row0, q_start, n, qk_scale, 1, HEAD_DIM, BLOCK_N, CAUSAL, STAGES)),
        (_ws_loader, (descs, bars, bufs, row0, q_start, n, BLOCK_N, STAGES)),
    ], [4, 1], [CONSUMER_REGS, 24])


def gluon_attention_ws(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                       sm_scale: float | None = None, block_n: int = 128, stages: int = 2,
                       consumer_regs: int = 240) -> torch.Tensor:
    """The warp-specialised kernel (see the comment above ``_ws_consumer``); 128 query rows per program."""
    config = GluonConfig(128, block_n, 4, stages)
    why = supported(q, k, v, config)
    if why:
        raise ValueError(f"gluon_attention_ws: {why}.")
    b, h, seq, d = q.shape
    out, (q_desc, k_desc, v_desc, o_desc), scale = _operands(q, k, v, sm_scale, 64, block_n)  # 64 rows a consumer
    _attn_fwd_gluon_ws[(seq // 128, b * h)](q_desc, k_desc, v_desc, o_desc, seq, scale, HEAD_DIM=d, BLOCK_M=128,
                                            BLOCK_N=block_n, CAUSAL=bool(causal), STAGES=stages,
                                            CONSUMER_REGS=consumer_regs, num_warps=4,
                                            maxnreg=65536 // 384 // 8 * 8)  # 12 warps; setmaxnreg moves the rest
    return out.view(b, h, seq, d)


WS_HEAD_DIMS = (128,)  # the warp-specialised kernel's measured head dims; 64 takes gluon_attention


def hopper_kernel(q: torch.Tensor) -> str:
    """Which Gluon kernel ``hopper_attention`` runs for q: 'gluon-ws' or 'gluon'."""
    return "gluon-ws" if q.shape[-1] in WS_HEAD_DIMS else "gluon"


def hopper_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                     sm_scale: float | None = None) -> torch.Tensor:
    """flash_attention's default on sm_90 where ``supported``: the warp-specialised kernel at head dim 128, the
    single-warpgroup one at 64."""
    if hopper_kernel(q) == "gluon-ws":
        return gluon_attention_ws(q, k, v, causal, sm_scale)
    return gluon_attention(q, k, v, causal, sm_scale)

