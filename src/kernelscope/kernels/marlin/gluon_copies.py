"""The producer side of the Gluon W4A16 decode kernel (:mod:`gluon_hopper`): each program's share of the work
(stream-K), the producer warp's TMA copies, and the grid dependency control of programmatic dependent launches.
The constexprs the kernel's jitted functions read live here, once."""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

from . import gluon_args
from .gluon_cluster import _cluster_arrive
from .layout_gluon import WORDS

# constexpr objects, so that the jitted functions may read them (host code reads .value)
PACK_K = gl.constexpr(gluon_args.PACK_K)  # rows of k per block, as in gemm.py
BLOCK_N = gl.constexpr(gluon_args.BLOCK_N)  # output columns per program: one MMA's M side (a warpgroup's 64)
_WORDS = gl.constexpr(WORDS)


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
def _copy_words(bufs, bars, descs, u, b, N, PER_CHANNEL: gl.constexpr, STAGES: gl.constexpr, KN: gl.constexpr,
                KB):
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
    if KN:
        tma.async_copy_global_to_shared(w_desc, [kb * _WORDS, t * BLOCK_N], ready.index(stage), w_smem.index(stage))
    else:
        tma.async_copy_global_to_shared(w_desc, [kb * N + t * BLOCK_N, 0], ready.index(stage), w_smem.index(stage))


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
              STAGES: gl.constexpr, KN: gl.constexpr, PDL: gl.constexpr, CLUSTER: gl.constexpr):
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
            _copy_words(bufs, bars, descs, u, u - start, N, PER_CHANNEL, STAGES, KN, KB)
            _copy_scales(bufs, bars, s_desc, u, u - start, N, PER_CHANNEL, GROUP_BLOCKS, STAGES, KB)
        _grid_wait()
        for u in range(start, first):
            _copy_activations(bufs, bars, a_desc, u, u - start, STAGES, KB)
    for u in range(first, end):
        _copy_words(bufs, bars, descs, u, u - start, N, PER_CHANNEL, STAGES, KN, KB)
        _copy_activations(bufs, bars, a_desc, u, u - start, STAGES, KB)
        _copy_scales(bufs, bars, s_desc, u, u - start, N, PER_CHANNEL, GROUP_BLOCKS, STAGES, KB)
