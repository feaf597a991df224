"""Chrome / Perfetto export of a multi-GPU session: each rank in its own process tracks
("rank 1 · GPU 1: NVIDIA H200", "rank 1 · host (CPU)", ...), and each wait at a collective
as a slice on a "collective waits" track of the waiting rank, named the methodology's way.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable

from kernelscope.analyze.ranks import RanksReport
from kernelscope.model import Session

PIDS_PER_RANK = (
    1000  # a rank's tracks: pid = (rank + 1) * 1000 + the single-GPU pid (1 GPU, 2 host, 3 samples, 100+ blocks)
)
TID_WAITS = 1_000_001


def rank_session(session: Session, rank: int) -> Session:
    """The session with only this rank's launches, copies and regions (samples go with the first rank)."""
    first = min(r.rank for r in session.ranks)
    info = next(r for r in session.ranks if r.rank == rank)
    device = session.device
    if device is not None and info.device_index is not None:  # the rank's own GPU, not the session's first
        device = dataclasses.replace(device, index=info.device_index, name=info.device_name or device.name)
    return dataclasses.replace(
        session, device=device, launches=[x for x in session.launches if x.rank == rank],
        activities=[a for a in session.activities if a.rank == rank],
        regions=[g for g in session.regions if g.rank == rank],
        samples=session.samples if rank == first else [])


def ranks_chrome_events(session: Session, one_rank: Callable[[Session], Any], report: RanksReport | None,
                        gpu_pid: int) -> tuple[list[Any], list[str]]:
    """Every rank's events from the one-GPU builder ``one_rank``, moved to the rank's own pids (event dicts,
    and runs of kernel events kept as columns, render/chrome_kernel_rows.py, whose process id moves)."""
    events: list[Any] = []
    notes: list[str] = []
    for info in sorted(session.ranks, key=lambda r: r.rank):
        base = (info.rank + 1) * PIDS_PER_RANK
        trace = one_rank(rank_session(session, info.rank))
        shifted: list[Any] = []
        notes += [f"rank {info.rank}: {n}" for n in trace.notes]
        for e in trace.parts:
            if not isinstance(e, dict):
                if all(e.cols is not c for c in shifted):  # the rank's runs share their columns: move once
                    e.cols.pid += base
                    shifted.append(e.cols)
                events.append(e)
                continue
            e = dict(e, pid=base + e["pid"])
            if e["ph"] == "M" and e["name"] == "process_name":
                e["args"] = {"name": f"rank {info.rank} · {e['args']['name']}"}
            elif e["ph"] == "M" and e["name"] == "process_sort_index":
                e["args"] = {"name": str(e["pid"])}
            events.append(e)
    if report is not None:
        waits = [(t, row) for row in report.collectives.rows for t in row.ranks if t.wait_ns > 0]
        for r in sorted({t.rank for t, _ in waits}):
            events.append({"ph": "M", "name": "thread_name", "pid": (r + 1) * PIDS_PER_RANK + gpu_pid, "tid": TID_WAITS,
                           "args": {"name": "collective waits"}})
        for t, row in waits:
            events.append({"ph": "X", "cat": "collective-wait", "pid": (t.rank + 1) * PIDS_PER_RANK + gpu_pid,
                           "tid": TID_WAITS, "ts": t.start_ns / 1000.0, "dur": t.wait_ns / 1000.0,
                           "name": f"barrier: {row.name} GPU{t.rank} waits for GPU{row.straggler_rank}",
                           "args": {"process_group": row.process_group, "index": row.index, "wait_ns": t.wait_ns,
                                    "straggler_rank": row.straggler_rank}})
    return events, notes
