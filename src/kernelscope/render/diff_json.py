"""`diff --json`: the comparison of two sessions as plain JSON."""
from __future__ import annotations

from kernelscope.analyze.diff import SessionDiff


def diff_json(d: SessionDiff, a: str, b: str, fail_pct: float | None) -> dict:
    def stats(s):
        return None if s is None else {"launches": s.launches, "median_ns": s.median_ns, "min_ns": s.min_ns,
                                       "max_ns": s.max_ns, "q1_ns": s.q1_ns, "q3_ns": s.q3_ns, "source": s.source}

    def change(c):
        def val(m):
            return None if m is None or m.is_missing else m.value
        return {"label": c.label, "a": val(c.a), "b": val(c.b), "change_pct": c.change_pct, "change_pp": c.change_pp}

    return {
        "schema": "kernelscope-diff/1", "a": a, "b": b, "device_warning": d.device.warning,
        "total_a_ns": d.total_a_ns, "total_b_ns": d.total_b_ns, "total_change_pct": d.total_change_pct,
        "fail_if_slower_pct": fail_pct,
        "slower": [k.name for k in d.slower_than(fail_pct)] if fail_pct is not None else None,
        "kernels": [{"name": k.name, "short_name": k.short_name, "a": stats(k.a), "b": stats(k.b),
                     "change_pct": k.change_pct, "spread_ns": k.spread_ns, "spread_basis": k.spread_basis,
                     "verdict": k.verdict, "single_launch": k.single_launch, "bound_a": k.bound_a,
                     "bound_b": k.bound_b, "throughput": [change(c) for c in k.throughput],
                     "counters": [change(c) for c in k.counters]} for k in d.kernels],
    }
