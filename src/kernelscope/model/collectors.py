"""The names of the collectors, as keys of ``Session.collectors``.

Each collector records how it went under its name (a ``CollectorStatus``); panels
and commands look the status up by the same name. The values are stored in
session files, so they never change (old sessions must load).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

TRACE = "trace"  # the trace pass: PyTorch profiler (CUPTI) launches, activities, regions
COUNTERS = "counters"  # the counter pass: Nsight Compute (or an imported .ncu-rep)
SAMPLER = "sampler"  # the live NVML / GPM sampler thread beside the trace pass
DEVICE = "device"  # the device attributes read from the CUDA driver
NVML = "nvml"  # the one-off NVML snapshot of the device (clocks, memory, bus)
INSTRUMENT = "instrument"  # the in-kernel block recorder (%smid, %globaltimer)
SCOPES = "scopes"  # Triton Proton's intra-kernel phase scopes
MEMORY = "memory"  # run --memory: the PyTorch caching allocator's history (torch.cuda.memory._record_memory_history)
STEPS = "steps"  # run --steps: the window of iterations (kernelscope.step()) the trace pass recorded

ALL = (TRACE, COUNTERS, SAMPLER, DEVICE, NVML, INSTRUMENT, SCOPES, MEMORY, STEPS)


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
