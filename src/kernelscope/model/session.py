"""The session: everything one run measured, as plain data. Its file (format, checks, reading and writing) is
model/session_file.py; ``save``, ``load`` and ``to_dict``/``from_dict`` go through it."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelscope.model import session_file
from kernelscope.model.collectors import CollectorStatus
from kernelscope.model.device import Device
from kernelscope.model.host_sync import HostSync
from kernelscope.model.launch import Activity, DeclaredWork, Launch, Region
from kernelscope.model.launch_table import DETAIL_PARTS, LaunchTable, has_part
from kernelscope.model.memory import Mark, MemoryHistory, StepWindow
from kernelscope.model.operators import Operators
from kernelscope.model.ranks import RankInfo
from kernelscope.model.sample import Sample
from kernelscope.model.session_file import SCHEMA_VERSION, SessionFileError

__all__ = ["SCHEMA_VERSION", "CollectorStatus", "DeclaredWork", "Session", "SessionFileError"]


class _Launches:
    """``Session.launches``: a list of Launch objects, built on first use from the session's LaunchTable
    when it was loaded from columns. Code that aggregates many launches reads ``launch_table()`` instead."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.list_attr, self.table_attr = f"_{name}_list", f"_{name}_table"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        if obj is None:
            return ()  # the dataclass default (an empty sequence; __set__ makes it a list)
        launches = obj.__dict__.get(self.list_attr)
        if launches is None:
            table = obj.__dict__.get(self.table_attr)
            launches = [] if table is None else table.launches()
            obj.__dict__[self.list_attr], obj.__dict__[self.table_attr] = launches, None  # the list is the truth now
        return launches

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.list_attr], obj.__dict__[self.table_attr] = list(value), None


@dataclass
class Session:
    """One profiling session. ``run`` saves it; ``show``, tests and exports load it."""

    command: list[str] = field(default_factory=list)
    created_utc: str = ""
    kernelscope_version: str = ""
    exit_code: int | None = None
    outcome: str = "complete"  # complete | workload-failed | interrupted | collector-failed
    device: Device | None = None
    time_origin_ns: int = 0  # absolute time (ns) that launch start_ns values count from
    launches: list[Launch] = _Launches()  # type: ignore[assignment]
    activities: list[Activity] = field(default_factory=list)
    regions: list[Region] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)  # live GPU state (NVML/GPM sampler)
    collectors: dict[str, CollectorStatus] = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)  # files kept beside the session, e.g. the ncu report
    environment: dict[str, Any] = field(default_factory=dict)
    declared_work: list[DeclaredWork] = field(default_factory=list)  # kernelscope.region(..., flops=, bytes=)
    ranks: list[RankInfo] = field(default_factory=list)  # the processes of a multi-GPU job; empty: one process
    host_syncs: list[HostSync] = field(default_factory=list)  # runtime calls that blocked the host (trace pass)
    marks: list[Mark] = field(default_factory=list)  # kernelscope.mark(name, **values)
    memory: MemoryHistory | None = None  # run --memory: the caching allocator's history
    steps: StepWindow | None = None  # run --steps FIRST-LAST: the window asked for and the steps that ran
    operators: Operators | None = None  # the aten ops, shapes and Python lines behind launches and host syncs
    # What load() left out of a damaged file (one line each, with the field path); never saved.
    skipped_on_load: list[str] = field(default_factory=list, repr=False, compare=False)

    # -- launches in columns ---------------------------------------------------------------------------------
    def launch_table(self) -> LaunchTable:
        """The launches column-wise, in ``launches`` order. The table the session was loaded as, while no code
        has asked for ``launches``; else built from the list (each call: the list may have changed)."""
        table = self.__dict__.get("_launches_table")
        return table if table is not None else LaunchTable.from_launches(self.launches)

    def set_launch_table(self, table: LaunchTable) -> None:
        """Hold the launches as columns; ``launches`` builds Launch objects from them when first asked."""
        self.__dict__["_launches_list"], self.__dict__["_launches_table"] = None, table

    def detailed_launches(self, kernel: str | None = None, having: str | None = None) -> list[Launch]:
        """Launches (of ``kernel``) with counter results, findings, instrumentation or a collective (NCCL kernels),
        in launch order: the few that panels draw one by one, found without building a Launch for every other
        launch. ``having``: only those with that detail (a LaunchDetails field: "counters", "scopes", ...)."""
        table = self.__dict__.get("_launches_table")
        if table is not None:
            return [x for _, x in table.detailed(kernel, having)]
        parts = DETAIL_PARTS if having is None else (having,)
        return [x for x in self.launches if (kernel is None or x.kernel == kernel)
                and any(has_part(getattr(x, p)) for p in parts)]

    def launch_count(self) -> int:
        table = self.__dict__.get("_launches_table")
        return len(table) if table is not None else len(self.launches)

    # -- the file (model/session_file.py) -----------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """The session as the JSON document its file holds (schema 2: launches and regions in columns)."""
        return session_file.to_document(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Session":
        """The session a document of any readable schema version holds, checked as a file is: the parts that
        cannot be used are skipped and named in ``skipped_on_load``; SessionFileError when it cannot be used."""
        return session_file.from_document(d, "the session document", cls)

    def save(self, path: str | os.PathLike[str], force: bool = True) -> Path:
        """Write atomically (temp file + rename), gzip-compressed when the name ends in .gz. ``force=False``
        (a command without -f) never replaces a file, also not one created while the session was encoded."""
        return session_file.write(self, path, force=force)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "Session":
        """The session in a file of any readable schema version (model/session_file.py). Launches stored as a list
        of objects (schema 1) are held as columns too, as schema 2 loads them: every analysis then reads them in one
        pass instead of scanning the list once per kernel."""
        session = session_file.read(path, cls)
        held = session.__dict__.get("_launches_list")
        if held and session.__dict__.get("_launches_table") is None:
            session.set_launch_table(LaunchTable.from_launches(held))
        return session

    def checked(self, name: str | os.PathLike[str]) -> "Session":
        """The session as ``load`` would read it back from the file ``save`` writes (parts load would skip left
        out and named in ``skipped_on_load``; what load would refuse raises SessionFileError)."""
        return session_file.checked(self, name, type(self))
