"""`show --json`'s `memory` (run --memory): the numbers the Memory panel draws, with their formulas."""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

from kernelscope.analyze.memory import ALLOCATED_FORMULA, BASELINE_FORMULA, RESERVED_FORMULA, MemoryReport


def memory_json(m) -> dict[str, Any]:
    """A MemoryReport as plain JSON, or {"missing_reason": ...} when the history could not be used."""
    if not isinstance(m, MemoryReport):
        return {"missing_reason": m.reason}
    d = asdict(m)
    d["points"] = [[p["t_ns"], p["allocated_bytes"], p["reserved_bytes"]] for p in d["points"]]
    d["points_columns"] = ["t_ns", "allocated_bytes", "reserved_bytes"]
    d["formulas"] = {"allocated_bytes": ALLOCATED_FORMULA, "reserved_bytes": RESERVED_FORMULA,
                     "baseline_allocated_bytes": BASELINE_FORMULA}
    return d
