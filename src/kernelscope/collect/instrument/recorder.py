"""The host side of the block recorder: a zeroed int64 buffer for one launch, read back after it.

::

    rec = BlockRecorder(grid)                    # allocates and zeroes; notes the host time
    kernel[grid](..., rec.buffer, RECORD=rec.enabled)
    records = rec.submit("kernel_name")          # synchronises, reads, validates, hands to the session

``BlockRecorder(grid, enabled=False)`` gives a one-value placeholder buffer and
submits nothing, so the same call site runs plain.
"""
from __future__ import annotations

import os
import time
from typing import Any

from kernelscope.collect.instrument import sink
from kernelscope.collect.instrument.layout import buffer_values
from kernelscope.collect.instrument.reader import read_block_buffer
from kernelscope.model import BlockRecords


class InstrumentError(RuntimeError):
    """The recorder cannot work here; the message is one sentence for the user."""


def grid3(grid: Any) -> tuple[int, int, int]:
    g = [int(v) for v in (grid if isinstance(grid, (tuple, list)) else (grid,))]
    if not 1 <= len(g) <= 3 or min(g) < 1:
        raise InstrumentError(f"a launch grid is one to three positive sizes, not {grid!r}")
    g += [1] * (3 - len(g))
    return (g[0], g[1], g[2])


class BlockRecorder:
    def __init__(self, grid: Any, device: Any = "cuda", enabled: bool = True) -> None:
        import torch

        self.grid = grid3(grid)
        self.enabled = bool(enabled)
        if self.enabled and os.environ.get("TRITON_INTERPRET") == "1":
            raise InstrumentError("the block recorder reads %smid and %globaltimer with inline PTX, which Triton's "
                                  "interpreter (TRITON_INTERPRET=1) cannot run; use enabled=False there")
        self._torch = torch
        n = buffer_values(self.grid) if self.enabled else 1
        self.buffer = torch.zeros(n, dtype=torch.int64, device=device)
        if self.enabled and self.buffer.is_cuda:
            torch.cuda.synchronize()  # the zero-fill must not fall inside the launch's host time window
        self.host_start_ns = time.time_ns()

    def read(self) -> BlockRecords | None:
        """The records (None when disabled), after waiting for the launch to finish."""
        if not self.enabled:
            return None
        if self.buffer.is_cuda:
            self._torch.cuda.synchronize()
        return read_block_buffer(self.buffer.tolist(), self.grid)

    def submit(self, kernel: str) -> BlockRecords | None:
        """Read the records and hand them to the session (attached to the launch when the trace pass ends)."""
        records = self.read()
        if records is not None:
            sink.submit(sink.Submission(kernel, self.grid, records, self.host_start_ns, time.time_ns()))
        return records
