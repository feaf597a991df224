"""The Gluon W4A16 decode kernel for Hopper (Triton 3.6's explicit-layout dialect) and its launch,
:func:`gluon_w4a16`; the host-side checks, the stream-K split and the cluster launcher are :mod:`gluon_host`.

A program is warp-specialised:

* a producer warp copies each block's weights, activations and scales into a stage of shared memory with TMA,
  STAGES blocks ahead of the consumer, guarded by ready / empty mbarriers (:func:`_producer`);
* a consumer warpgroup of 64 output columns moves a block's words from shared memory to registers, unpacks them
  (the PTX of :mod:`unpack_ptx`) into the warpgroup MMA's register operand as they are (no shuffle, no trip
  through shared memory) and multiplies (:func:`_consumer`).

Work is split stream-K: the grid is any number of programs, and each takes an even share of the layer's
(column tile, k block) units in tile-major order, so the grid fills the SMs evenly whatever the number of column
tiles (:func:`gluon_host.work_split`). A tile shared by programs is summed by the one whose blocks complete it
(:func:`_finish`), through L2 (partials and a tile counter) or, with CLUSTER > 1, through distributed shared memory
(the ``_cluster_*`` functions). A program is 8 warps (the producer warp's partition is padded to a warpgroup), so
two fit an SM at 96 registers a thread, three at 80 and four at 64 (the consumer warpgroup still gets 104-168 by
``setmaxnreg``).

Swapped product, as the Triton kernel's: ``C^T (n x m) = W^T (n x k) A^T (k x m)``, so n fills the MMA's 64-row
side and the m <= 64 tokens (padded to BLOCK_M = 8, 16, 32 or 64 by TMA's zero fill) its N side.

Weights: the Triton kernel's layout ``Bk`` of :mod:`gemm` (one copy of a model's weights serves both kernels), as
(16, 64) tiles of (word, column) in 128-byte-swizzled shared memory, read word by word (2-way bank conflicts,
``gl.bank_conflicts``; 4-way unswizzled).

The consumer waits for each block's MMA before it unpacks the next and adds the block's sum times its scales in
fp32, as the Triton kernel does. With SYNC_MMA it multiplies with mma.sync instead (m16n8k16, each warp its 16
columns, four independent 32-deep sums a block, the stage released as soon as its operands are in registers).
With PDL the launch is a programmatic dependent launch: the producer copies its first blocks' words and scales
before ``griddepcontrol.wait`` (the launch before it may still run), and nothing reads the activations or writes C,
the partials or the counters before it. With RECORD each program writes the block recorder's row (SM, start and
end time). Past 16 tokens a shared tile's partials are stored column-major (a 32-byte sector per quad of threads)
and summed one slot at a time.

Distributed shared memory, which Gluon 3.6 does not expose, is reached through PTX: the kernel is compiled for one
CTA and launched with a cluster dimension (:func:`gluon_host.launch_in_clusters`); the receive region is dynamic
shared memory past what Triton allocates, found at ``global_smem + %dynamic_smem_size - extra``, its mbarrier in
the last 16 bytes. Programs 1..S-1 of a tile's cluster send their partials with asynchronous remote stores
(``st.async``) that count their bytes on program 0's mbarrier; program 0 waits for the bytes and adds the partials
in program order (the L2 sum's order, so the bits are the same). The cluster barrier makes program 0's mbarrier
initialisation visible before any partner's store; it counts every thread of the cluster, so the producer's
partition is then a full warpgroup.
"""
from __future__ import annotations

import torch
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import mma_v2
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait
from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

from kernelscope.collect.instrument.triton_blocks import GLOBALTIMER_PTX, NSMID_PTX, SMID_PTX
from kernelscope.collect.instrument.layout import ROW_VALUES, SM_BITS

from . import gluon_host
from .gluon_host import (block_m_for, check_args, check_cluster, extra_bytes, launch_in_clusters, supported,
                         work_split)
from .split_counters import tile_counters
from .unpack_ptx import UNPACK_PTX

# constexpr objects, so that the jitted functions may read them
PACK_K = gl.constexpr(gluon_host.PACK_K)  # rows of k per block, as in gemm.py
BLOCK_N = gl.constexpr(gluon_host.BLOCK_N)  # output columns per program: one MMA's M side (a warpgroup's 64)
_WORDS = gl.constexpr(gluon_host.WORDS)
PRODUCER_REGS = gl.constexpr(24)  # setmaxnreg of the producer warp's partition: issuing TMA copies needs few
_UNPACK: gl.constexpr = gl.constexpr(UNPACK_PTX)
_GLOBALTIMER = gl.constexpr(GLOBALTIMER_PTX)
_SMID = gl.constexpr(SMID_PTX)
_NSMID = gl.constexpr(NSMID_PTX)
_SM_BITS = gl.constexpr(SM_BITS)
_ROW_VALUES = gl.constexpr(ROW_VALUES)
BARRIER_BYTES = gluon_host.BARRIER_BYTES


# --- the cluster sum through distributed shared memory ---
# the receive region's end: global_smem + %dynamic_smem_size (into register a; each snippet starts with it)
_END = "mov.u32 a, global_smem; mov.u32 d, %dynamic_smem_size; add.u32 a, a, d; "
_BAR = _END + f"sub.u32 a, a, {BARRIER_BYTES}; "
# thread 0: one arrival (its own, with the bytes to expect), then the fence that publishes the initialisation
_INIT = gl.constexpr("{ .reg .pred p; .reg .b32 t, a, d; mov.u32 t, %tid.x; setp.eq.u32 p, t, 0; " + _BAR
                     + "@p mbarrier.init.shared::cta.b64 [a], 1; @p mbarrier.arrive.expect_tx.shared::cta.b64 _, [a], "
                     "$1; @p fence.mbarrier_init.release.cluster; } // dummy $0")
# an asynchronous remote store that counts its 4 bytes on program 0's mbarrier: no fence, no arrival
_STORE = gl.constexpr("{ .reg .b32 a, b, d; " + _END + f"sub.u32 b, a, {BARRIER_BYTES}; add.u32 a, a, $2; "
                      "mapa.shared::cluster.u32 a, a, 0; mapa.shared::cluster.u32 b, b, 0; "
                      "st.async.shared::cluster.mbarrier::complete_tx::bytes.f32 [a], $1, [b]; mov.u32 $0, 0; }")
# labels inside braces are local to the block (as CUTLASS's cluster barrier wait writes it)
_WAIT = gl.constexpr("{ .reg .pred p; .reg .b32 a, d; " + _BAR + "WAIT: mbarrier.try_wait.parity.acquire.cluster"
                     ".shared::cta.b64 p, [a], 0; @!p bra WAIT; } // dummy $0")
_LOAD = gl.constexpr("{ .reg .b32 a, d; " + _END + "add.u32 a, a, $1; ld.shared.f32 $0, [a]; }")
_BARRIER_BYTES = gl.constexpr(BARRIER_BYTES)


@gluon.jit
def _cluster_init(CLUSTER: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr):
    """Program 0's receive mbarrier (every program initialises one; only program 0's is used): thread 0 initialises
    it for its own arrival, which expects the CLUSTER - 1 partners' partial slots, and fences the initialisation for
    the cluster (the cluster barrier then publishes it)."""
    nbytes = gl.program_id(0) * 0 + (CLUSTER - 1) * BLOCK_N * BLOCK_M * 4  # a register operand for the PTX
    gl.inline_asm_elementwise(_INIT, "=r,r", [nbytes], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _cluster_arrive():
    """Every thread of every program arrives once on the cluster barrier, as its partition starts (relaxed: the
    initialisation's own fence orders it)."""
    gl.inline_asm_elementwise("barrier.cluster.arrive.relaxed.aligned; // dummy $0", "=r", [], dtype=gl.int32,
                              is_pure=False, pack=1)


@gluon.jit
def _cluster_wait():
    """Until every thread of the cluster has arrived: program 0 runs and its mbarrier is initialised."""
    gl.inline_asm_elementwise("barrier.cluster.wait.acquire.aligned; // dummy $0", "=r", [], dtype=gl.int32,
                              is_pure=False, pack=1)


@gluon.jit
def _cluster_send(acc, offs, rank, CLUSTER: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr):
    """Program ``rank`` > 0 of the tile's cluster: once the cluster barrier has passed (program 0 runs, its mbarrier
    is initialised), each element of its partial into slot rank - 1 of program 0's receive region (``offs``: the
    element's index in a (BLOCK_N, BLOCK_M) slot), each store counting its bytes on program 0's mbarrier."""
    SLOT: gl.constexpr = BLOCK_N * BLOCK_M * 4
    EXTRA: gl.constexpr = (CLUSTER - 1) * SLOT + _BARRIER_BYTES
    _cluster_wait()
    gl.inline_asm_elementwise(_STORE, "=r,f,r", [acc, offs * 4 + ((rank - 1) * SLOT - EXTRA)], dtype=gl.int32,
                              is_pure=False, pack=1)


@gluon.jit
def _cluster_total(acc, offs, CLUSTER: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr):
    """Program 0 of the tile's cluster: once the partners' bytes have all landed (acquire: they are visible),
    its own partial plus the received ones in program order, from zero, as the stream-K sum adds them (same bits)."""
    SLOT: gl.constexpr = BLOCK_N * BLOCK_M * 4
    EXTRA: gl.constexpr = (CLUSTER - 1) * SLOT + _BARRIER_BYTES
    gl.inline_asm_elementwise(_WAIT, "=r", [], dtype=gl.int32, is_pure=False, pack=1)
    total = gl.zeros_like(acc) + acc
    for j in gl.static_range(CLUSTER - 1):
        total = total + gl.inline_asm_elementwise(_LOAD, "=f,r", [offs * 4 + (j * SLOT - EXTRA)], dtype=gl.float32,
                                                  is_pure=False, pack=1)
    return total


# --- the producer: stream-K segments, TMA copies, programmatic dependent launch ---
@gluon.jit
def _grid_wait():
    """griddepcontrol.wait: until the launch before this one (on the stream) has finished and its writes are
    visible; returns at once when the launch was not programmatic-dependent."""
    gl.inline_asm_elementwise("griddepcontrol.wait; // dummy $0", "=r", [], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _grid_launch_dependents():
    """griddepcontrol.launch_dependents: the next programmatic-dependent launch may start once every program ran it."""
    gl.inline_asm_elementwise("griddepcontrol.launch_dependents; // dummy $0", "=r", [], dtype=gl.int32,
                              is_pure=False, pack=1)


@gluon.jit
def _segment(pid, P, U):
    """Program pid's units [start, end): an even share of the U = tiles x k-blocks units, tile-major (stream-K)."""
    return pid * U // P, (pid + 1) * U // P


@gluon.jit
def _copy_words(bufs, bars, descs, u, b, PER_CHANNEL: gl.constexpr, STAGES: gl.constexpr, KB):
    """Unit u's words into stage b % STAGES, once the consumer has released it; the stage's ready barrier expects
    the activations' and (per group) the scales' bytes too (:func:`_copy_activations`, :func:`_copy_scales`)."""
    w_desc, a_desc, s_desc = descs
    ready, empty = bars
    w_smem, a_smem, s_smem = bufs
    WA_BYTES: gl.constexpr = w_desc.block_type.nbytes + a_desc.block_type.nbytes
    S_BYTES: gl.constexpr = s_desc.block_type.nbytes
    t = u // KB
    kb = u - t * KB
    stage = b % STAGES
    mbarrier.wait(empty.index(stage), ((b // STAGES) & 1) ^ 1)  # a fresh barrier passes phase 1 at once
    if PER_CHANNEL:
        mbarrier.expect(ready.index(stage), WA_BYTES)
    else:
        mbarrier.expect(ready.index(stage), WA_BYTES + S_BYTES)
    tma.async_copy_global_to_shared(w_desc, [kb * _WORDS, t * BLOCK_N], ready.index(stage), w_smem.index(stage))


@gluon.jit
def _copy_activations(bufs, bars, a_desc, u, b, STAGES: gl.constexpr, KB):
    """Unit u's activations into stage b % STAGES (its ready barrier already expects them)."""
    ready, empty = bars
    w_smem, a_smem, s_smem = bufs
    kb = u - (u // KB) * KB
    tma.async_copy_global_to_shared(a_desc, [0, kb * PACK_K], ready.index(b % STAGES), a_smem.index(b % STAGES))


@gluon.jit
def _copy_scales(bufs, bars, s_desc, u, b, N, PER_CHANNEL: gl.constexpr, GROUP_BLOCKS: gl.constexpr,
                 STAGES: gl.constexpr, KB):
    """Unit u's group scales into stage b % STAGES (none per column: the consumer's epilogue loads those)."""
    ready, empty = bars
    w_smem, a_smem, s_smem = bufs
    if not PER_CHANNEL:
        t = u // KB
        kb = u - t * KB
        tma.async_copy_global_to_shared(s_desc, [(kb // GROUP_BLOCKS) * N + t * BLOCK_N],
                                        ready.index(b % STAGES), s_smem.index(b % STAGES))


@gluon.jit
def _producer(bufs, bars, descs, work, N, PER_CHANNEL: gl.constexpr, GROUP_BLOCKS: gl.constexpr,
              STAGES: gl.constexpr, PDL: gl.constexpr, CLUSTER: gl.constexpr):
    """One warp: TMA copies of each unit's words, activations and (per group) scales, STAGES blocks ahead. With PDL
    the first STAGES blocks' words and scales are copied before the launch before this one has ended (they are
    weights, which no kernel of a forward writes), their activations after it. In clusters the partition is a
    warpgroup (every thread arrives on the cluster barrier; the copies are issued by one thread as before)."""
    if CLUSTER > 1:
        _cluster_arrive()
    w_desc, a_desc, s_desc = descs
    KB, U, P, SLOTS = work
    start, end = _segment(gl.program_id(0), P, U)
    first = start
    if PDL:
        first = gl.minimum(start + STAGES, end)
        for u in range(start, first):
            _copy_words(bufs, bars, descs, u, u - start, PER_CHANNEL, STAGES, KB)
            _copy_scales(bufs, bars, s_desc, u, u - start, N, PER_CHANNEL, GROUP_BLOCKS, STAGES, KB)
        _grid_wait()
        for u in range(start, first):
            _copy_activations(bufs, bars, a_desc, u, u - start, STAGES, KB)
    for u in range(first, end):
        _copy_words(bufs, bars, descs, u, u - start, PER_CHANNEL, STAGES, KB)
        _copy_activations(bufs, bars, a_desc, u, u - start, STAGES, KB)
        _copy_scales(bufs, bars, s_desc, u, u - start, N, PER_CHANNEL, GROUP_BLOCKS, STAGES, KB)


# --- the end of a column tile ---
@gluon.jit
def _slot(parts, j, count, offs, mask, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr):
    """Partial slot j of a tile (zeros past its count: x + 0.0 is x, so the sum is the same)."""
    return gl.load(parts + j * (BLOCK_N * BLOCK_M) + offs, mask=mask & (j < count), other=0.0, cache_modifier=".cg")


@gluon.jit
def _tile_offsets(BLOCK_M: gl.constexpr, acc_layout: gl.constexpr):
    """Each accumulator element's index in a partial slot: token-major (BLOCK_M, BLOCK_N) for BLOCK_M <= 16, else
    column-major, where a thread's two neighbouring tokens and its quad's eight are one 32-byte sector (token-major,
    each 4-byte element of a wide tile is a sector of its own)."""
    toks = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, acc_layout))
    cols = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, acc_layout))
    if BLOCK_M <= 16:
        return gl.expand_dims(toks, 0) * BLOCK_N + gl.expand_dims(cols, 1)
    return gl.expand_dims(toks, 0) + gl.expand_dims(cols, 1) * BLOCK_M


@gluon.jit
def _token_mask(M, BLOCK_M: gl.constexpr, acc_layout: gl.constexpr):
    """The accumulator's columns of tokens < M (TMA zero-filled the rest)."""
    return gl.expand_dims(gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, acc_layout)) < M, 0)


@gluon.jit
def _store_c(c_ptr, t, M, N, tile, BLOCK_M: gl.constexpr, acc_layout: gl.constexpr):
    """Tile t of C^T (fp32 (BLOCK_N, BLOCK_M)) into C as fp16. The pointers are made here, at the store, so that a
    wide tile's (32 a thread at BLOCK_M = 64, 64-bit each) are not live across the split-tile sum."""
    cols = t * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, acc_layout))
    toks = gl.arange(0, BLOCK_M, layout=gl.SliceLayout(0, acc_layout))
    gl.store(c_ptr + gl.expand_dims(toks, 0) * N + gl.expand_dims(cols, 1), tile.to(gl.float16),
             mask=_token_mask(M, BLOCK_M, acc_layout))


@gluon.jit
def _finish(acc, t, k0, k1, pid, work, ptrs, M, N, PER_CHANNEL: gl.constexpr, PARTIALS: gl.constexpr,
            BLOCK_M: gl.constexpr, acc_layout: gl.constexpr, CLUSTER: gl.constexpr):
    """Store tile t's sum over k-blocks [k0, k1): straight to C when the program did the whole tile, else as the
    partial in its slot, counted in on the tile's counter; the program whose blocks complete the count adds the
    tile's partials in program order (deterministic), stores C and resets the counter for the next launch. In
    clusters (CLUSTER > 1, a tile's programs one cluster) the partials go to the cluster's program 0 through
    distributed shared memory instead (:func:`_cluster_send`, :func:`_cluster_total`)."""
    c_ptr, s_ptr, part_ptr, count_ptr = ptrs
    KB, U, P, SLOTS = work
    if PER_CHANNEL:
        cols = t * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, acc_layout))
        acc = acc * gl.expand_dims(gl.load(s_ptr + cols).to(gl.float32), 1)
    if CLUSTER > 1:
        offs = _tile_offsets(BLOCK_M, acc_layout)
        if pid % CLUSTER == 0:
            total = _cluster_total(acc, offs, CLUSTER, BLOCK_N, BLOCK_M)
            _store_c(c_ptr, t, M, N, total, BLOCK_M, acc_layout)
        else:
            _cluster_send(acc, offs, pid % CLUSTER, CLUSTER, BLOCK_N, BLOCK_M)
    elif PARTIALS:
        if k1 - k0 == KB:
            _store_c(c_ptr, t, M, N, acc, BLOCK_M, acc_layout)
        else:
            # the programs that share tile t are first..last (_segment inverted); a program's slot is pid - first
            first = ((t * KB + 1) * P - 1) // U
            last = ((t * KB + KB) * P - 1) // U
            parts = part_ptr + t * (SLOTS * BLOCK_N * BLOCK_M)
            gl.store(parts + (pid - first) * (BLOCK_N * BLOCK_M) + _tile_offsets(BLOCK_M, acc_layout), acc,
                     mask=_token_mask(M, BLOCK_M, acc_layout))
            gl.thread_barrier()  # every thread's partial is stored before the counter says so
            done = gl.atomic_add(count_ptr + t, k1 - k0, sem="acq_rel", scope="gpu")
            if done + (k1 - k0) == KB:
                total = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=acc_layout)
                count = last - first + 1
                offs = _tile_offsets(BLOCK_M, acc_layout)
                mask = _token_mask(M, BLOCK_M, acc_layout)
                if BLOCK_M <= 16:
                    # four slots' loads issued together (masked past the last slot), then added in slot order: a
                    # plain loop compiled to a peeled odd slot, a loop of four and a pair, two L2 round trips for
                    # three slots
                    for j in range(0, count, 4):
                        p0 = _slot(parts, j, count, offs, mask, BLOCK_N, BLOCK_M)
                        p1 = _slot(parts, j + 1, count, offs, mask, BLOCK_N, BLOCK_M)
                        p2 = _slot(parts, j + 2, count, offs, mask, BLOCK_N, BLOCK_M)
                        p3 = _slot(parts, j + 3, count, offs, mask, BLOCK_N, BLOCK_M)
                        total = (((total + p0) + p1) + p2) + p3
                else:  # a wider slot is 32-64 registers a thread: four at once spilled (CPU compile, sm_90)
                    for j in range(0, count):
                        total = total + _slot(parts, j, count, offs, mask, BLOCK_N, BLOCK_M)
                _store_c(c_ptr, t, M, N, total, BLOCK_M, acc_layout)
                gl.atomic_xchg(count_ptr + t, 0, sem="relaxed", scope="gpu")  # ready for the next launch
    else:
        _store_c(c_ptr, t, M, N, acc, BLOCK_M, acc_layout)


# --- the block recorder's row ---
@gluon.jit
def _now():
    """%globaltimer (ns); not pure, so that two reads are neither merged nor moved."""
    return gl.inline_asm_elementwise(_GLOBALTIMER, "=l", [], dtype=gl.int64, is_pure=False, pack=1)


@gluon.jit
def _sm():
    """The block recorder's SM column: %smid | %nsmid << SM_BITS."""
    smid = gl.inline_asm_elementwise(_SMID, "=r", [], dtype=gl.int32, is_pure=False, pack=1)
    nsmid = gl.inline_asm_elementwise(_NSMID, "=r", [], dtype=gl.int32, is_pure=False, pack=1)
    return smid.to(gl.int64) | (nsmid.to(gl.int64) << _SM_BITS)


@gluon.jit
def _write_row(rec_ptr, t_start):
    """The program's row of the block recorder (collect/instrument/layout.py: program, SM, start and end time;
    every thread of the warpgroup stores the same values)."""
    t_end = _now()
    pid = gl.program_id(0)
    row = rec_ptr + pid.to(gl.int64) * _ROW_VALUES
    gl.store(row, pid.to(gl.int64))
    gl.store(row + 1, _sm())
    gl.store(row + 2, t_start)
    gl.store(row + 3, t_end)


# --- the consumer and the kernel ---
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
def _unpack(words, w_layout: gl.constexpr):
    """(64, 16) words of a block [column, word] -> (64, 128) fp16 q - 8 [column, k] in the MMA's register-operand
    layout. The words come in Bk's order (word j = q + 4 v).

    Word j of a block holds, for slice i, the pair k = 32 i + 2 j + (0, 1) as one f16x2 register after the PTX;
    the joins, reshapes and permute below only name registers (k = 32 i + 8 v + 2 q + h)."""
    t0, t1, t2, t3 = _nibble_slices(words)
    x = gl.join(gl.join(t0, t1), gl.join(t2, t3))  # [c, word, i % 2, i // 2]
    x = gl.reshape(x, [64, 4, 4, 2, 2])
    x = gl.permute(x, [0, 4, 3, 1, 2])  # [c, v, q, i0, i1] -> [c, i1, i0, v, q]
    pairs = gl.reshape(x, [64, 64])  # [c, 16 i + 4 v + q]: pair p holds k = 2 p, 2 p + 1
    return _fp16_pairs(pairs, 128, w_layout)


@gluon.jit
def _words(w_smem, ready, b, STAGES: gl.constexpr, words_layout: gl.constexpr):
    """Block b's words as (column, word), once its TMA copy has landed (Bk's (word, column) tile transposed)."""
    mbarrier.wait(ready.index(b % STAGES), (b // STAGES) & 1)
    return gl.permute(w_smem.index(b % STAGES).load(words_layout), [1, 0])


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
def _slice_operand(t, w_layout: gl.constexpr):
    """One nibble slice i of a block's unpacked words, (64, 16) f16x2 pairs [column, word] -> (64, 32) fp16 for
    k = 32 i + 8 v + 2 q + h in mma.sync's register-operand layout (the reshapes only name registers)."""
    x = gl.permute(gl.reshape(t, [64, 4, 4]), [0, 1, 2])  # [c, v, q]
    return _fp16_pairs(gl.reshape(x, [64, 16]), 32, w_layout)


@gluon.jit
def _sync_block(acc, b, bufs, bars, words_layout: gl.constexpr, w_layout: gl.constexpr, a_layout: gl.constexpr,
                acc_layout: gl.constexpr, PER_CHANNEL: gl.constexpr, STAGES: gl.constexpr, BLOCK_M: gl.constexpr):
    """Block b with mma.sync: its words, activations and scales into registers, the stage released to the producer
    at once, then each 32-deep nibble slice multiplied into its own sum (four chains of two MMAs instead of one of
    eight), and the block's sum times its scales added (fp32)."""
    ready, empty = bars
    w_smem, a_smem, s_smem = bufs
    stage = b % STAGES
    words = _words(w_smem, ready, b, STAGES, words_layout)
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
    p0 = mma_v2(_slice_operand(t0, w_layout), a0, zero)
    p1 = mma_v2(_slice_operand(t1, w_layout), a1, zero)
    p2 = mma_v2(_slice_operand(t2, w_layout), a2, zero)
    p3 = mma_v2(_slice_operand(t3, w_layout), a3, zero)
    part = (p0 + p1) + (p2 + p3)
    if PER_CHANNEL:
        acc = acc + part
    else:
        acc = acc + part * gl.expand_dims(scale, 1)
    return acc


@gluon.jit
def _consumer(bufs, bars, ptrs, work, M, N, PER_CHANNEL: gl.constexpr, PARTIALS: gl.constexpr,
              STAGES: gl.constexpr, BLOCK_M: gl.constexpr, SYNC_MMA: gl.constexpr, PDL: gl.constexpr, record,
              RECORD: gl.constexpr, CLUSTER: gl.constexpr):
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
    # the four words v and the column + 8, warps the 16-column slabs. The (word, column) tile is read word by word
    # from 128-byte-swizzled shared memory (2-way bank conflicts, gl.bank_conflicts; 4-way unswizzled).
    words_layout: gl.constexpr = gl.DistributedLinearLayout(
        reg_bases=[[4, 0], [8, 0], [0, 8]], lane_bases=[[1, 0], [2, 0], [0, 1], [0, 2], [0, 4]],
        warp_bases=[[0, 16], [0, 32]], block_bases=[], shape=[_WORDS, BLOCK_N])
    pid = gl.program_id(0)
    start, end = _segment(pid, P, U)
    b = 0  # the program's running block count (its stage and phase), as the producer counts
    for t in range(start // KB, (end - 1) // KB + 1):
        k0 = gl.maximum(start - t * KB, 0)
        k1 = gl.minimum(end - t * KB, KB)
        # ptxas places an MMA's wait before the unpack of a next block written between the MMA and the wait, so
        # each block is unpacked, multiplied and waited for; the other programs on the SM fill the wait
        acc = gl.zeros([BLOCK_N, BLOCK_M], gl.float32, layout=acc_layout)
        for _ in range(k0, k1):
            if SYNC_MMA:
                acc = _sync_block(acc, b, bufs, bars, words_layout, w_layout, a_layout, acc_layout, PER_CHANNEL,
                                  STAGES, BLOCK_M)
            else:
                w = _unpack(_words(w_smem, ready, b, STAGES, words_layout), w_layout)
                tok = _issue(acc, w, b, a_smem, PER_CHANNEL, STAGES, acc_layout, BLOCK_M)
                acc = _retire(acc, tok, b, s_smem, empty, PER_CHANNEL, STAGES, acc_layout)
            b += 1
        _finish(acc, t, k0, k1, pid, work, ptrs, M, N, PER_CHANNEL, PARTIALS, BLOCK_M, acc_layout, CLUSTER)
    if RECORD:
        rec_ptr, t_start = record
        _write_row(rec_ptr, t_start)


@gluon.jit
def _prefetch_descriptors():
    """Thread 0 has the TMA unit fetch the three descriptors while the program sets up, rather than at its first
    copies. PTX names the parameters: the descriptors are _w4a16_gluon's parameters 0, 5 and 10 (each flattened to
    the descriptor, its shape and its strides); ``tests/kernels/test_w4a16_gluon.py`` checks that the SASS
    prefetches them (UTMACCTL.PF) before the first copy."""
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
    w_smem = gl.allocate_shared_memory(gl.int32, [STAGES, _WORDS, BLOCK_N], w_desc.layout)
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
                     BLOCK_M, SYNC_MMA, PDL, (rec_ptr, t_start), RECORD, CLUSTER)),
        (_producer, (bufs, bars, (w_desc, a_desc, s_desc), work, N, PER_CHANNEL, GROUP_BLOCKS, STAGES, PDL,
                     CLUSTER)),
    ], [WORKER_WARPS], [PRODUCER_REGS])


def gluon_w4a16(a: torch.Tensor, words: torch.Tensor, s: torch.Tensor, groupsize: int, n: int, *,
                programs: int | None = None, stages: int = 4, max_registers: int | None = 96,
                out: torch.Tensor | None = None, sync_mma: bool = False, pdl: bool = False,
                records: torch.Tensor | None = None, cluster_size: int = 1) -> torch.Tensor:
    """fp16 ``a (m, k) @ dequant(words, s)`` -> (m, n), with ``(words, s)`` from :func:`gemm.to_kernel_layout` (the
    Triton kernel's weights). ``programs``: the grid, each program an even share of the (column tile, k block)
    units (stream-K, :func:`work_split`); None: one program a column tile. ``max_registers`` caps each thread's
    registers at launch (None: the compiler's choice). A program is 8 warps: Triton pads the producer warp's
    partition to a warpgroup for its register reallocation, so two programs fit an SM at 96 registers (three at 80,
    four at 64). ``sync_mma``: multiply with mma.sync instead of the warpgroup MMA. ``pdl``: launch as a
    programmatic dependent launch, so that the launch starts while the one before it on the stream ends and copies
    its first blocks of weights meanwhile; only for weights and scales that the launch just before does not write
    (a model's forward; not right after packing them). ``records``: an int64 tensor of at least ``programs`` x 4
    values on the device, into which each program writes the block recorder's row. ``cluster_size``: S > 1 launches
    each column tile's S programs as one thread-block cluster and sums their partials through distributed shared
    memory; ``programs`` must then be the tiles x S and S must divide the k blocks."""
    why = supported(a, n)
    if why:
        raise ValueError(f"gluon_w4a16: {why}.")
    pack_k, block_n, words_a_block = gluon_host.PACK_K, gluon_host.BLOCK_N, gluon_host.WORDS
    m, k = a.shape
    tiles = n // block_n
    programs = tiles if programs is None else programs
    rows = check_args(a, words, s, groupsize, n, programs, stages, out)
    if records is not None and (records.dtype != torch.int64 or records.device != a.device
                                or records.numel() < programs * ROW_VALUES):
        raise ValueError(f"gluon_w4a16: records must be an int64 tensor on {a.device} of at least "
                         f"{programs * ROW_VALUES} values.")
    kb, units, partials, slots = work_split(k, n, programs)
    check_cluster(cluster_size, programs, tiles, kb)
    block_m = block_m_for(m)
    a = a.contiguous()
    if out is None:
        out = torch.empty((m, n), dtype=torch.float16, device=a.device)
    per_channel = rows == k
    w_desc = TensorDescriptor.from_tensor(words, [words_a_block, block_n], gl.NVMMASharedLayout(128, 32, rank=2))
    a_desc = TensorDescriptor.from_tensor(a, [block_m, pack_k],
                                          gl.NVMMASharedLayout.get_default_for([block_m, pack_k], gl.float16))
    s_desc = TensorDescriptor.from_tensor(s.view(-1), [block_n], gl.NVMMASharedLayout(0, 16, rank=1))
    if partials and cluster_size == 1:
        parts = torch.empty(tiles * slots * block_n * block_m, dtype=torch.float32, device=a.device)
        counters = tile_counters(a.device, tiles)
    else:
        parts = counters = out  # never read: the PARTIALS branch is compiled out
    args = (w_desc, a_desc, s_desc, out, s, parts, counters, m, n, kb, units, programs, slots,
            out if records is None else records)
    kwargs = dict(GROUP_BLOCKS=1 if per_channel else rows // pack_k, PER_CHANNEL=per_channel, PARTIALS=partials,
                  STAGES=stages, BLOCK_M=block_m, SYNC_MMA=sync_mma, PDL=pdl, RECORD=records is not None,
                  CLUSTER=cluster_size, num_warps=4, launch_pdl=pdl,
                  **({"maxnreg": max_registers} if max_registers else {}))
    if cluster_size > 1:
        launch_in_clusters(_w4a16_gluon, programs, cluster_size, extra_bytes(cluster_size, block_n, block_m), args,
                           kwargs)
    else:
        _w4a16_gluon[(programs, )](*args, **kwargs)
    return out
