"""Record the caching allocator's history while the trace pass runs, and take its snapshot at the end.

Stacks are Python frames only (``stacks="python"``: symbolising C++ frames costs far more) and are kept for
allocations only (``context="alloc"``): the question is what was live at the peak and who allocated it.
"""
from __future__ import annotations

import time
from typing import Any

from kernelscope.collect.memory.snapshot import history_from_snapshot
from kernelscope.model import CollectorStatus, Session
from kernelscope.model import collectors as collector

MAX_ENTRIES = 500_000  # allocator events kept (a ring buffer: a longer window keeps its last events)


def memory_unavailable() -> str | None:
    """Why --memory cannot record in this Python (one sentence), or None."""
    try:
        import torch
    except ImportError:
        return "--memory records the PyTorch caching allocator, and torch is not installed in this Python"
    if not torch.cuda.is_available():
        return "--memory records the PyTorch CUDA caching allocator, and CUDA is not available to torch here"
    if not hasattr(torch.cuda.memory, "_record_memory_history") or not hasattr(torch.cuda.memory, "_snapshot"):
        return f"--memory needs torch.cuda.memory._record_memory_history, which torch {torch.__version__} lacks"
    return None


class MemoryRecorder:
    def __init__(self, session: Session, max_entries: int = MAX_ENTRIES) -> None:
        self.session, self.max_entries = session, max_entries
        self._torch: Any = None
        self._snapshot: dict | None = None
        self.snapshot_s = 0.0  # time to take the snapshot (the end-of-window cost, measured)

    def start(self) -> None:
        why = memory_unavailable()
        if why is not None:
            self.session.collectors[collector.MEMORY] = CollectorStatus("not-run", why)
            return
        import torch

        self._torch = torch
        torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python",
                                                 max_entries=self.max_entries)

    def take(self) -> None:
        """Snapshot now and stop recording (the window closed); later calls keep the first snapshot."""
        if self._torch is None or self._snapshot is not None:
            return
        t0 = time.perf_counter()
        try:
            self._snapshot = self._torch.cuda.memory._snapshot()
        finally:
            self._torch.cuda.memory._record_memory_history(enabled=None)
        self.snapshot_s = time.perf_counter() - t0

    def finish(self) -> None:
        """Put the history on the session (after the trace set the session clock's origin)."""
        s = self.session
        if self._torch is None:
            return
        if self._snapshot is None:
            s.collectors[collector.MEMORY] = CollectorStatus(
                "not-run", "the step window never opened, so the allocator history was not recorded")
            return
        device = self._torch.cuda.current_device()
        history = history_from_snapshot(self._snapshot, s.time_origin_ns, device, self.max_entries)
        s.memory = history
        details = {"collector": "torch.cuda.memory._record_memory_history (context=alloc, stacks=python)",
                   "events": len(history), "max_entries": self.max_entries,
                   "snapshot_s": round(self.snapshot_s, 4)}
        status = "partial" if history.problems else "ok"
        s.collectors[collector.MEMORY] = CollectorStatus(status, "; ".join(history.problems) or None, details)
