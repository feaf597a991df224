"""W4A16 decode GEMM for Hopper in Gluon (Triton 3.6's explicit-layout dialect), built like the attention kernel.

A program is warp-specialised (why a second kernel beside :mod:`gemm`: docs/decisions/0001):

* a producer warp copies each block's weights, activations and scales into a stage of shared memory with TMA,
  STAGES blocks ahead of the consumer, guarded by ready / empty mbarriers (:mod:`gluon_copies`);
* a consumer warpgroup of 64 output columns moves a block's words from shared memory to registers, unpacks them
  (the PTX of :mod:`unpack_ptx`) into the warpgroup MMA's register operand as they are (no shuffle, no trip
  through shared memory) and multiplies.

Work is split stream-K: the grid is any number of programs, and each takes an even share of the layer's
(column tile, k block) units in tile-major order, so the grid fills the SMs evenly whatever the number of column
tiles (:func:`work_split`). A tile shared by programs is summed by the one whose blocks complete it. A program is 8
warps (the producer warp's partition is padded to a warpgroup), so two fit an SM at 96 registers a thread, three at
80 and four at 64 (the consumer warpgroup still gets 104-168 by ``setmaxnreg``); :func:`tune_space.gluon_launch`
picks the grid and the registers together.

Swapped product, as the Triton kernel's decode launches: ``C^T (n x m) = W^T (n x k) A^T (k x m)``, so n fills the
MMA's 64-row side and the m <= 64 tokens (padded to BLOCK_M = 8, 16, 32 or 64 by TMA's zero fill) its N side.

Weights: ``Bg``, the kernel layout ``Bk`` of :mod:`gemm` regrouped by :func:`to_gluon_layout` so that one block of
128 k for 64 columns is one contiguous 4 KiB TMA box and each thread's four words of a block are one 16-byte
shared-memory load (:mod:`layout_gluon`). The kernel also reads ``Bk`` itself, the Triton kernel's weights (so
one copy of a model's weights serves both kernels): (16, 64) tiles in 128-byte-swizzled shared memory, read word
by word with 2-way bank conflicts (``gl.bank_conflicts``; 4-way unswizzled).

The consumer waits for each block's MMA before it unpacks the next and adds the block's sum times its scales in
fp32, as the Triton kernel does. With ``sync_mma`` it multiplies with mma.sync instead (m16n8k16, each warp its 16
columns, four independent 32-deep sums a block, the stage released as soon as its operands are in registers);
:func:`tune_space.gluon_launch` sets it.
With ``pdl`` the launch is a programmatic dependent launch: the producer copies its first blocks' words and
scales before ``griddepcontrol.wait`` (the launch before it may still run), and nothing reads the activations or
writes C, the partials or the counters before it. It pays off only after a launch that lets its dependents start
early, so it is opt-in. Thread 0 prefetches the three TMA descriptors as the program starts. With ``records``
each program writes its phase times (:mod:`gluon_record`). With ``cluster`` a tile's programs are one thread-block
cluster and sum through distributed shared memory instead of L2 (:mod:`gluon_cluster`; docs/decisions/0002).
Past 16 tokens a shared tile's partials are stored column-major (a 32-byte sector per quad of threads; token-major,
a 64-token tile's were one sector per element) and summed one slot at a time (four at once spilled).
Scope: sm_90, m <= 64, fp16, n a multiple of 64; see :func:`supported`. The variants measured and not kept, with
their figures, are in docs/decisions/0001.
"""
from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import mma_v2
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from kernelscope.collect.instrument.layout import ROW_VALUES

from .gluon_args import block_m_for, check_args, check_cluster, supported, work_split
from .gluon_cluster import _cluster_arrive, _cluster_init, extra_bytes, launch_in_clusters
from .gluon_copies import _WORDS, BLOCK_N, PACK_K, _grid_launch_dependents, _grid_wait, _producer, _segment
from .gluon_record import FIELDS, _now, _write_row
from .gluon_store import _finish
from .layout_gluon import WORDS, from_gluon_layout, to_gluon_layout
from .split_counters import tile_counters
from .unpack_ptx import UNPACK_PTX

__all__ = ["gluon_w4a16", "supported", "work_split", "check_args", "to_gluon_layout", "from_gluon_layout"]

# the constexprs live with the producer (host code reads .value)
PRODUCER_REGS = gl.constexpr(24)  # setmaxnreg of the producer warp's partition: issuing TMA copies needs few
_UNPACK: gl.constexpr = gl.constexpr(UNPACK_PTX)


@gluon.jit
def _nibble_slices(words):
    """The PTX unpack of :mod:`unpack_ptx`: each word's four nibble slices i, as f16x2 registers of q - 8."""
    return gl.inline_asm_elementwise(_UNPACK, "=r,=r,=r,=r,r", [words], dtype=(gl.int32, ) * 4, is_pure=True,
                                     pack=1)


@gluon.jit
def _fp16_pairs(pairs, K: gl.constexpr, w_layout: gl.constexpr):
    """(64, K / 2) f16x2 pairs [column, pair] -> (64, K) fp16 [column, k] in ``w_layout``: pair p holds k = 2 p and
    2 p + 1 (the bitcasts and the join only name registers)."""
    lo = pairs.to(gl.int16).to(gl.float16, bitcast=True)
    hi = (pairs >> 16).to(gl.int16).to(gl.float16, bitcast=True)
    return gl.convert_layout(gl.reshape(gl.join(lo, hi), [64, K]), w_layout)


@gluon.jit
def _unpack(words, w_layout: gl.constexpr, KN: gl.constexpr):
    """(64, 16) words of a block [column, word] -> (64, 128) fp16 q - 8 [column, k] in the MMA's register-operand
    layout. The words come in Bg's order (word 4 q + v) or, with KN, in Bk's (word j = q + 4 v).

    Word j of a block holds, for slice i, the pair k = 32 i + 2 j + (0, 1) as one f16x2 register after the PTX;
    the joins, reshapes and permute below only name registers (k = 32 i + 8 v + 2 q + h)."""
    t0, t1, t2, t3 = _nibble_slices(words)
    x = gl.join(gl.join(t0, t1), gl.join(t2, t3))  # [c, word, i % 2, i // 2]
    x = gl.reshape(x, [64, 4, 4, 2, 2])
    if KN:
        x = gl.permute(x, [0, 4, 3, 1, 2])  # [c, v, q, i0, i1] -> [c, i1, i0, v, q]
    else:
        x = gl.permute(x, [0, 4, 3, 2, 1])  # [c, q, v, i0, i1] -> [c, i1, i0, v, q]
    pairs = gl.reshape(x, [64, 64])  # [c, 16 i + 4 v + q]: pair p holds k = 2 p, 2 p + 1
    return _fp16_pairs(pairs, 128, w_layout)


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
def _slice_operand(t, w_layout: gl.constexpr, KN: gl.constexpr):
    """One nibble slice i of a block's unpacked words, (64, 16) f16x2 pairs [column, word] -> (64, 32) fp16 for
    k = 32 i + 8 v + 2 q + h in mma.sync's register-operand layout (the reshapes only name registers)."""
    x = gl.reshape(t, [64, 4, 4])
    if KN:
        x = gl.permute(x, [0, 1, 2])  # [c, v, q]
    else:
        x = gl.permute(x, [0, 2, 1])  # [c, q, v] -> [c, v, q]
    return _fp16_pairs(gl.reshape(x, [64, 16]), 32, w_layout)


@gluon.jit
def _sync_block(acc, b, bufs, bars, words_layout: gl.constexpr, w_layout: gl.constexpr, a_layout: gl.constexpr,
                acc_layout: gl.constexpr, PER_CHANNEL: gl.constexpr, STAGES: gl.constexpr, BLOCK_M: gl.constexpr,
                KN: gl.constexpr):
    """Block b with mma.sync: its words, activations and scales into registers, the stage released to the producer
    at once, then each 32-deep nibble slice multiplied into its own sum (four chains of two MMAs instead of one of
    eight), and the block's sum times its scales added (fp32)."""
    ready, empty = bars
    w_smem, a_smem, s_smem = bufs
    stage = b % STAGES
    words = _words(w_smem, ready, b, STAGES, words_layout, KN)
    a_t = a_smem.index(stage).permute((1, 0))
    a0 = a_t.slice(0, 32, dim=0).load(a_layout)
    a1 = a_t.slice(32, 32, dim=0).load(a_layout)
    a2 = a_t.slice(64, 32, dim=0).load(a_layout)
    a3 = a_t.slice(96, 32, dim=0).load(a_layout)
    if not PER_CHANNEL:
        scale = s_smem.index(stage).load(gl.SliceLayout(1, acc_layout)).to(gl.float32)
    mbarrier.arrive(empty.index(stage), count=1)
    t0, t1, t2, t3 = _nibble_slices(words)
    zero = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=acc_layout)
    p0 = mma_v2(_slice_operand(t0, w_layout, KN), a0, zero)
    p1 = mma_v2(_slice_operand(t1, w_layout, KN), a1, zero)
    p2 = mma_v2(_slice_operand(t2, w_layout, KN), a2, zero)
    p3 = mma_v2(_slice_operand(t3, w_layout, KN), a3, zero)
    part = (p0 + p1) + (p2 + p3)
    if PER_CHANNEL:
        acc = acc + part
    else:
        acc = acc + part * gl.expand_dims(scale, 1)
    return acc


@gluon.jit
def _consumer(bufs, bars, ptrs, work, M, N, PER_CHANNEL: gl.constexpr, PARTIALS: gl.constexpr,
              STAGES: gl.constexpr, BLOCK_M: gl.constexpr, KN: gl.constexpr, SYNC_MMA: gl.constexpr,
              PDL: gl.constexpr, record, RECORD: gl.constexpr, CLUSTER: gl.constexpr):
    """One warpgroup: for each column tile of the program's segment, its blocks of k, then the tile's store."""
    if CLUSTER > 1:
        _cluster_arrive()
    if PDL:  # C, the partials and the counters were the launch before's too: touch none of them before it ends
        _grid_wait()
        _grid_launch_dependents()  # after the wait, so at most two launches are in flight
    ready, empty = bars
    w_smem, a_smem, s_smem = bufs
    KB, U, P, SLOTS = work
    if SYNC_MMA:  # mma.sync m16n8k16: each warp its 16 columns, operands in registers, no asynchronous wait
        acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[2, 0], warps_per_cta=[4, 1],
                                                             instr_shape=[16, 8])
    else:
        acc_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                             instr_shape=[16, BLOCK_M, 16])
    w_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=acc_layout, k_width=2)
    a_layout: gl.constexpr = gl.DotOperandLayout(operand_index=1, parent=acc_layout, k_width=2)
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
    pid = gl.program_id(0)
    start, end = _segment(pid, P, U)
    b = 0  # the program's running block count (its stage and phase), as the producer counts
    summed = 0
    if RECORD:  # block 0's ready barrier passes again at once after the loop's wait, so waiting here moves nothing
        mbarrier.wait(ready.index(0), 0)
        t_first = _now()
        t_last = t_first
    for t in range(start // KB, (end - 1) // KB + 1):
        k0 = gl.maximum(start - t * KB, 0)
        k1 = gl.minimum(end - t * KB, KB)
        # ptxas places an MMA's wait before the unpack of a next block written between the MMA and the wait, so
        # each block is unpacked, multiplied and waited for; the other programs on the SM fill the wait (a loop
        # that chained the MMAs on fp16-scaled weights measured slower: docs/decisions/0001)
        acc = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=acc_layout)
        for _ in range(k0, k1):
            if SYNC_MMA:
                acc = _sync_block(acc, b, bufs, bars, words_layout, w_layout, a_layout, acc_layout, PER_CHANNEL,
                                  STAGES, BLOCK_M, KN)
            else:
                w = _unpack(_words(w_smem, ready, b, STAGES, words_layout, KN), w_layout, KN)
                tok = _issue(acc, w, b, a_smem, PER_CHANNEL, STAGES, acc_layout, BLOCK_M)
                acc = _retire(acc, tok, b, s_smem, empty, PER_CHANNEL, STAGES, acc_layout)
            b += 1
        if RECORD:
            t_last = _now()
        summed += _finish(acc, t, k0, k1, pid, work, ptrs, M, N, PER_CHANNEL, PARTIALS, BLOCK_M, acc_layout,
                          CLUSTER)
    if RECORD:
        rec_ptr, t_start = record
        _write_row(rec_ptr, t_start, t_first, t_last, b, summed, RECORD)


@gluon.jit
def _prefetch_descriptors():
    """Thread 0 has the TMA unit fetch the three descriptors while the program sets up, rather than at its first
    copies (measured faster: docs/decisions/0001). PTX names the parameters: the descriptors
    are _w4a16_gluon's parameters 0, 5 and 10 (each flattened to the descriptor, its shape and its strides);
    ``tests/kernels/test_w4a16_gluon.py`` checks the SASS prefetches (UTMACCTL.PF) before the first copy."""
    gl.inline_asm_elementwise(
        "{ .reg .pred p; .reg .b32 t; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; "
        "@p prefetch.param.tensormap [_w4a16_gluon_param_0]; @p prefetch.param.tensormap [_w4a16_gluon_param_5]; "
        "@p prefetch.param.tensormap [_w4a16_gluon_param_10]; } // dummy $0",
        "=r", [], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _w4a16_gluon(w_desc, a_desc, s_desc, c_ptr, s_ptr, part_ptr, count_ptr, M, N, KB, U, P, SLOTS, rec_ptr,
                 GROUP_BLOCKS: gl.constexpr, PER_CHANNEL: gl.constexpr, PARTIALS: gl.constexpr,
                 STAGES: gl.constexpr, BLOCK_M: gl.constexpr, SYNC_MMA: gl.constexpr, PDL: gl.constexpr,
                 RECORD: gl.constexpr, CLUSTER: gl.constexpr, num_warps: gl.constexpr):
    _prefetch_descriptors()
    t_start = 0
    if RECORD:
        t_start = _now()
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
    if CLUSTER > 1:  # program 0's receive mbarrier expects the other programs' partials
        _cluster_init(CLUSTER, BLOCK_N, BLOCK_M)
    # in clusters the producer's partition is a full warpgroup: every thread must arrive on the cluster barrier
    WORKER_WARPS: gl.constexpr = 4 if CLUSTER > 1 else 1
    bufs = (w_smem, a_smem, s_smem)
    bars = (ready, empty)
    work = (KB, U, P, SLOTS)
    gl.warp_specialize([
        (_consumer, (bufs, bars, (c_ptr, s_ptr, part_ptr, count_ptr), work, M, N, PER_CHANNEL, PARTIALS, STAGES,
                     BLOCK_M, KN, SYNC_MMA, PDL, (rec_ptr, t_start), RECORD, CLUSTER)),
        (_producer, (bufs, bars, (w_desc, a_desc, s_desc), work, N, PER_CHANNEL, GROUP_BLOCKS, STAGES, KN, PDL,
                     CLUSTER)),
    ], [WORKER_WARPS], [PRODUCER_REGS])


def gluon_w4a16(a: torch.Tensor, words: torch.Tensor, s: torch.Tensor, groupsize: int, n: int, *,
                programs: int | None = None, stages: int = 4, maxnreg: int | None = 96,
                out: torch.Tensor | None = None, sync_mma: bool = False, pdl: bool = False,
                records: torch.Tensor | None = None, record_values: int = len(FIELDS),
                cluster: int = 1) -> torch.Tensor:
    """fp16 ``a (m, k) @ dequant(words, s)`` -> (m, n). ``words``: ``Bg`` of :func:`to_gluon_layout` or ``Bk``
    of :func:`gemm.to_kernel_layout` itself (the Triton kernel's weights); ``s`` from
    :func:`gemm.to_kernel_layout`. ``programs``: the grid, each program an even share of the (column tile, k
    block) units (stream-K, :func:`work_split`); None: one program a column tile. ``maxnreg`` caps each thread's
    registers at launch (None: the compiler's choice). A program is 8 warps: Triton pads the producer warp's
    partition to a warpgroup for its register reallocation, so two programs fit an SM at 96 registers (three at 80,
    four at 64). ``sync_mma``: multiply with mma.sync instead of the warpgroup MMA (see the module's notes).
    ``pdl``: launch as a programmatic dependent launch, so that the launch starts while the one before it on the
    stream ends and copies its first blocks of weights meanwhile. Only for weights and scales that the launch just
    before does not write (a model's forward; not right after packing them). ``records``: an int64 tensor of at
    least ``programs`` x ``record_values`` values on the device, into which each program writes its row
    (:mod:`gluon_record`; measurements only): 4 values, the block recorder's row, or 8, with its phase times.
    ``cluster``: S > 1 launches each column tile's S programs as one thread-block cluster and sums their partials
    through distributed shared memory (:mod:`gluon_cluster`); ``programs`` must then be the tiles x S and S must
    divide the k blocks."""
    why = supported(a, n)
    if why:
        raise ValueError(f"gluon_w4a16: {why}.")
    m, k = a.shape
    pack_k, block_n = PACK_K.value, BLOCK_N.value
    tiles = n // block_n
    programs = tiles if programs is None else programs
    kn, rows = check_args(a, words, s, groupsize, n, programs, stages, out)
    if record_values not in (ROW_VALUES, len(FIELDS)):
        raise ValueError(f"gluon_w4a16: record_values must be {ROW_VALUES} or {len(FIELDS)}, got {record_values}.")
    if records is not None and (records.dtype != torch.int64 or records.device != a.device
                                or records.numel() < programs * record_values):
        raise ValueError(f"gluon_w4a16: records must be an int64 tensor on {a.device} of at least "
                         f"{programs * record_values} values.")
    block_m = block_m_for(m)
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
    kb, units, partials, slots = work_split(k, n, programs)
    check_cluster(cluster, programs, tiles, kb)
    if partials and cluster == 1:
        parts = torch.empty(tiles * slots * block_n * block_m, dtype=torch.float32, device=a.device)
        counters = tile_counters(a.device, tiles)
    else:
        parts = counters = out  # never read: the PARTIALS branch is compiled out
    args = (w_desc, a_desc, s_desc, out, s, parts, counters, m, n, kb, units, programs, slots,
            out if records is None else records)
    kwargs = dict(GROUP_BLOCKS=1 if per_channel else rows // pack_k, PER_CHANNEL=per_channel, PARTIALS=partials,
                  STAGES=stages, BLOCK_M=block_m, SYNC_MMA=sync_mma, PDL=pdl,
                  RECORD=0 if records is None else record_values, CLUSTER=cluster, num_warps=4, launch_pdl=pdl,
                  **({"maxnreg": maxnreg} if maxnreg else {}))
    if cluster > 1:
        launch_in_clusters(_w4a16_gluon, programs, cluster, extra_bytes(cluster, block_n, block_m), args, kwargs)
    else:
        _w4a16_gluon[(programs, )](*args, **kwargs)
    return out
