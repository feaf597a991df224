"""The block record layout: what the kernel writes and the reader expects.

One row of four int64 per block, at row = linear block id
(x + y*gx + z*gx*gy, CUDA's blockIdx / Triton's program_id order):

    [block_id, smid | nsmid << 32, start_ns, end_ns]     times: %globaltimer, ns

%smid numbers are not guaranteed to be contiguous (PTX ISA, %smid); %nsmid,
one more than the highest %smid, is kept beside each so a reader can tell a
valid SM id from garbage.
The host zeroes the buffer before the launch. %globaltimer is never zero on a
running GPU, so a row whose four values are all zero is one the kernel never
wrote. kernelscope/include/kernelscope.cuh writes the same layout for CUDA C++ kernels.
"""
from __future__ import annotations

ROW_VALUES = 4
COL_BLOCK_ID, COL_SMID, COL_START, COL_END = 0, 1, 2, 3
SM_BITS = 32  # column 1: low 32 bits %smid, high 32 bits %nsmid


def split_sm(value: int) -> tuple[int, int]:
    """Column 1 -> (smid, nsmid)."""
    return value & 0xFFFFFFFF, (value >> SM_BITS) & 0xFFFFFFFF


def buffer_values(grid: tuple[int, int, int]) -> int:
    """int64 values the buffer needs for one launch of ``grid``."""
    return grid[0] * grid[1] * grid[2] * ROW_VALUES
