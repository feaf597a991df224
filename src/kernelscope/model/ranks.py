"""The processes of a multi-GPU job: one record per rank, and the collective an NCCL kernel runs.

A one-process session has no rank records (``Session.ranks`` is empty) and its launches
have ``rank`` None, so every view works on it unchanged.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class RankInfo:
    """One process of the job, as its trace and environment describe it.

    ``clock_offset_ns`` is what was added to this rank's times to put them on the session
    clock beyond its own time origin (0: same clock as the others, e.g. CUPTI on one host);
    ``alignment_error_ns`` is the largest disagreement of collective ends left after that
    alignment (None: not aligned, the clock is shared).
    """

    rank: int
    world_size: int | None = None
    local_rank: int | None = None
    host: str | None = None
    device_index: int | None = None
    device_name: str | None = None
    pid: int | None = None
    nccl_version: str | None = None
    backend: str | None = None
    process_groups: list[dict[str, Any]] = field(default_factory=list)  # distributedInfo.pg_config, as recorded
    source: str | None = None  # the trace or session file it came from
    clock_offset_ns: int = 0
    alignment_error_ns: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "RankInfo":
        return cls(
            **{
                k: d.get(k)
                for k in (
                    "rank",
                    "world_size",
                    "local_rank",
                    "host",
                    "device_index",
                    "device_name",
                    "pid",
                    "nccl_version",
                    "backend",
                    "source",
                    "alignment_error_ns",
                )
            },
            process_groups=list(d.get("process_groups") or []),
            clock_offset_ns=int(d.get("clock_offset_ns") or 0),
        )


@dataclass
class Collective:
    """What an NCCL kernel does, from the profiler's kernel args (`Collective name`, `In msg nelems`, ...).

    ``seq`` is the collective's sequence number in its process group where the trace has one.
    """

    name: str  # e.g. "allreduce", as the trace names it
    process_group: str | None = None
    in_nelems: int | None = None
    out_nelems: int | None = None
    group_size: int | None = None
    dtype: str | None = None
    seq: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Collective":
        return cls(**{k: d.get(k) for k in ("name", "process_group", "in_nelems", "out_nelems", "group_size", "dtype",
                                             "seq")})
