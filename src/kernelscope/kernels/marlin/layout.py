"""Permutation tables of the Marlin INT4 weight layout.

Marlin stores its weights so that one 16-byte load per thread already holds the
register fragments that the tensor-core ``mma.m16n8k16`` instruction expects; no
shuffling is needed on the GPU.  The tables below describe that ordering as
index arithmetic, so that :mod:`kernelscope.kernels.marlin.format` can reproduce
the layout bit for bit with plain tensor gathers.  They are built by small pure
functions (no state, no device), which keeps them easy to test and to reason
about.  See ``docs/marlin.md`` for a walk-through.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

#: Side of the square weight tile that one ``mma`` fragment set covers (k x n).
TILE = 16
#: Number of 16x16 tiles (consecutive along n) that one permutation chunk spans.
TILES_PER_CHUNK = 4
#: Elements in one permutation chunk of the weight: 4 tiles of 16 x 16.
CHUNK = TILE * TILE * TILES_PER_CHUNK
#: 4-bit values stored in one int32 word.
NIBBLES = 8
#: Threads in a warp; each owns 4 words (one per tile) of a chunk.
LANES = 32


def fragment_coords(lane: int, nibble: int) -> tuple[int, int]:
    """Return the (k row, n column) inside a 16x16 tile of one nibble of a word.

    Lane ``lane`` of the warp owns, in every tile, the B-operand fragments of two
    ``m16n8k16`` MMAs (the left and the right 8 columns).  Its column within an
    8-wide half is ``lane // 4``; its rows are ``2 * (lane % 4)`` plus {0, 1, 8, 9}.
    Nibbles ``i`` and ``i + 4`` hold rows ``r`` and ``r + 1`` of the same column and
    sit at the same offset of the low and high 16-bit halves of the word, so one
    mask-and-or on the GPU turns them into the two fp16 values of one fragment
    register.  Bit 0 of the nibble index selects rows 8..15 of the tile, bit 1
    columns 8..15, bit 2 the second row of the pair.
    """
    if not (0 <= lane < LANES and 0 <= nibble < NIBBLES):
        raise ValueError(f"lane must be in 0..31 and nibble in 0..7, got {lane} and {nibble}.")
    row = 2 * (lane % 4) + (nibble >> 2) + 8 * (nibble & 1)
    col = lane // 4 + 8 * ((nibble >> 1) & 1)
    return row, col


@lru_cache(maxsize=None)
def weight_perm() -> tuple[int, ...]:
    """Source index, within a 1024-element chunk, of each packed position.

    A chunk is four 16x16 tiles (consecutive along n, same 16 rows of k), each
    flattened row-major and laid end to end.  Packed position ``p`` decomposes as
    ``p = 32 * lane + 8 * tile + nibble``: word ``4 * lane + tile`` of the chunk
    holds, in its 8 nibbles, the values lane ``lane`` needs for tile ``tile``.
    """
    out = [0] * CHUNK
    for lane in range(LANES):
        for tile in range(TILES_PER_CHUNK):
            for nibble in range(NIBBLES):
                row, col = fragment_coords(lane, nibble)
                dst = (lane * TILES_PER_CHUNK + tile) * NIBBLES + nibble
                out[dst] = tile * TILE * TILE + row * TILE + col
    return tuple(out)


@lru_cache(maxsize=None)
def scale_perm(grouped: bool) -> tuple[int, ...]:
    """Source column, within a chunk of scale columns, of each packed position.

    Grouped scales (more than one group along k) are applied while dequantizing,
    so a thread needs the scales of the B columns it owns: column ``c`` of each
    8-wide half across four tiles.  Over a 64-column chunk the packed position
    ``8 * c + j`` takes column ``8 * j + c`` (an 8x8 transpose), which puts those
    8 scales in one 16-byte vector.

    Per-channel scales (a single group) are applied to the fp32 accumulator at
    the end, whose ``mma`` fragment holds columns ``2 * (lane % 4)`` and ``+ 1`` of
    each 8-wide block.  Over a 32-column chunk, position ``8 * i + j`` takes column
    ``2 * i + (j % 2) + 8 * (j // 2)``.
    """
    if grouped:
        return tuple(8 * j + c for c in range(8) for j in range(8))
    return tuple(2 * i + (j % 2) + 8 * (j // 2) for i in range(4) for j in range(8))


def inverse(perm: Sequence[int]) -> tuple[int, ...]:
    """Return the permutation that undoes ``perm`` (``x[perm][inverse(perm)] == x``)."""
    inv = [0] * len(perm)
    for dst, src in enumerate(perm):
        inv[src] = dst
    return tuple(inv)
