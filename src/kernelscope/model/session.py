"""The session: everything one run measured, as plain data in a versioned JSON file."""
from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelscope.model.device import Device
from kernelscope.model.escape import visible
from kernelscope.model.files import InputFileError, read_input, write_atomic
from kernelscope.model.host_sync import HostSync
from kernelscope.model.launch import Activity, Launch, Region
from kernelscope.model.launch_table import LaunchTable
from kernelscope.model.memory import Mark, MemoryHistory, StepWindow
from kernelscope.model.ranks import RankInfo
from kernelscope.model.sample import Sample
from kernelscope.model.schema import Invalid
from kernelscope.model.session_codec import (LAUNCH_KEYS, REGION_KEYS, decode_launches, decode_regions,
                                             encode_launches, encode_regions)
from kernelscope.model.session_schema import check_session

SCHEMA_VERSION = 2  # what save() writes: launches in columns (session_codec); to_dict() is the expanded form
EXPANDED_SCHEMA_VERSION = 1  # launches as one object each: to_dict()/from_dict(), and files of kernelscope < 2
READABLE_VERSIONS = (1, 2)
FORMAT_NAME = "kernelscope-session"


class SessionFileError(Exception):
    """A session file that cannot be read; the message is one sentence for the user."""


@dataclass
class CollectorStatus:
    """Whether a collector ran, and if not (or only partly) why."""

    status: str  # "ok" | "partial" | "not-run" | "failed"
    reason: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status, "reason": self.reason, "details": self.details}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "CollectorStatus":
        return cls(status=str(d["status"]), reason=d.get("reason"), details=dict(d.get("details") or {}))


@dataclass
class DeclaredWork:
    """Work the user declared for one occurrence of a region: kernelscope.region(name, flops=, bytes=, units=).

    ``occurrence`` counts entries of regions with this name in the order they were
    entered (0 first), which is the order of the trace pass's regions of that name.
    """

    region: str
    occurrence: int
    flops: float | None = None
    bytes: float | None = None
    units: dict[str, float] = field(default_factory=dict)  # e.g. {"tokens": 4096}

    def to_dict(self) -> dict[str, Any]:
        return {"region": self.region, "occurrence": self.occurrence, "flops": self.flops, "bytes": self.bytes,
                "units": dict(self.units)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "DeclaredWork":
        return cls(region=str(d["region"]), occurrence=int(d["occurrence"]), flops=d.get("flops"),
                   bytes=d.get("bytes"), units={str(k): float(v) for k, v in (d.get("units") or {}).items()})


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

    def detailed_launches(self, kernel: str | None = None) -> list[Launch]:
        """Launches (of ``kernel``) with counter results, findings, instrumentation or a collective (NCCL kernels),
        in launch order: the few
        that panels draw one by one, found without building a Launch for every other launch."""
        table = self.__dict__.get("_launches_table")
        if table is not None:
            return [x for _, x in table.detailed(kernel)]
        return [x for x in self.launches if (kernel is None or x.kernel == kernel) and (
            x.counters or x.findings or x.block_records is not None or x.scopes is not None
            or x.collective is not None or x.source_lines is not None)]

    def launch_count(self) -> int:
        table = self.__dict__.get("_launches_table")
        return len(table) if table is not None else len(self.launches)

    # -- serialisation -------------------------------------------------------
    def _header(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "schema_version": EXPANDED_SCHEMA_VERSION,
            "kernelscope_version": self.kernelscope_version,
            "created_utc": self.created_utc,
            "command": list(self.command),
            "exit_code": self.exit_code,
            "outcome": self.outcome,
            "device": None if self.device is None else self.device.to_dict(),
            "time_origin_ns": self.time_origin_ns,
            "collectors": {k: v.to_dict() for k, v in self.collectors.items()},
            "artifacts": dict(self.artifacts),
            "environment": self.environment,
            "regions": [r.to_dict() for r in self.regions],
            "activities": [a.to_dict() for a in self.activities],
            "samples": [x.to_dict() for x in self.samples],
            **({"declared_work": [w.to_dict() for w in self.declared_work]} if self.declared_work else {}),
            **({"ranks": [r.to_dict() for r in self.ranks]} if self.ranks else {}),
            **({"host_syncs": [h.to_dict() for h in self.host_syncs]} if self.host_syncs else {}),
            **({"marks": [m.to_dict() for m in self.marks]} if self.marks else {}),
            **({"memory": self.memory.to_dict()} if self.memory is not None else {}),
            **({"steps": self.steps.to_dict()} if self.steps is not None else {}),
        }

    def to_dict(self) -> dict[str, Any]:
        """The expanded form (schema 1's layout): one object per launch."""
        d = self._header()
        d["launches"] = [x.to_dict() for x in self.launches]
        return d

    def to_file_dict(self) -> dict[str, Any]:
        """What save() writes (schema 2): launches as shapes and columns (model/session_codec.py)."""
        d = self._header()
        d["schema_version"] = SCHEMA_VERSION
        del d["regions"]
        d.update(encode_regions(self.regions))
        d.update(encode_launches(self.launch_table()))
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any], launch_table: LaunchTable | None = None) -> "Session":
        dev = d.get("device")
        s = cls(
            command=[str(c) for c in d.get("command", [])],
            created_utc=str(d.get("created_utc", "")),
            kernelscope_version=str(d.get("kernelscope_version", "")),
            exit_code=d.get("exit_code"),
            outcome=str(d.get("outcome", "complete")),
            device=None if dev is None else Device.from_dict(dev),
            time_origin_ns=int(d.get("time_origin_ns", 0)),
            launches=[Launch.from_dict(x) for x in d.get("launches", [])],
            activities=[Activity.from_dict(a) for a in d.get("activities", [])],
            regions=[Region.from_dict(r) for r in d.get("regions", [])],
            samples=[Sample.from_dict(x) for x in d.get("samples", [])],  # optional: older files have none
            collectors={k: CollectorStatus.from_dict(v) for k, v in d.get("collectors", {}).items()},
            artifacts={str(k): str(v) for k, v in (d.get("artifacts") or {}).items()},
            environment=dict(d.get("environment") or {}),
            declared_work=[DeclaredWork.from_dict(w) for w in d.get("declared_work") or []],  # optional: older files
            ranks=[RankInfo.from_dict(r) for r in d.get("ranks") or []],  # optional: one-process sessions have none
            host_syncs=[HostSync.from_dict(h) for h in d.get("host_syncs") or []],  # optional: older files have none
            marks=[Mark.from_dict(m) for m in d.get("marks") or []],  # optional, like memory and steps
            memory=None if d.get("memory") is None else MemoryHistory.from_dict(d["memory"]),
            steps=None if d.get("steps") is None else StepWindow.from_dict(d["steps"]),
        )
        if launch_table is not None:
            s.set_launch_table(launch_table)
        return s

    def save(self, path: str | os.PathLike[str], force: bool = True) -> Path:
        """Write atomically (temp file + rename), gzip-compressed when the name ends in .gz. ``force=False``
        (a command without -f) never replaces a file, also not one created while the session was encoded."""
        path = Path(path)
        # Compact separators: a million-entry column written one entry a line would be most of the file.
        data = json.dumps(self.to_file_dict(), separators=(",", ":"), sort_keys=False).encode()
        if path.name.endswith(".gz"):
            data = gzip.compress(data, compresslevel=6, mtime=0)
        return write_atomic(path, data, force=force)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "Session":
        path = Path(path)
        try:
            raw = read_input(path)  # a regular file, at most the input limit, decompressed as a bounded stream
        except FileNotFoundError:
            raise SessionFileError(f"{path}: no such session file.") from None
        except IsADirectoryError:
            raise SessionFileError(f"{path} is a directory, not a session file.") from None
        except InputFileError as e:
            if e.damaged:
                raise SessionFileError(f"{path} is not a kernelscope session: it is damaged or not JSON.") from None
            raise SessionFileError(str(e)) from None
        except OSError as e:
            raise SessionFileError(f"{path} cannot be read ({e.strerror}).") from None
        try:
            doc = json.loads(raw)
        except ValueError:
            raise SessionFileError(f"{path} is not a kernelscope session: it is damaged or not JSON.") from None
        except RecursionError:
            raise SessionFileError(f"{path} is not a kernelscope session: its JSON is nested too deeply.") from None
        del raw
        return cls._from_file_doc(doc, path)

    def checked(self, name: str | os.PathLike[str]) -> "Session":
        """The session as ``load`` would read it back from the file ``save`` writes: the same validator on the
        same document (an importer's values that no file may hold, such as a time past int64, NaN or nesting
        deeper than the schema allows, are found here, before the file is written). Parts load would skip are
        left out and named in ``skipped_on_load``; what load would refuse raises SessionFileError."""
        try:
            doc = json.loads(json.dumps(self.to_file_dict(), separators=(",", ":")))
        except RecursionError:
            raise SessionFileError(f"{name} would not load: its data is nested too deeply.") from None
        except (TypeError, ValueError, OverflowError) as e:
            raise SessionFileError(f"{name} would not load: a value cannot be written as JSON ({e}).") from None
        try:
            return self._from_file_doc(doc, Path(name))
        except SessionFileError as e:
            raise SessionFileError(str(e).replace(f"{name} is a damaged kernelscope session",
                                                  f"{name} would not load", 1)) from None

    @classmethod
    def _from_file_doc(cls, doc: Any, path: Path) -> "Session":
        """A decoded session file (any schema version this code reads), validated, as a Session."""
        if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
            raise SessionFileError(f"{path} is JSON but not a kernelscope session file.")
        version = doc.get("schema_version")
        if version not in READABLE_VERSIONS:
            raise SessionFileError(
                f"{path} uses session schema version {visible(str(version))[:40]}, and this kernelscope reads versions "
                f"{' and '.join(map(str, READABLE_VERSIONS))}."
            )
        table = None
        try:
            if version == 2:
                columns = {k: doc.pop(k, None) for k in (*LAUNCH_KEYS, *REGION_KEYS)}
                doc.pop("launches", None)
                doc.pop("regions", None)
            doc, skipped = check_session(doc)
            if version == 2:
                columns = {k: v for k, v in columns.items() if v is not None}
                doc["regions"] = []
                regions = decode_regions(columns, skipped)
                table = decode_launches(columns, skipped)
        except Invalid as e:
            raise SessionFileError(f"{path} is a damaged kernelscope session: {e}.") from None
        try:
            session = cls.from_dict(doc, table)
            if table is not None:
                session.regions = regions
        except (KeyError, TypeError, ValueError, OverflowError) as e:  # the schema should have caught it
            raise SessionFileError(f"{path} is a damaged kernelscope session ({type(e).__name__}: {e}).") from None
        session.skipped_on_load = skipped
        return session
