"""The GPU a session ran on, as the driver reported it."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kernelscope.model.metric import Metric, MetricMap, metrics_from_dict, metrics_to_dict

# %smid is a 16-bit register (the block recorder's smid), so no GPU reports more SMs than this; a session's
# sm_count is bounded by it when read, and the analyses that size a list by it rely on that.
MAX_SM_COUNT = 65536


@dataclass
class Device:
    """Identity plus attributes; every attribute is a Metric with its raw driver name.

    Attribute keys are model names such as ``sm_count``,
    ``max_shared_memory_per_sm_bytes`` or ``sm_clock_max_khz``.
    """

    index: int
    name: str
    compute_capability: tuple[int, int]
    attributes: MetricMap = field(default_factory=dict)

    @property
    def arch(self) -> str:
        return f"sm_{self.compute_capability[0]}{self.compute_capability[1]}"

    def value(self, key: str) -> Any:
        """The attribute's value, or None when it is absent or was not collected."""
        m = self.attributes.get(key)
        return None if m is None else m.value

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "name": self.name,
            "compute_capability": list(self.compute_capability),
            "attributes": metrics_to_dict(self.attributes),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Device":
        cc = d["compute_capability"]
        return cls(
            index=int(d["index"]),
            name=str(d["name"]),
            compute_capability=(int(cc[0]), int(cc[1])),
            attributes=metrics_from_dict(d.get("attributes", {})),
        )


def attribute(value: Any, unit: str, raw_name: str, source: str = "device-spec") -> Metric:
    """A device attribute read from a collector (driver, NVML, profiler)."""
    return Metric(value=value, unit=unit, source=source, raw_name=raw_name)
