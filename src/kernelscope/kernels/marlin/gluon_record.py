"""Phase times of the Gluon W4A16 kernel's programs (``gluon_w4a16(..., records=...)``), for measurements only.

With RECORD each program's consumer warpgroup writes one row of :data:`FIELDS` (int64) at row = program id:
%globaltimer (ns) when the program started, when its first block of weights had landed in shared memory, before
the store of its last tile (its MMAs done), and when it had finished (the tile's store, or its partial and, for the
program that completes a shared tile, the split-tile sum). Without RECORD nothing is compiled in (constexpr
branches), so the kernel's SASS is unchanged. ``benchmarks/w4a16/gluon_phases.py`` reads the rows.
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

FIELDS = ("program", "sm", "t_start_ns", "t_first_block_ns", "t_last_mma_ns", "t_end_ns", "blocks", "tiles_summed")


@gluon.jit
def _now():
    """%globaltimer (ns); not pure, so that two reads are neither merged nor moved."""
    return gl.inline_asm_elementwise("mov.u64 $0, %globaltimer;", "=l", [], dtype=gl.int64, is_pure=False, pack=1)


@gluon.jit
def _smid():
    return gl.inline_asm_elementwise("mov.u32 $0, %smid;", "=r", [], dtype=gl.int32, is_pure=False, pack=1)


@gluon.jit
def _write_row(rec_ptr, t_start, t_first, t_last, blocks, summed):
    """The program's row (every thread of the warpgroup stores the same values)."""
    t_end = _now()
    pid = gl.program_id(0)
    row = rec_ptr + pid.to(gl.int64) * 8
    gl.store(row, pid.to(gl.int64))
    gl.store(row + 1, _smid().to(gl.int64))
    gl.store(row + 2, t_start)
    gl.store(row + 3, t_first)
    gl.store(row + 4, t_last)
    gl.store(row + 5, t_end)
    gl.store(row + 6, blocks.to(gl.int64))
    gl.store(row + 7, summed.to(gl.int64))
