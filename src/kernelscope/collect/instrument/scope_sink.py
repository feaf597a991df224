"""Hands phase scopes (Proton, kernelscope.cuh) from the workload to the session and attaches each to its launch.

Like ``sink`` for block records: submissions wait in a per-process list until
the trace pass ends; a submission goes to the launch of the same kernel whose
start (session clock) lies inside the host window the scopes were recorded in.
Scopes that match no launch are kept in the collector status, never dropped.
"""
from __future__ import annotations

from dataclasses import dataclass

from kernelscope.model import PhaseScopes, Session
from kernelscope.collect.instrument.sink import attach_outcome, launches_in_window
from kernelscope.model import collectors as collector

PROTON_COLLECTOR = "Triton Proton instrumentation backend (clock64 per warp, %globaltimer per block)"


@dataclass
class ScopeSubmission:
    kernel: str  # the Triton kernel's function name, or the name as the trace shows it
    scopes: PhaseScopes
    host_start_ns: int  # time.time_ns() when recording started (Proton started, the buffer was armed)
    host_end_ns: int  # time.time_ns() after the scopes were read back
    note: str | None = None  # a caveat for the collector status
    collector: str = PROTON_COLLECTOR  # what recorded the scopes, for the collector status

    def to_dict(self) -> dict:
        return {"kernel": self.kernel, "host_start_ns": self.host_start_ns, "host_end_ns": self.host_end_ns,
                "scopes": self.scopes.to_dict()}


_PENDING: list[ScopeSubmission] = []  # per process, like the profiler


def submit(sub: ScopeSubmission) -> None:
    _PENDING.append(sub)


def take_pending() -> list[ScopeSubmission]:
    subs = list(_PENDING)
    _PENDING.clear()
    return subs


def attach(session: Session, subs: list[ScopeSubmission]) -> tuple[int, list[str], list[ScopeSubmission]]:
    """Attach what matches; return (attached count, one note per oddity, submissions not attached)."""
    notes: list[str] = []
    left: list[ScopeSubmission] = []
    attached = 0
    for sub in subs:
        cands = launches_in_window(session, sub.kernel, sub.host_start_ns, sub.host_end_ns,
                                   lambda x: x.scopes is None)
        if not cands:
            left.append(sub)
            notes.append(f"phase scopes of {sub.kernel} match no traced launch of that kernel started while they "
                         "were being recorded; they are kept unattached")
            continue
        if len(cands) > 1:  # one trace or buffer holds them all: the scopes belong to all of them at once
            sub.scopes.problems.append(f"{len(cands)} launches of {sub.kernel} ran while the scopes were being "
                                       "recorded; their records are merged, and the scopes were attached to the last")
            notes.append(f"{len(cands)} launches of {sub.kernel} ran in one recording window")
        cands[-1].scopes = sub.scopes
        attached += 1
    return attached, notes, left


def attach_pending(session: Session) -> None:
    """Called by the trace pass once launches are in the session; records the outcome as a collector."""
    subs = take_pending()
    if not subs:
        return
    attached, notes, left = attach(session, subs)
    caveats = sorted({s.note for s in subs if s.note})
    session.collectors[collector.SCOPES] = attach_outcome(attached, notes, left, {
        "collector": "; ".join(sorted({s.collector for s in subs})), "caveats": caveats})
