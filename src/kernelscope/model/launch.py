"""One kernel launch and the other GPU activities seen in the trace pass."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelscope.model.blocks import BlockRecords, PhaseScopes
from kernelscope.model.vendor_rule import VendorRuleResult
from kernelscope.model.metric import MetricMap, metrics_from_dict, metrics_to_dict
from kernelscope.model.ranks import Collective
from kernelscope.model.source_lines import SourceLines

Dim3 = tuple[int, int, int]


@dataclass
class Launch:
    """A kernel launch: configuration and timing as the collector saw it.

    ``start_ns`` is on the session's clock (nanoseconds since the session's
    ``time_origin_ns``); None when only the counter pass saw the launch (ncu
    serialises kernels, so its launches have no timeline). Registers, shared memory and any other per-launch
    values live in ``metrics`` keyed by model name, each with its raw name.
    """

    kernel: str
    grid: Dim3
    block: Dim3
    start_ns: int | None
    duration_ns: int
    stream: int | None = None
    device_index: int | None = None
    correlation_id: int | None = None
    regions: list[str] = field(default_factory=list)
    metrics: MetricMap = field(default_factory=dict)
    # Counter pass: every ncu metric kept, keyed by its raw ncu name, and NVIDIA's rule results.
    counters: MetricMap = field(default_factory=dict)
    findings: list[VendorRuleResult] = field(default_factory=list)
    # In-kernel instrumentation (opt-in): per-block SM and times, per-warp phases. None: not instrumented.
    block_records: BlockRecords | None = None
    scopes: PhaseScopes | None = None
    rank: int | None = None  # the process (Session.ranks) that launched it; None in a one-process session
    collective: Collective | None = None  # an NCCL kernel: the collective it runs
    source_lines: SourceLines | None = None  # counters per source line (ncu SourceCounters); None: not recorded

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]

    def value(self, key: str) -> Any:
        m = self.metrics.get(key)
        return None if m is None else m.value

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "kernel": self.kernel,
            "grid": list(self.grid),
            "block": list(self.block),
            "start_ns": self.start_ns,
            "duration_ns": self.duration_ns,
            "stream": self.stream,
            "device_index": self.device_index,
            "correlation_id": self.correlation_id,
            "regions": list(self.regions),
            "metrics": metrics_to_dict(self.metrics),
            "counters": metrics_to_dict(self.counters),
            "findings": [f.to_dict() for f in self.findings],
        }
        if self.block_records is not None:  # written only when present: uninstrumented files stay as they were
            d["block_records"] = self.block_records.to_dict()
        if self.scopes is not None:
            d["scopes"] = self.scopes.to_dict()
        if self.rank is not None:  # multi-process sessions only: one-process files stay as they were
            d["rank"] = self.rank
        if self.collective is not None:
            d["collective"] = self.collective.to_dict()
        if self.source_lines is not None:
            d["source_lines"] = self.source_lines.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Launch":
        return cls(
            kernel=str(d["kernel"]),
            grid=_dim3(d["grid"]),
            block=_dim3(d["block"]),
            start_ns=None if d.get("start_ns") is None else int(d["start_ns"]),
            duration_ns=int(d["duration_ns"]),
            stream=d.get("stream"),
            device_index=d.get("device_index"),
            correlation_id=d.get("correlation_id"),
            regions=[str(r) for r in d.get("regions", [])],
            metrics=metrics_from_dict(d.get("metrics", {})),
            counters=metrics_from_dict(d.get("counters", {})),
            findings=[VendorRuleResult.from_dict(f) for f in d.get("findings", [])],
            block_records=None if d.get("block_records") is None else BlockRecords.from_dict(d["block_records"]),
            scopes=None if d.get("scopes") is None else PhaseScopes.from_dict(d["scopes"]),
            rank=d.get("rank"),
            collective=None if d.get("collective") is None else Collective.from_dict(d["collective"]),
            source_lines=None if d.get("source_lines") is None else SourceLines.from_dict(d["source_lines"]),
        )


@dataclass
class Activity:
    """A GPU activity that is not a kernel: memcpy or memset, with its size."""

    kind: str  # "memcpy" | "memset"
    name: str
    start_ns: int
    duration_ns: int
    bytes: int | None = None
    stream: int | None = None
    rank: int | None = None  # multi-process sessions: the process it belongs to

    def to_dict(self) -> dict[str, Any]:
        return _without_rank(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Activity":
        return cls(**{k: d.get(k) for k in ("kind", "name", "start_ns", "duration_ns", "bytes", "stream", "rank")})


@dataclass
class Region:
    """A named range (kernelscope.region, record_function): CPU span and, when seen, GPU span."""

    name: str
    cpu_start_ns: int
    cpu_duration_ns: int
    gpu_start_ns: int | None = None
    gpu_duration_ns: int | None = None
    rank: int | None = None  # multi-process sessions: the process it belongs to

    def to_dict(self) -> dict[str, Any]:
        return _without_rank(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Region":
        return cls(
            **{
                k: d.get(k)
                for k in ("name", "cpu_start_ns", "cpu_duration_ns", "gpu_start_ns", "gpu_duration_ns", "rank")
            }
        )


def _without_rank(d: dict[str, Any]) -> dict[str, Any]:
    """One-process files stay as they were: the rank key is written only when set."""
    return {k: v for k, v in d.items() if k != "rank" or v is not None}


def _dim3(v: Any) -> Dim3:
    x = [int(i) for i in v]
    if len(x) != 3:
        raise ValueError(f"expected three dimensions, got {v!r}")
    return (x[0], x[1], x[2])


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
