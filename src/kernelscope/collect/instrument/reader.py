"""Block record buffer -> model.BlockRecords, saying what is wrong with the buffer.

Pure: takes the buffer's values as integers (``tensor.tolist()``), so it is
tested on the CPU with buffers shaped exactly as the kernel writes them
(collect/instrument/layout.py). It keeps every row the kernel wrote, however
odd, and records each problem as one sentence in ``BlockRecords.problems``:

- a truncated buffer (not whole rows, or fewer rows than blocks);
- rows never written (all zero): blocks that did not record;
- a row holding another block's id, or only partly written;
- a record that ends before it starts.

Whether the records cover every block once and lie inside the launch's
measured time is checked by analyze.sm_layout.measured_layout, which has the
launch. tests/gpu/test_block_recorder_gpu.py reads buffers the W4A16 kernel wrote on an H100.
"""
from __future__ import annotations

from typing import Sequence

from kernelscope.collect.instrument.layout import COL_BLOCK_ID, COL_END, COL_SMID, COL_START, ROW_VALUES, split_sm
from kernelscope.model import BlockRecords

Dim3 = tuple[int, int, int]


def _ids(ids: list[int], limit: int = 8) -> str:
    head = ", ".join(str(i) for i in ids[:limit])
    return head + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def read_block_buffer(values: Sequence[int], grid: Dim3, source: str = "triton-block-recorder") -> BlockRecords:
    g = tuple(int(v) for v in grid)
    if len(g) != 3 or min(g) < 1:
        raise ValueError(f"a block record buffer needs a grid of three positive sizes, got {grid!r}")
    grid3: Dim3 = (g[0], g[1], g[2])
    expected = grid3[0] * grid3[1] * grid3[2]
    n = len(values)
    rows = n // ROW_VALUES
    out = BlockRecords(grid=grid3, source=source, buffer_rows=rows)
    if n % ROW_VALUES:
        out.problems.append(f"the buffer holds {n:,} values, not whole {ROW_VALUES}-value rows: it is truncated, "
                            f"and its last {n % ROW_VALUES} value(s) (an incomplete row) were left out")
    if rows < expected:
        out.problems.append(f"the buffer has {rows:,} rows for {expected:,} blocks: blocks {rows:,} to "
                            f"{expected - 1:,} had no row to write to")
    unwritten: list[int] = []
    misplaced: list[int] = []
    partial: list[int] = []
    backwards: list[int] = []
    nsmids: set[int] = set()
    for r in range(rows):
        row = [int(v) for v in values[r * ROW_VALUES:(r + 1) * ROW_VALUES]]
        block, start, end = row[COL_BLOCK_ID], row[COL_START], row[COL_END]
        sm, nsmid = split_sm(row[COL_SMID])
        if not any(row):
            if r < expected:
                unwritten.append(r)
            continue
        if block != r:
            misplaced.append(r)
        if start == 0 or end == 0:
            partial.append(r)
        elif end < start:
            backwards.append(block)
        nsmids.add(nsmid)
        out.block_id.append(block)
        out.smid.append(sm)
        out.start_ns.append(start)
        out.end_ns.append(end)
    _note_problems(out, min(rows, expected), nsmids, unwritten, misplaced, partial, backwards)
    return out


def _note_problems(out: BlockRecords, checked_rows: int, nsmids: set[int], unwritten: list[int],
                   misplaced: list[int], partial: list[int], backwards: list[int]) -> None:
    """One sentence per kind of bad row the reader found, naming the first few."""
    if len(nsmids) == 1:
        out.nsmid = nsmids.pop()
    elif nsmids:
        out.problems.append(f"rows disagree on %nsmid ({', '.join(str(v) for v in sorted(nsmids))}): "
                            "column 1 was not written by the recorder")
    if unwritten:
        out.problems.append(f"{len(unwritten):,} of {checked_rows:,} rows were never written (all zero): "
                            f"blocks {_ids(unwritten)} did not record")
    if misplaced:
        out.problems.append(f"{len(misplaced):,} row(s) hold another block's id (rows {_ids(misplaced)}): the buffer "
                            "was written for a different grid or overwritten")
    if partial:
        out.problems.append(f"{len(partial):,} row(s) have a zero start or end time (rows {_ids(partial)}): "
                            "written only in part")
    if backwards:
        out.problems.append(f"{len(backwards):,} record(s) end before they start (blocks {_ids(backwards)})")
