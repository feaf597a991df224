"""Live GPU state read by the sampler (NVML, GPM) while a workload runs, and by `top`."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelscope.model.metric import Metric, MetricMap, metrics_from_dict, metrics_to_dict


@dataclass
class Sample:
    """One reading of one GPU: every field is a Metric keyed by model name.

    ``wall_time_ns`` is absolute (``time.time_ns()`` when the reading began);
    ``t_ns`` is the same instant on the session clock (ns since the session's
    ``time_origin_ns``, like ``Launch.start_ns``), or None when the session has
    no trace to give it an origin. GPM fields cover a trailing window of at
    least 250 ms ending at the sample; the other NVML fields are as the driver
    last updated them (its own averaging windows).
    """

    wall_time_ns: int
    device_index: int  # CUDA ordinal, the numbering Launch.device_index uses
    metrics: MetricMap = field(default_factory=dict)
    t_ns: int | None = None

    def value(self, key: str) -> Any:
        m = self.metrics.get(key)
        return None if m is None else m.value

    def to_dict(self) -> dict[str, Any]:
        return {"wall_time_ns": self.wall_time_ns, "t_ns": self.t_ns, "device_index": self.device_index,
                "metrics": metrics_to_dict(self.metrics)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Sample":
        t = d.get("t_ns")
        return cls(wall_time_ns=int(d["wall_time_ns"]), device_index=int(d["device_index"]),
                   metrics=metrics_from_dict(d.get("metrics", {})), t_ns=None if t is None else int(t))


@dataclass
class GpuProcess:
    """A process holding a context on a GPU, as NVML lists it."""

    pid: int
    name: Metric
    used_memory: Metric

    def to_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "name": self.name.to_dict(), "used_memory": self.used_memory.to_dict()}


@dataclass
class DeviceReading:
    """Everything `top` shows for one GPU at one instant."""

    index: int  # NVML index (top lists every GPU, not only the CUDA-visible ones)
    name: Metric
    sample: Sample
    processes: list[GpuProcess] = field(default_factory=list)
    processes_missing_reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name.to_dict(),
            "wall_time_ns": self.sample.wall_time_ns,
            "metrics": metrics_to_dict(self.sample.metrics),
            "processes": [p.to_dict() for p in self.processes],
            "processes_missing_reason": self.processes_missing_reason,
        }
