"""The kernel side of the block recorder, for @triton.jit kernels.

Use in a kernel that takes a records pointer and a ``RECORD: tl.constexpr`` flag::

    t_start = block_clock(RECORD)          # first thing in the program
    ...                                    # the kernel's work
    block_record(records_ptr, t_start, RECORD)   # last thing: writes the row

With RECORD=False both calls compile to nothing (a constexpr branch that Triton
does not generate), and the kernel runs under TRITON_INTERPRET=1. With
RECORD=True they read %smid and %globaltimer with inline PTX, which needs an
NVIDIA GPU (the interpreter cannot run inline assembly).

Checked on an H100 (tests/gpu/test_block_recorder_gpu.py): every block writes
one row, its times fall inside the launch's CUPTI duration, and its SM id is
below %nsmid.
The row layout is collect/instrument/layout.py.
"""
from __future__ import annotations

import triton
import triton.language as tl

# The PTX reads, shared with the Gluon kernels' recorder (kernels/marlin/gluon_kernel.py), which cannot call these
# @triton.jit helpers.
GLOBALTIMER_PTX = "mov.u64 $0, %globaltimer;"
SMID_PTX = "mov.u32 $0, %smid;"
NSMID_PTX = "mov.u32 $0, %nsmid;"
_GLOBALTIMER, _SMID, _NSMID = tl.constexpr(GLOBALTIMER_PTX), tl.constexpr(SMID_PTX), tl.constexpr(NSMID_PTX)


@triton.jit
def _globaltimer():
    # Not pure: two reads must not be merged, and the read must not be hoisted.
    return tl.inline_asm_elementwise(_GLOBALTIMER, "=l", [], dtype=tl.int64, is_pure=False, pack=1)


@triton.jit
def _smid():
    return tl.inline_asm_elementwise(_SMID, "=r", [], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _nsmid():
    return tl.inline_asm_elementwise(_NSMID, "=r", [], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def block_clock(RECORD: tl.constexpr):
    """%globaltimer now (ns) when RECORD, else 0; call it first in the program."""
    if RECORD:
        t = _globaltimer()
    else:
        t = 0
    return t


@triton.jit
def block_record(records_ptr, t_start, RECORD: tl.constexpr):
    """Write [block id, smid | nsmid << 32, t_start, %globaltimer now] at row = linear block id (int64 buffer)."""
    if RECORD:
        tl.debug_barrier()  # every warp has finished the program's work before the end time is read
        t_end = _globaltimer()
        sm = _smid().to(tl.int64) | (_nsmid().to(tl.int64) << 32)
        gx = tl.num_programs(0).to(tl.int64)
        gy = tl.num_programs(1).to(tl.int64)
        block = (tl.program_id(0).to(tl.int64) + tl.program_id(1).to(tl.int64) * gx
                 + tl.program_id(2).to(tl.int64) * gx * gy)
        row = records_ptr + block * 4
        tl.store(row + 0, block)
        tl.store(row + 1, sm)
        tl.store(row + 2, t_start)
        tl.store(row + 3, t_end)
