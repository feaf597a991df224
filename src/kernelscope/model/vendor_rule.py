"""NVIDIA's rule results: what Nsight Compute's guided-analysis rules said about a launch, imported from its report
and stored with the launch's counters, with the numbers that triggered each. kernelscope's own rules' findings are
analysis results (analyze/rule.Finding); recommend turns these records into that Finding to rank them."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class VendorRuleResult:
    source: str  # "ncu-rule"
    rule_id: str
    name: str
    section: str
    severity: str  # "optimization" | "warning" | "error" | "info"
    title: str
    message: str
    speedup_type: str | None = None  # ncu: "global" | "local"
    speedup_pct: float | None = None  # ncu's estimated speedup, % of this kernel's time
    evidence: tuple[tuple[str, Any], ...] = field(default_factory=tuple)  # (metric raw name, value)

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["evidence"] = [list(e) for e in self.evidence]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "VendorRuleResult":
        kw = {k: d.get(k) for k in ("source", "rule_id", "name", "section", "severity", "title", "message",
                                    "speedup_type", "speedup_pct")}
        return cls(**kw, evidence=tuple((str(e[0]), e[1]) for e in d.get("evidence", [])))
