"""Hands block records from the workload to the session and attaches each to its launch.

The workload runs in the same process as the trace pass but holds no handle on
the session (``kernelscope run`` owns it), so submissions wait in a per-process
list until the trace pass ends and calls ``attach_pending(session)``. Matching
is pure (``attach``): a submission goes to the launch of the same kernel and
grid whose start, on the session clock (wall-clock ns, the clock the sampler
also relies on), falls between the host times taken just before the launch and
just after reading the buffer back. Records that match no launch are kept in
the collector status, never dropped.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from kernelscope.model import BlockRecords, CollectorStatus, Launch, Session
from kernelscope.model.names import short_kernel_name
from kernelscope.model import collectors as collector


@dataclass
class Submission:
    kernel: str  # the kernel's name as the trace shows it, or its short name (a Triton kernel's function name)
    grid: tuple[int, int, int]
    records: BlockRecords
    host_start_ns: int  # time.time_ns() before the launch
    host_end_ns: int  # time.time_ns() after the buffer was read back

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "grid": list(self.grid), "host_start_ns": self.host_start_ns,
                "host_end_ns": self.host_end_ns, "records": self.records.to_dict()}


# Per process, like the profiler itself: filled by BlockRecorder.submit, emptied by attach_pending.
_PENDING: list[Submission] = []


def submit(sub: Submission) -> None:
    _PENDING.append(sub)


def take_pending() -> list[Submission]:
    subs = list(_PENDING)
    _PENDING.clear()
    return subs


def _names(x: Launch) -> tuple[str, str]:
    return x.kernel, short_kernel_name(x.kernel)


def launches_in_window(session: Session, kernel: str, host_start_ns: int, host_end_ns: int,
                       accept: Callable[[Launch], bool]) -> list[Launch]:
    """Traced launches of ``kernel`` (full or short name) that started between two host times, in order."""
    lo, hi = host_start_ns - session.time_origin_ns, host_end_ns - session.time_origin_ns
    return [x for x in session.launches if kernel in _names(x) and accept(x)
            and x.start_ns is not None and lo <= x.start_ns <= hi]


def attach(session: Session, subs: list[Submission]) -> tuple[int, list[str], list[Submission]]:
    """Attach what matches; return (attached count, one note per oddity, submissions not attached)."""
    notes: list[str] = []
    left: list[Submission] = []
    attached = 0
    for sub in subs:
        cands = launches_in_window(session, sub.kernel, sub.host_start_ns, sub.host_end_ns,
                                   lambda x: x.grid == sub.grid and x.block_records is None)
        if not cands:
            left.append(sub)
            notes.append(f"block records of {sub.kernel} (grid {sub.grid}) match no traced launch of that kernel "
                         "and grid started while they were being recorded; they are kept unattached")
            continue
        if len(cands) > 1:  # the buffer holds what the last of them wrote
            notes.append(f"{len(cands)} launches of {sub.kernel} ran while one block record buffer was armed; "
                         "the records went to the last of them")
        cands[-1].block_records = sub.records
        attached += 1
    return attached, notes, left


def attach_outcome(attached: int, notes: list[str], left: list, details: dict) -> CollectorStatus:
    """The collector status of an attach pass: ok, partial (some attached) or failed, with its notes."""
    status = "ok" if not left and not notes else ("partial" if attached else "failed")
    return CollectorStatus(status, "; ".join(notes) or None,
                           {**details, "attached": attached, "unattached": [s.to_dict() for s in left]})


def attach_pending(session: Session) -> None:
    """Called by the trace pass once launches are in the session; records the outcome as a collector."""
    subs = take_pending()
    if not subs:
        return
    attached, notes, left = attach(session, subs)
    session.collectors[collector.INSTRUMENT] = attach_outcome(attached, notes, left,
                                                      {"collector": "block recorder (%smid, %globaltimer)"})
