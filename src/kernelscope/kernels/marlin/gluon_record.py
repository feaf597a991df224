"""Block and phase times of the Gluon W4A16 kernel's programs (``gluon_w4a16(..., records=...)``), for measurements.

With RECORD each program's consumer warpgroup writes one row of int64 at row = program id. Its first four values are
the block recorder's row (collect/instrument/layout.py: program, %smid | %nsmid << 32, %globaltimer when the
consumer started and when the program had finished), so ``w4a16_matmul(kernel="gluon", recorder=BlockRecorder)``
fills the session's Block -> SM layout. With RECORD = 8 four more follow (:data:`FIELDS`): when the program's first
block of weights had landed in shared memory, when its last MMA was done (before its last tile's store), its blocks,
and how many shared tiles it summed. Without RECORD nothing is compiled in (constexpr branches), so the kernel's
SASS is unchanged.
"""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from kernelscope.collect.instrument.layout import ROW_VALUES, SM_BITS
from kernelscope.collect.instrument.triton_blocks import GLOBALTIMER_PTX, NSMID_PTX, SMID_PTX

# the block recorder's four columns (collect/instrument/layout.py), then the phases
FIELDS = ("program", "sm", "t_start_ns", "t_end_ns", "t_first_block_ns", "t_last_mma_ns", "blocks", "tiles_summed")
_GLOBALTIMER = gl.constexpr(GLOBALTIMER_PTX)
_SMID = gl.constexpr(SMID_PTX)
_NSMID = gl.constexpr(NSMID_PTX)
_SM_BITS = gl.constexpr(SM_BITS)
_BLOCK_VALUES = gl.constexpr(ROW_VALUES)


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
def _write_row(rec_ptr, t_start, t_first, t_last, blocks, summed, VALUES: gl.constexpr):
    """The program's row of VALUES int64: the block recorder's ROW_VALUES, or all of FIELDS (every thread of the
    warpgroup stores the same values)."""
    t_end = _now()
    pid = gl.program_id(0)
    row = rec_ptr + pid.to(gl.int64) * VALUES
    gl.store(row, pid.to(gl.int64))
    gl.store(row + 1, _sm())
    gl.store(row + 2, t_start)
    gl.store(row + 3, t_end)
    if VALUES > _BLOCK_VALUES:
        gl.store(row + 4, t_first)
        gl.store(row + 5, t_last)
        gl.store(row + 6, blocks.to(gl.int64))
        gl.store(row + 7, summed.to(gl.int64))
