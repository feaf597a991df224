"""A measured, derived or missing value, with where it came from."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

# Where a value came from. "device-spec" means a figure the driver reports for
# the device (e.g. SM count), never a datasheet number dressed as a measurement.
SOURCES = ("cupti", "ncu", "nvml", "gpm", "instrument", "derived", "device-spec", "user")

Value = Union[int, float, str, bool, list, None]


@dataclass(frozen=True)
class Metric:
    """One value with its unit and provenance.

    A value that was not collected has ``value=None`` and a ``missing_reason``;
    it is never stored as zero. Derived values name their formula.
    """

    value: Value
    unit: str
    source: str
    raw_name: str
    missing_reason: str | None = None
    formula: str | None = None

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"unknown metric source {self.source!r}; expected one of {', '.join(SOURCES)}")
        if self.value is None and not self.missing_reason:
            raise ValueError(f"metric {self.raw_name!r} has no value and no reason why")
        if self.source == "derived" and self.value is not None and not self.formula:
            raise ValueError(f"derived metric {self.raw_name!r} must name its formula")

    @property
    def is_missing(self) -> bool:
        return self.value is None

    @classmethod
    def missing(cls, raw_name: str, reason: str, source: str, unit: str = "") -> "Metric":
        return cls(value=None, unit=unit, source=source, raw_name=raw_name, missing_reason=reason)

    def to_dict(self, raw_name: bool = True) -> dict[str, Any]:
        """The one JSON form of a metric (session files, show --json). ``raw_name=False`` leaves the raw name
        out, for maps already keyed by it."""
        d: dict[str, Any] = {"value": self.value, "unit": self.unit, "source": self.source}
        if raw_name:
            d["raw_name"] = self.raw_name
        if self.missing_reason is not None:
            d["missing_reason"] = self.missing_reason
        if self.formula is not None:
            d["formula"] = self.formula
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Metric":
        return cls(
            value=d.get("value"),
            unit=d.get("unit", ""),
            source=d["source"],
            raw_name=d["raw_name"],
            missing_reason=d.get("missing_reason"),
            formula=d.get("formula"),
        )


MetricMap = dict[str, Metric]


def metrics_to_dict(metrics: MetricMap) -> dict[str, dict[str, Any]]:
    return {name: m.to_dict() for name, m in sorted(metrics.items())}


def metrics_from_dict(d: dict[str, Any]) -> MetricMap:
    return {name: Metric.from_dict(m) for name, m in d.items()}
