"""The end of a column tile in the Gluon W4A16 kernel (:mod:`gluon_hopper`): C straight from a program that did the
whole tile; else the tile's split-tile sum, through L2 (stream-K partials and a tile counter) or, in clusters,
through distributed shared memory (:mod:`gluon_cluster`)."""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from .gluon_cluster import _cluster_send, _cluster_total
from .gluon_copies import BLOCK_N


@gluon.jit
def _slot(parts, j, count, offs, mask, BLOCK_N: gl.constexpr, BLOCK_M: gl.constexpr):
    """Partial slot j of a tile (zeros past its count: x + 0.0 is x, so the sum is the same)."""
    return gl.load(parts + j * (BLOCK_N * BLOCK_M) + offs, mask=mask & (j < count), other=0.0, cache_modifier=".cg")


@gluon.jit
def _tile_offsets(BLOCK_M: gl.constexpr, acc_layout: gl.constexpr):
    """Each accumulator element's index in a partial slot: token-major (BLOCK_M, BLOCK_N) for BLOCK_M <= 16, else
    column-major, where a thread's two neighbouring tokens and its quad's eight are one 32-byte sector (token-major,
    each 4-byte element of a wide tile is a sector of its own; docs/decisions/0001)."""
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
    distributed shared memory instead (:mod:`gluon_cluster`). Returns whether this program summed a shared tile
    (read only by the phase records)."""
    c_ptr, s_ptr, part_ptr, count_ptr = ptrs
    summed = 0
    KB, U, P, SLOTS = work
    if PER_CHANNEL:
        cols = t * BLOCK_N + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(1, acc_layout))
        acc = acc * gl.expand_dims(gl.load(s_ptr + cols).to(gl.float32), 1)
    if CLUSTER > 1:
        offs = _tile_offsets(BLOCK_M, acc_layout)
        if pid % CLUSTER == 0:
            total = _cluster_total(acc, offs, CLUSTER, BLOCK_N, BLOCK_M)
            _store_c(c_ptr, t, M, N, total, BLOCK_M, acc_layout)
            summed = 1
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
                summed = 1
    else:
        _store_c(c_ptr, t, M, N, acc, BLOCK_M, acc_layout)
    return summed
