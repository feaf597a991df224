"""The W4A16 launch rules (:func:`rule_launch` for the Triton kernel, :func:`gluon_launch` for the Gluon kernel) and
the pruned launch space the first-use tuner tries, best guesses first.

Decode launches (m <= 16) are fastest when the grid is about one full wave of programs at 3-4
programs per SM with several 128-row k blocks per program; the shapes the rule handles badly are
the ones whose program count falls just past a wave (docs/decisions/0004). So candidates are
all (BLOCK_N, split-k) pairs that divide the shape, ordered by how well their programs fill whole
waves (:func:`wave_score`); the rule comes first, so a tuning is never worse than the launch it
replaces, and the shipped table's launches for the same m (other shapes) are added as warm-start
candidates. On sm_90 at m <= 64 the Gluon kernel's launches come before the rule.
"""
from __future__ import annotations

import math

from .gluon_host import BLOCK_N as GLUON_BLOCK_N, MAX_CLUSTER as GLUON_MAX_CLUSTER, MAX_M as GLUON_MAX_M
from .gluon_host import PACK_K as GLUON_PACK_K
from .launch_config import LaunchConfig

PROGRAMS_PER_SM = {16: 4, 64: 2, 128: 2}  # resident programs per SM measured for each token tile
MAX_SPLIT_K = 16
MIN_ITERS = 4  # 128-row k blocks per program below which each program's start and epilogue dominate
# Registers capped at 80 (6 programs of 128 threads per SM instead of 4 at the 127 the compiler takes) for
# 16-token grids just past one wave of 4 per SM (docs/decisions/0004).
CAPPED_REGISTERS = 80
CAPPED_PROGRAMS_PER_SM = 6
# m > 16: 64x64 tiles with the largest split whose grid stays within this many programs per SM
# (docs/decisions/0004).
WIDE_PROGRAMS_PER_SM = 2.5


def rule_launch(m: int, k: int, tma: bool = False) -> LaunchConfig:
    """The tuned launches' pattern, for any shape: the Triton kernel, one 128-row block of k an iteration; for
    decode (m <= 16) 16-token tiles of 128 columns with k split 4 ways; wider token tiles above. ``tma``: the
    device has the tensor memory accelerator (sm_90 and later)."""
    if m <= 16:
        block_m, block_n, split_k, stages = 16, 128, 4, 3
    elif m <= 64:
        block_m, block_n, split_k, stages = 64, 128, 4, 4
    else:
        block_m, block_n, split_k, stages = 128, 64, 1, 3
    while split_k > 1 and k % (split_k * 128):
        split_k //= 2  # k must split into whole 128-row blocks
    return LaunchConfig.triton(block_m, block_n, split_k, 4, stages, tma=tma)


def token_tile(m: int) -> int:
    """BLOCK_M (the token side of the swapped product) for m tokens."""
    return 16 if m <= 16 else 64 if m <= 64 else 128


def wave_score(programs: int, slots: int, iters: int) -> float:
    """How well ``programs`` fill whole waves of ``slots`` (1.0 = full waves), discounted when each program
    has fewer than MIN_ITERS k blocks. Only orders candidates: the timing decides."""
    waves = math.ceil(programs / slots)
    fill = programs / (waves * slots)
    return fill * min(1.0, iters / MIN_ITERS) / (1 + 0.1 * (waves - 1))


def wide_launch(m: int, k: int, n: int, sm_count: int, tma: bool) -> LaunchConfig:
    """m > 16: 64x64 tiles, k split as far as the grid stays within WIDE_PROGRAMS_PER_SM programs per SM."""
    tiles = math.ceil(m / 64) * (n // 64)
    split = 1
    for s in range(2, MAX_SPLIT_K + 1):
        if k % (s * 128) == 0 and tiles * s <= WIDE_PROGRAMS_PER_SM * sm_count:
            split = s
    return LaunchConfig.triton(64, 64, split, 4, 3, tma=tma)


def candidates(m: int, k: int, n: int, sm_count: int, tma: bool, warm_start: list[LaunchConfig] = (),
               limit: int = 10, gluon: bool = False) -> list[LaunchConfig]:
    """Up to ``limit`` launches for (m, k, n): the rule, then the best-scored pairs, then warm-start launches.
    ``gluon`` (the device runs the Gluon decode kernel): :func:`gluon_candidates` come first, before the rule, so
    a tuning cut short by its deadline still tries the kernel that decode points are usually fastest on."""
    scored = []
    # m > 64: 64-token tiles too (two row tiles at m = 128; docs/decisions/0004)
    for bm, bn in [(token_tile(m), 64), (token_tile(m), 128)] + ([(64, 64), (64, 128)] if m > 64 else []):
        if n % bn:
            continue
        slots = sm_count * PROGRAMS_PER_SM[bm]
        row_tiles = math.ceil(m / bm)
        for split in range(1, MAX_SPLIT_K + 1):
            if k % (split * 128):
                continue
            iters = k // (split * 128)
            programs = row_tiles * (n // bn) * split
            launch = LaunchConfig.triton(bm, bn, split, 4, 4 if bm == 64 else 3, tma=tma)
            scored.append((wave_score(programs, slots, iters), -split, launch))
            if bm == 16 and slots < programs <= sm_count * CAPPED_PROGRAMS_PER_SM:
                capped = LaunchConfig.triton(bm, bn, split, 4, 3, max_registers=CAPPED_REGISTERS, tma=tma)
                scored.append((wave_score(programs, sm_count * CAPPED_PROGRAMS_PER_SM, iters), -split, capped))
    scored.sort(key=lambda t: (t[0], t[1]), reverse=True)
    out: list[LaunchConfig] = []
    first = (gluon_candidates(m, k, n, sm_count) if gluon else []) + [rule_launch(m, k, tma)]
    first += [wide_launch(m, k, n, sm_count, tma)] if m > 16 and n % 64 == 0 else []
    for launch in [*first, *(s[2] for s in scored)]:
        if launch not in out:
            out.append(launch)
    head = out[: max(1, limit - len(warm_start))]
    for launch in warm_start:  # the shipped table's Triton launches at this m, where they divide this k
        if launch.kernel == "gluon":  # a grid for another shape: gluon_candidates gives this shape's
            continue
        if launch not in head and k % (launch.split_k * 128) == 0:
            head.append(launch)
    return head[:limit]


# The Gluon decode kernel (gluon_kernel.py, sm_90, m <= 64): 64-column programs of 8 warps (the producer warp's
# partition is padded to a warpgroup), on a stream-K grid. Registers a thread at launch for r programs resident an SM
# (65536 registers / (256 threads x r), rounded down to 8): the consumer warpgroup still gets 104-168 registers by
# setmaxnreg, without spills.
GLUON_REGISTERS = {2: 96, 3: 80, 4: 64}
# The grid is the largest multiple of the column tiles within two programs an SM, else one program a tile with the
# registers that make it one wave (up to four an SM), else two an SM sharing tiles (docs/decisions/0004: grids whose
# programs share tiles unevenly were slower wherever a whole multiple fitted in a wave).
GLUON_PROGRAMS_PER_SM = 2
GLUON_MAX_PROGRAMS_PER_SM = 4
# Six stages where two programs an SM each stream >= 32 blocks of k, else four (docs/decisions/0004).
GLUON_DEEP_STAGES, GLUON_DEEP_BLOCKS = 6, 32
# mma.sync instead of the warpgroup MMA at m <= 8 (one 8-token tile), at two or three programs an SM
# (docs/decisions/0001).
GLUON_SYNC_MMA_MAX_M = 8
# 16 < m <= 64 (a 32- or 64-token tile): 128 registers a thread at launch (two programs an SM; the consumer warpgroup
# gets 232, no spills) and four stages (docs/decisions/0004).
GLUON_WIDE_REGISTERS = 128


def gluon_programs(k: int, n: int, sm_count: int) -> tuple[int, int]:
    """The Gluon kernel's grid for a (k, n) layer and the programs it puts on an SM: the largest multiple of the
    column tiles within GLUON_PROGRAMS_PER_SM programs an SM; else one program a tile when the tiles fit
    GLUON_MAX_PROGRAMS_PER_SM an SM; else GLUON_PROGRAMS_PER_SM an SM sharing tiles (at most one a unit)."""
    tiles = n // GLUON_BLOCK_N
    slots = GLUON_PROGRAMS_PER_SM * sm_count
    if tiles <= slots:
        return min(tiles * (slots // tiles), tiles * (k // GLUON_PACK_K)), GLUON_PROGRAMS_PER_SM
    if tiles <= GLUON_MAX_PROGRAMS_PER_SM * sm_count:
        return tiles, math.ceil(tiles / sm_count)
    return slots, GLUON_PROGRAMS_PER_SM


def gluon_launch(k: int, n: int, sm_count: int, m: int) -> LaunchConfig:
    """The Gluon kernel's launch for m tokens of a (k, n) layer: the grid of
    :func:`gluon_programs`, the registers that fit its programs an SM, six stages where two programs an SM stream
    many blocks each (else four), and mma.sync at m <= GLUON_SYNC_MMA_MAX_M below four programs an SM."""
    programs, per_sm = gluon_programs(k, n, sm_count)
    blocks = n // GLUON_BLOCK_N * (k // GLUON_PACK_K) / programs
    deep = per_sm == GLUON_PROGRAMS_PER_SM and blocks >= GLUON_DEEP_BLOCKS
    return LaunchConfig.gluon(programs, GLUON_DEEP_STAGES if deep else 4, GLUON_REGISTERS[per_sm],
                              sync_mma=m <= GLUON_SYNC_MMA_MAX_M and per_sm < GLUON_MAX_PROGRAMS_PER_SM)


def gluon_cluster_launch(k: int, n: int, sm_count: int, m: int) -> LaunchConfig | None:
    """A launch of the Gluon kernel whose column tiles' programs are thread-block clusters summing through
    distributed shared memory, for layers whose rule grid shares tiles; None where none applies.
    Each tile's k blocks are split evenly over S programs (S divides them): S the largest with the grid at one
    program an SM (six stages); else S = 2 where the rule's grid is two programs a tile; else S the largest with the
    grid between two and three programs an SM, at the registers that leave room for four an SM (GLUON_REGISTERS[4],
    four stages). Faster than the rule's launch at some layers and slower at others (docs/decisions/0002), so the
    tuner times it after the rule's launch and keeps the faster."""
    programs, _ = gluon_programs(k, n, sm_count)
    tiles, kb = n // GLUON_BLOCK_N, k // GLUON_PACK_K
    if programs <= tiles:  # whole tiles: no sum to move
        return None
    sizes = [s for s in range(2, GLUON_MAX_CLUSTER + 1) if kb % s == 0]
    one = [s for s in sizes if tiles * s <= sm_count]
    three = [s for s in sizes if 2 * sm_count < tiles * s <= 3 * sm_count]
    if one:
        size, stages, per_sm = one[-1], GLUON_DEEP_STAGES, GLUON_PROGRAMS_PER_SM
    elif programs == 2 * tiles and 2 in sizes:
        size, stages, per_sm = 2, gluon_launch(k, n, sm_count, m).num_stages, GLUON_PROGRAMS_PER_SM
    elif three:  # room for four an SM, though the grid needs three
        size, stages, per_sm = three[-1], 4, GLUON_MAX_PROGRAMS_PER_SM
    else:
        return None
    return LaunchConfig.gluon(tiles * size, stages, GLUON_REGISTERS[per_sm], sync_mma=m <= GLUON_SYNC_MMA_MAX_M,
                              cluster_size=size)


def gluon_wide_launches(k: int, n: int, sm_count: int) -> list[LaunchConfig]:
    """The Gluon kernel's launches for 16 < m <= 64, with GLUON_WIDE_REGISTERS and four stages: where two or more
    programs a tile fit one an SM, the largest such multiple of the tiles first; then the largest multiple within
    GLUON_PROGRAMS_PER_SM programs an SM; where the tiles are more, that many an SM sharing tiles, then one program
    a tile."""
    tiles, kb = n // GLUON_BLOCK_N, k // GLUON_PACK_K
    slots = GLUON_PROGRAMS_PER_SM * sm_count
    grids = [tiles * min(sm_count // tiles, kb)] if 2 * tiles <= sm_count else []
    grids += [gluon_programs(k, n, sm_count)[0]] if tiles <= slots else [slots, tiles]
    return [LaunchConfig.gluon(g, 4, GLUON_WIDE_REGISTERS) for g in dict.fromkeys(grids)]


def gluon_candidates(m: int, k: int, n: int, sm_count: int) -> list[LaunchConfig]:
    """The Gluon launches the tuner tries for m <= 64 on sm_90 (none for n not a multiple of 64). m <= 16:
    :func:`gluon_launch`, then where the rule's grid shares tiles the cluster launch of
    :func:`gluon_cluster_launch`. 16 < m <= 64: :func:`gluon_wide_launches`."""
    if m > GLUON_MAX_M or n % GLUON_BLOCK_N or k % GLUON_PACK_K:
        return []
    if m > 16:
        return gluon_wide_launches(k, n, sm_count)
    cluster = gluon_cluster_launch(k, n, sm_count, m)
    return [gluon_launch(k, n, sm_count, m)] + ([cluster] if cluster else [])
