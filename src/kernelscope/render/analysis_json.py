"""The analysis (bound, throughput, % of peak, roofline point, ranked
recommendations with evidence) as plain JSON for `show --json`."""
from __future__ import annotations

from typing import Any

from kernelscope.analyze.analysis import KernelAnalysis, SessionAnalysis
from kernelscope.model import Metric


def _m(m: Metric) -> dict[str, Any]:
    return m.to_dict()


def kernel_analysis_json(a: KernelAnalysis) -> dict[str, Any]:
    p = a.roofline
    return {
        "verdict": a.verdict,
        "bound": {"bound": a.bound.bound, "basis": a.bound.basis, "reason": a.bound.reason,
                  "limiter": a.bound.limiter, "evidence": [list(e) for e in a.bound.evidence]},
        "throughput": {label: _m(m) for label, m in a.throughput},
        "pct_of_peak": {label: _m(m) for label, m in a.pct_of_peak},
        "roofline": {"flops": _m(p.flops), "bytes": _m(p.bytes), "intensity": _m(p.intensity),
                     "flop_rate": _m(p.flop_rate), "roof": _m(p.roof), "pct_of_roof": _m(p.pct_of_roof),
                     "side": p.side or None},
        "recommendations": [{"gain_pct": r.gain_pct, "gain_basis": r.gain_basis, "session_gain_pct": r.session_gain_pct,
                             "local_pct": r.local_pct, "vendor_pct": r.vendor_pct,
                             "ncu_estimates": [{"rule_id": n, "title": t, "pct": p, "type": ty}
                                               for n, t, p, ty in r.ncu_estimates],
                             "merged": list(r.merged), "finding": r.finding.to_dict()}
                            for r in a.recommendations.recommendations],
        "not_evaluated": [{"rule_id": n.rule_id, "reason": n.reason} for n in a.recommendations.not_evaluated],
        "missing": [{"what": what, "why": why} for what, why in a.missing],
    }


def analysis_json(analysis: SessionAnalysis) -> dict[str, dict[str, Any]]:
    """Per kernel (full name), its analysis."""
    return {a.kernel.name: kernel_analysis_json(a) for a in analysis.kernels}
