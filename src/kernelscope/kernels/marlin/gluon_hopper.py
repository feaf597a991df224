"""W4A16 decode GEMM for Hopper in Gluon (Triton 3.6's explicit-layout dialect), built like the attention kernel.

Why a second kernel: in the Triton kernel (:mod:`gemm`) each program loads, unpacks and multiplies its blocks in the
same warps, and the decode shapes need many k splits (up to 12 programs a column tile) to keep enough bytes in
flight; the split-k sum at the end of the launch then costs 1.1-1.5 us a call (benchmarks/w4a16/NOTES.md v13).
Here a program is warp-specialised, as the attention kernel is:

* a producer warp copies each block's weights, activations and scales into a stage of shared memory with TMA,
  STAGES blocks ahead of the consumer, guarded by ready / empty mbarriers;
* a consumer warpgroup of 64 output columns moves a block's words from shared memory to registers, unpacks them
  (the PTX of :mod:`unpack_ptx`) into the warpgroup MMA's register operand as they are (no shuffle, no trip
  through shared memory) and multiplies.

In the H100 sweep (m = 1, four programs of 5 warps per SM at 96 registers a thread) its fastest launches used 1-4
k splits where the Triton kernel's tuner picks 4-12; it was faster than the Triton kernel at 3 of 6 layer shapes and
slower at 2 (benchmarks/w4a16/RESULTS.md).

Swapped product, as the Triton kernel's decode launches: ``C^T (n x m) = W^T (n x k) A^T (k x m)``, so n fills the
MMA's 64-row side and the m <= 16 tokens (padded to BLOCK_M = 8 or 16 by TMA's zero fill) its N side.

Weights: ``Bg``, the kernel layout ``Bk`` of :mod:`gemm` regrouped by :func:`to_gluon_layout` so that one block of
128 k for 64 columns is one contiguous 4 KiB TMA box and each thread's four words of a block are one 16-byte
shared-memory load (:mod:`layout_gluon`); this is the layout the H100 sweep timed. The kernel also reads ``Bk``
itself, the Triton kernel's weights (so one copy of a model's weights would serve both kernels): (16, 64) tiles in
128-byte-swizzled shared memory, read word by word with 2-way bank conflicts (``gl.bank_conflicts``; 4-way
unswizzled); compiled, not yet timed.

Two consumer loops: the default (``pipeline=False``) waits for each block's MMA before the next block is unpacked
and adds the block's sum times its scales in fp32, as the Triton kernel does; this is the loop that was checked
and timed on the H100. ``pipeline=True`` scales the weights in fp16 as they are unpacked (Marlin's
dequantisation), so the MMAs chain on one accumulator and each block is unpacked while the previous block's MMA
runs; it compiles for sm_90 without serialised MMAs (tests/kernels/test_w4a16_gluon.py) but has not yet run on a
GPU (no GPU could be had after it was written, 2026-11-23): tests/gpu/test_w4a16_gluon_gpu.py checks it there.
Scope: sm_90, m <= 16, fp16, n a multiple of 64; see :func:`supported`.
"""
from __future__ import annotations

from typing import Any

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from .format import group_rows
from .layout_gluon import WORDS, from_gluon_layout, to_gluon_layout
from .unpack_ptx import UNPACK_PTX

__all__ = ["gluon_w4a16", "supported", "to_gluon_layout", "from_gluon_layout"]

# constexpr objects, so that the jitted functions may read them (host code reads .value)
PACK_K = gl.constexpr(128)  # rows of k per block, as in gemm.py
BLOCK_N = gl.constexpr(64)  # output columns per program: one warpgroup MMA's M side
_WORDS = gl.constexpr(WORDS)
PRODUCER_REGS = gl.constexpr(24)  # setmaxnreg of the producer warp: issuing TMA copies needs few
_UNPACK: gl.constexpr = gl.constexpr(UNPACK_PTX)


@gluon.jit
def _unpack(words, w_layout: gl.constexpr, KN: gl.constexpr):
    """(64, 16) words of a block [column, word] -> (64, 128) fp16 q - 8 [column, k] in the MMA's register-operand
    layout. The words come in Bg's order (word 4 q + v) or, with KN, in Bk's (word j = q + 4 v).

    Word j of a block holds, for slice i, the pair k = 32 i + 2 j + (0, 1) as one f16x2 register after the PTX;
    the joins, reshapes and permute below only name registers (k = 32 i + 8 v + 2 q + h)."""
    t0, t1, t2, t3 = gl.inline_asm_elementwise(_UNPACK, "=r,=r,=r,=r,r", [words], dtype=(gl.int32, ) * 4,
                                               is_pure=True, pack=1)
    x = gl.join(gl.join(t0, t1), gl.join(t2, t3))  # [c, word, i % 2, i // 2]
    x = gl.reshape(x, [64, 4, 4, 2, 2])
    if KN:
        x = gl.permute(x, [0, 4, 3, 1, 2])  # [c, v, q, i0, i1] -> [c, i1, i0, v, q]
    else:
        x = gl.permute(x, [0, 4, 3, 2, 1])  # [c, q, v, i0, i1] -> [c, i1, i0, v, q]
    pairs = gl.reshape(x, [64, 64])  # [c, 16 i + 4 v + q]: pair p holds k = 2 p, 2 p + 1
    lo = pairs.to(gl.int16).to(gl.float16, bitcast=True)
    hi = (pairs >> 16).to(gl.int16).to(gl.float16, bitcast=True)
    w = gl.reshape(gl.join(lo, hi), [64, 128])
    return gl.convert_layout(w, w_layout)


@gluon.jit
def _words(w_smem, ready, b, STAGES: gl.constexpr, words_layout: gl.constexpr, KN: gl.constexpr):
    """Block b's words as (column, word), once its TMA copy has landed (Bk's (word, column) tile transposed)."""
    mbarrier.wait(ready.index(b % STAGES), (b // STAGES) & 1)
    words = w_smem.index(b % STAGES).load(words_layout)
    if KN:
        words = gl.permute(words, [1, 0])
    return words


@gluon.jit
def _issue(acc, w, b, a_smem, PER_CHANNEL: gl.constexpr, STAGES: gl.constexpr, acc_layout: gl.constexpr,
           BLOCK_M: gl.constexpr):
    """Issue block b's MMA, W_b^T A_b^T: into acc with one scale per column, else into a fresh sum."""
    a_op = a_smem.index(b % STAGES).permute((1, 0))
    if PER_CHANNEL:
        return warpgroup_mma(w, a_op, acc, is_async=True)
    return warpgroup_mma(w, a_op, gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=acc_layout), use_acc=False,
                         is_async=True)


@gluon.jit
def _retire(acc, tok, b, s_smem, empty, PER_CHANNEL: gl.constexpr, STAGES: gl.constexpr, acc_layout: gl.constexpr):
    """Wait for block b's MMA, add its sum times the group's scales (in fp32), release the stage to the producer."""
    stage = b % STAGES
    if PER_CHANNEL:
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(tok, ))
    else:
        scale = s_smem.index(stage).load(gl.SliceLayout(1, acc_layout)).to(gl.float32)
        part = warpgroup_mma_wait(num_outstanding=0, deps=(tok, ))
        acc = acc + part * gl.expand_dims(scale, 1)
    mbarrier.arrive(empty.index(stage), count=1)
    return acc


@gluon.jit
def _unpack_scaled(w_smem, s_smem, ready, b, STAGES: gl.constexpr, words_layout: gl.constexpr,
                   w_layout: gl.constexpr, PER_CHANNEL: gl.constexpr, KN: gl.constexpr):
    """Block b's weights as fp16 (q - 8) * scale (q - 8 alone with one scale per column, applied at the end), in
    the MMA's register-operand layout."""
    w = _unpack(_words(w_smem, ready, b, STAGES, words_layout, KN), w_layout, KN)
    if not PER_CHANNEL:
        w = w * gl.expand_dims(s_smem.index(b % STAGES).load(gl.SliceLayout(1, w_layout)), 1)
    return w


@gluon.jit
def _chain(acc, w, a_smem, empty, b, STAGES: gl.constexpr):
    """Issue block b's MMA into acc, then wait for all but it: block b - 1's stage goes back to the producer."""
    acc = warpgroup_mma(w, a_smem.index(b % STAGES).permute((1, 0)), acc, is_async=True)
    acc = warpgroup_mma_wait(num_outstanding=1, deps=(acc, ))
    if b > 0:
        mbarrier.arrive(empty.index((b - 1) % STAGES), count=1)
    return acc


@gluon.jit
def _consumer(bufs, bars, ptrs, M, N, n_blocks, pid_n, pid_k, PER_CHANNEL: gl.constexpr, GROUP_BLOCKS: gl.constexpr,
              SPLIT_K: gl.constexpr, STAGES: gl.constexpr, BLOCK_M: gl.constexpr, PIPELINE: gl.constexpr,
              KN: gl.constexpr):
    """One warpgroup: the program's 64 columns over its n_blocks blocks of k, then the store (or split-k sum)."""
    ready, empty = bars
    w_smem, a_smem, s_smem = bufs
    c_ptr, s_ptr, part_ptr, count_ptr = ptrs
    acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                         instr_shape=[16, BLOCK_M, 16])
    w_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    # Each thread loads the words whose pairs it holds in the MMA's register operand, so the unpack moves no data
    # between threads: lanes 0-1 pick the word group q, lanes 2-4 the column within a row group of 8, registers
    # the four words v and the column + 8, warps the 16-column slabs. In Bg, a thread's four words are one 16-byte
    # load; Bk's (word, column) tile is read word by word from 128-byte-swizzled shared memory (2-way bank
    # conflicts, gl.bank_conflicts; 4-way unswizzled).
    if KN:
        words_layout: gl.constexpr = gl.DistributedLinearLayout(
            reg_bases=[[4, 0], [8, 0], [0, 8]], lane_bases=[[1, 0], [2, 0], [0, 1], [0, 2], [0, 4]],
            warp_bases=[[0, 16], [0, 32]], block_bases=[], shape=[_WORDS, BLOCK_N])
    else:
        words_layout: gl.constexpr = gl.DistributedLinearLayout(
            reg_bases=[[0, 1], [0, 2], [8, 0]], lane_bases=[[0, 4], [0, 8], [1, 0], [2, 0], [4, 0]],
            warp_bases=[[16, 0], [32, 0]], block_bases=[], shape=[BLOCK_N, _WORDS])
    col_layout: gl.constexpr = gl.SliceLayout(1, acc_layout)

    acc = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=acc_layout)
    if PIPELINE:
        # Two register sets (w_a, w_b: two blocks a trip) so that no unpack writes the operand of the MMA in
        # flight (with one set the compiler reuses its registers, and ptxas then serialises every MMA).
        w = _unpack_scaled(w_smem, s_smem, ready, 0, STAGES, words_layout, w_layout, PER_CHANNEL, KN)
        acc = _chain(acc, w, a_smem, empty, 0, STAGES)
        for i in range(1, n_blocks - 1, 2):
            w_a = _unpack_scaled(w_smem, s_smem, ready, i, STAGES, words_layout, w_layout, PER_CHANNEL, KN)
            acc = _chain(acc, w_a, a_smem, empty, i, STAGES)
            w_b = _unpack_scaled(w_smem, s_smem, ready, i + 1, STAGES, words_layout, w_layout, PER_CHANNEL, KN)
            acc = _chain(acc, w_b, a_smem, empty, i + 1, STAGES)
        if n_blocks % 2 == 0:
            w_a = _unpack_scaled(w_smem, s_smem, ready, n_blocks - 1, STAGES, words_layout, w_layout, PER_CHANNEL, KN)
            acc = _chain(acc, w_a, a_smem, empty, n_blocks - 1, STAGES)
        acc = warpgroup_mma_wait(num_outstanding=0, deps=(acc, ))
        mbarrier.arrive(empty.index((n_blocks - 1) % STAGES), count=1)
    else:
        # ptxas places an MMA's wait before the unpack of a next block written between the MMA and the wait, so
        # here each block is simply unpacked, multiplied and waited for; the other programs on the SM fill the wait.
        for b in range(n_blocks):
            w = _unpack(_words(w_smem, ready, b, STAGES, words_layout, KN), w_layout, KN)
            tok = _issue(acc, w, b, a_smem, PER_CHANNEL, STAGES, acc_layout, BLOCK_M)
            acc = _retire(acc, tok, b, s_smem, empty, PER_CHANNEL, STAGES, acc_layout)

    cols = pid_n * BLOCK_N + gl.arange(0, BLOCK_N, layout=col_layout)
    toks = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, acc_layout))
    if PER_CHANNEL:
        acc = acc * gl.expand_dims(gl.load(s_ptr + cols).to(gl.float32), 1)
    mask = gl.expand_dims(toks < M, 0)
    c_ptrs = c_ptr + gl.expand_dims(toks, 0) * N + gl.expand_dims(cols, 1)
    if SPLIT_K == 1:
        gl.store(c_ptrs, acc.to(gl.float16), mask=mask)
    else:
        # as gemm._finish_tile: partials stored (only the rows of C that exist), counted in on the tile's counter;
        # the program that arrives last adds them in split order (deterministic), stores C, resets the counter
        offs = gl.expand_dims(toks, 0) * BLOCK_N + gl.expand_dims(gl.arange(0, BLOCK_N, layout=col_layout), 1)
        parts = part_ptr + pid_n * (SPLIT_K * BLOCK_N * BLOCK_M)
        gl.store(parts + pid_k * (BLOCK_N * BLOCK_M) + offs, acc, mask=mask)
        gl.thread_barrier()  # every thread's partial is stored before the counter says so
        arrived = gl.atomic_add(count_ptr + pid_n, 1, sem="acq_rel", scope="gpu")
        if arrived == SPLIT_K - 1:
            total = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=acc_layout)
            for j in gl.static_range(SPLIT_K):
                total += gl.load(parts + j * (BLOCK_N * BLOCK_M) + offs, mask=mask, other=0.0, cache_modifier=".cg")
            gl.store(c_ptrs, total.to(gl.float16), mask=mask)
            gl.atomic_xchg(count_ptr + pid_n, 0, sem="relaxed", scope="gpu")  # ready for the next launch


@gluon.jit
def _producer(bufs, bars, descs, N, n_blocks, pid_n, pid_k, PER_CHANNEL: gl.constexpr, GROUP_BLOCKS: gl.constexpr,
              STAGES: gl.constexpr, KN: gl.constexpr):
    """One warp: TMA copies of each block's words, activations and (per group) scales, STAGES blocks ahead."""
    w_desc, a_desc, s_desc = descs
    ready, empty = bars
    w_smem, a_smem, s_smem = bufs
    WA_BYTES: gl.constexpr = w_desc.block_type.nbytes + a_desc.block_type.nbytes
    S_BYTES: gl.constexpr = s_desc.block_type.nbytes
    first = pid_k * n_blocks
    for b in range(n_blocks):
        stage = b % STAGES
        mbarrier.wait(empty.index(stage), ((b // STAGES) & 1) ^ 1)  # a fresh barrier passes phase 1 at once
        if PER_CHANNEL:
            mbarrier.expect(ready.index(stage), WA_BYTES)
        else:
            mbarrier.expect(ready.index(stage), WA_BYTES + S_BYTES)
        kb = first + b
        if KN:
            tma.async_copy_global_to_shared(w_desc, [kb * _WORDS, pid_n * BLOCK_N], ready.index(stage),
                                            w_smem.index(stage))
        else:
            tma.async_copy_global_to_shared(w_desc, [kb * N + pid_n * BLOCK_N, 0], ready.index(stage),
                                            w_smem.index(stage))
        tma.async_copy_global_to_shared(a_desc, [0, kb * PACK_K], ready.index(stage), a_smem.index(stage))
        if not PER_CHANNEL:
            tma.async_copy_global_to_shared(s_desc, [(kb // GROUP_BLOCKS) * N + pid_n * BLOCK_N],
                                            ready.index(stage), s_smem.index(stage))


@gluon.jit
def _w4a16_gluon(w_desc, a_desc, s_desc, c_ptr, s_ptr, part_ptr, count_ptr, M, N, n_blocks,
                 GROUP_BLOCKS: gl.constexpr, PER_CHANNEL: gl.constexpr, SPLIT_K: gl.constexpr, STAGES: gl.constexpr,
                 BLOCK_M: gl.constexpr, PIPELINE: gl.constexpr, num_warps: gl.constexpr):
    pid_n = gl.program_id(0)
    pid_k = gl.program_id(1)
    KN: gl.constexpr = w_desc.block_type.shape[0] == _WORDS  # Bk's (word, column) tiles, else Bg's
    W_ROWS: gl.constexpr = w_desc.block_type.shape[0]
    W_COLS: gl.constexpr = w_desc.block_type.shape[1]
    w_smem = gl.allocate_shared_memory(gl.int32, [STAGES, W_ROWS, W_COLS], w_desc.layout)
    a_smem = gl.allocate_shared_memory(gl.float16, [STAGES, BLOCK_M, PACK_K], a_desc.layout)
    s_smem = gl.allocate_shared_memory(gl.float16, [STAGES, BLOCK_N], s_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    bufs = (w_smem, a_smem, s_smem)
    bars = (ready, empty)
    gl.warp_specialize([
        (_consumer, (bufs, bars, (c_ptr, s_ptr, part_ptr, count_ptr), M, N, n_blocks, pid_n, pid_k, PER_CHANNEL,
                     GROUP_BLOCKS, SPLIT_K, STAGES, BLOCK_M, PIPELINE, KN)),
        (_producer, (bufs, bars, (w_desc, a_desc, s_desc), N, n_blocks, pid_n, pid_k, PER_CHANNEL, GROUP_BLOCKS,
                     STAGES, KN)),
    ], [1], [PRODUCER_REGS])


def supported(a: torch.Tensor, n: int) -> str | None:
    """None when the Gluon kernel runs ``a (m, k) @ W (k, n)``, else why not (one sentence)."""
    if not a.is_cuda or torch.cuda.get_device_capability(a.device)[0] != 9:
        return "the Gluon W4A16 kernel is written for sm_90 (Hopper) GPUs"
    if a.dtype != torch.float16 or a.dim() != 2 or not 1 <= a.shape[0] <= 16:
        return "the Gluon W4A16 kernel takes fp16 a of shape (m, k) with 1 <= m <= 16"
    if n % BLOCK_N.value:
        return f"the Gluon W4A16 kernel takes n a multiple of {BLOCK_N.value}"
    return None


_COUNTERS: dict[Any, torch.Tensor] = {}


def _tile_counters(device: torch.device, tiles: int) -> torch.Tensor:
    """Zeroed per-tile split-k counters, one buffer per device (the kernel leaves them zeroed), as matmul.py's."""
    buf = _COUNTERS.get(device)
    if buf is None or buf.numel() < tiles:
        buf = _COUNTERS[device] = torch.zeros(max(tiles, 1024), dtype=torch.int32, device=device)
    return buf


def check_args(a: torch.Tensor, words: torch.Tensor, s: torch.Tensor, groupsize: int, n: int, split_k: int,
               stages: int, out: torch.Tensor | None) -> tuple[bool, int]:
    """Validate :func:`gluon_w4a16`'s arguments past :func:`supported` (one sentence each, ValueError); returns
    (whether ``words`` is Bk, the rows of k per scale group)."""
    m, k = a.shape
    if split_k < 1 or k % (PACK_K.value * split_k):
        raise ValueError(f"gluon_w4a16: k={k} must be a multiple of 128 * split_k = {128 * split_k}.")
    if stages < 2:  # with one stage the chained loop would wait for a block its own release lets in: a hang
        raise ValueError(f"gluon_w4a16: stages must be at least 2, got {stages}.")
    bk_shape, bg_shape = (k // 8, n), (k // PACK_K.value * n, WORDS)
    if words.dtype != torch.int32 or words.device != a.device or tuple(words.shape) not in (bk_shape, bg_shape):
        raise ValueError(f"gluon_w4a16: words must be int32 on {a.device}, of shape {bk_shape} (to_kernel_layout) "
                         f"or {bg_shape} (to_gluon_layout), got {words.dtype} {tuple(words.shape)} on {words.device}.")
    rows = group_rows(k, groupsize)
    if s.dtype != torch.float16 or tuple(s.shape) != (k // rows, n) or not s.is_contiguous():
        raise ValueError(f"gluon_w4a16: s must be a contiguous float16 tensor of shape {(k // rows, n)}.")
    if out is not None and (out.dtype != torch.float16 or tuple(out.shape) != (m, n) or not out.is_contiguous()
                            or out.device != a.device):
        raise ValueError(f"gluon_w4a16: out must be a contiguous float16 tensor of shape {(m, n)} on {a.device}.")
    return tuple(words.shape) == bk_shape, rows


def gluon_w4a16(a: torch.Tensor, words: torch.Tensor, s: torch.Tensor, groupsize: int, n: int, *, split_k: int = 1,
                stages: int = 4, maxnreg: int | None = 96, pipeline: bool = False,
                out: torch.Tensor | None = None) -> torch.Tensor:
    """fp16 ``a (m, k) @ dequant(words, s)`` -> (m, n). ``words``: ``Bg`` of :func:`to_gluon_layout` (the layout
    the H100 sweep timed) or ``Bk`` of :func:`gemm.to_kernel_layout` itself (the Triton kernel's weights, read as
    128-byte-swizzled (16, 64) tiles; not yet timed); ``s`` from :func:`gemm.to_kernel_layout`. ``split_k``
    programs share a column tile's k; ``maxnreg`` caps each thread's registers at launch (96: four programs per
    SM; None: the compiler's choice); ``pipeline``: the chained-MMA consumer loop (module docstring: not yet run
    on a GPU)."""
    why = supported(a, n)
    if why:
        raise ValueError(f"gluon_w4a16: {why}.")
    kn, rows = check_args(a, words, s, groupsize, n, split_k, stages, out)
    m, k = a.shape
    pack_k, block_n = PACK_K.value, BLOCK_N.value
    block_m = 8 if m <= 8 else 16
    a = a.contiguous()
    if out is None:
        out = torch.empty((m, n), dtype=torch.float16, device=a.device)
    per_channel = rows == k
    if kn:
        w_desc = TensorDescriptor.from_tensor(words, [WORDS, block_n], gl.NVMMASharedLayout(128, 32, rank=2))
    else:
        w_desc = TensorDescriptor.from_tensor(words, [block_n, WORDS], gl.NVMMASharedLayout(0, 32, rank=2))
    a_desc = TensorDescriptor.from_tensor(a, [block_m, pack_k],
                                          gl.NVMMASharedLayout.get_default_for([block_m, pack_k], gl.float16))
    s_desc = TensorDescriptor.from_tensor(s.view(-1), [block_n], gl.NVMMASharedLayout(0, 16, rank=1))
    tiles = n // block_n
    if split_k > 1:
        parts = torch.empty(tiles * split_k * block_n * block_m, dtype=torch.float32, device=a.device)
        counters = _tile_counters(a.device, tiles)
    else:
        parts = counters = out  # never read: the SPLIT_K == 1 branch is compiled out
    _w4a16_gluon[(tiles, split_k)](
        w_desc, a_desc, s_desc, out, s, parts, counters, m, n, k // pack_k // split_k,
        GROUP_BLOCKS=1 if per_channel else rows // pack_k, PER_CHANNEL=per_channel, SPLIT_K=split_k, STAGES=stages,
        BLOCK_M=block_m, PIPELINE=bool(pipeline), num_warps=4, **({"maxnreg": maxnreg} if maxnreg else {}))
    return out
