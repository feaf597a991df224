"""`show --json`: a stable JSON of what `show` draws, from an analyze.report.Report. Each kernel
configuration's metrics are keyed by their raw collector name, each in Metric.to_dict's form
(value, unit, source; the raw name is the key)."""
from __future__ import annotations

from typing import Any

from kernelscope.analyze.kernel_table import WAVES_FORMULA, ConfigSummary
from kernelscope.analyze.report import KernelReport, Report
from kernelscope.analyze.timeline import Timeline
from kernelscope.model import Metric
from kernelscope.render.analysis_json import kernel_analysis_json

JSON_SCHEMA = "kernelscope-show/1"


def _metric(m: Metric) -> dict[str, Any]:
    return m.to_dict(raw_name=False)  # keyed by the raw name


def _derived(value: Any, unit: str, formula: str) -> dict[str, Any]:
    return {"value": value, "unit": unit, "source": "derived", "formula": formula}


def _config(c: ConfigSummary) -> dict[str, Any]:
    metrics = {m.raw_name: _metric(m) for m in c.metrics.values()}
    occ = c.occupancy
    if occ is None:
        reason = c.occupancy_missing_reason or "not computed"
        for name in ("theoretical_occupancy_pct", "active_blocks_per_sm", "limiter"):
            metrics[f"kernelscope.{name}"] = {"value": None, "unit": "", "source": "derived", "missing_reason": reason}
    else:
        f = f"occupancy calculator ({occ.arch})"
        metrics["kernelscope.theoretical_occupancy_pct"] = _derived(round(occ.theoretical_occupancy_pct, 4), "%", f)
        metrics["kernelscope.active_blocks_per_sm"] = _derived(occ.active_blocks_per_sm, "block", f)
        metrics["kernelscope.active_warps_per_sm"] = _derived(occ.active_warps_per_sm, "warp", f)
        metrics["kernelscope.limiter"] = _derived(occ.limiter, "", f)
        for k, v in occ.blocks_limit.items():
            metrics[f"kernelscope.occupancy_limit_{k}"] = _derived(v, "block", f)
    if c.waves_per_sm is not None:
        metrics["kernelscope.waves_per_sm"] = _derived(round(c.waves_per_sm, 4), "", WAVES_FORMULA)
    return {
        "grid": list(c.config.grid),
        "block": list(c.config.block),
        "launches": c.launches,
        "total_ns": c.total_ns,
        "metrics": dict(sorted(metrics.items())),
    }


def _counter_results(k: KernelReport) -> list[dict[str, Any]]:
    """Every raw ncu metric of each profiled launch, and NVIDIA's rule findings."""
    return [{
        "grid": list(x.grid), "block": list(x.block), "start_ns": x.start_ns,
        "counters": {name: _metric(m) for name, m in sorted(x.counters.items())},
        "findings": [f.to_dict() for f in x.findings],
    } for x in k.counter_launches]


def _kernel(kr: KernelReport) -> dict[str, Any]:
    k = kr.summary
    return {
        "name": k.name,
        "short_name": k.short_name,
        "launches": k.launches,
        "total_ns": k.total_ns,
        "mean_ns": round(k.mean_ns, 3),
        "median_ns": k.median_ns,
        "min_ns": k.min_ns,
        "max_ns": k.max_ns,
        "share_of_kernel_time": round(k.share_of_kernel_time, 6),
        "regions": list(k.regions),
        "configurations": [_config(c) for c in k.configs],
        "counter_results": _counter_results(kr),
        "analysis": kernel_analysis_json(kr.analysis),
    }


def timeline_json(tl: Timeline, limit: int) -> dict[str, Any]:
    """The first ``limit`` rows of the run's timeline: the same rows the terminal's timeline draws."""
    rows = [{"kind": r.kind, "name": r.name, "start_ns": r.start_ns, "duration_ns": r.duration_ns,
             "gap_before_ns": r.gap_before_ns, "gap_kind": r.gap_kind, "regions": list(r.regions),
             "on_gpu": r.on_gpu, "notes": {name: m.to_dict() for name, m in r.notes},
             **({} if r.rank is None else {"rank": r.rank}),  # several ranks only: one-rank JSON is as it was
             **({} if r.barrier is None else {"barrier": vars(r.barrier)})} for r in tl.rows[:limit]]
    return {"span_ns": tl.span_ns, "gpu_busy_ns": tl.gpu_busy_ns, "missing_reason": tl.missing_reason,
            "gaps": [vars(g) for g in tl.gaps], "rows_total": len(tl.rows), "rows": rows,
            **({"barriers": [vars(b) for b in tl.barriers]} if tl.barriers else {})}


def _plain(v: Any) -> Any:
    return v if v is None or isinstance(v, (str, int, float, bool)) else str(v)


def verdict_json(v: Any) -> dict[str, Any] | None:
    """The verdict as `show --json` writes it: the wall-time breakdown, then every finding best first."""
    if v is None:
        return None
    return {
        "breakdown": {
            "formula": v.breakdown.formula, "missing_reason": v.breakdown.missing_reason,
            "ranks": [{"rank": r.rank, "window_start_ns": r.window_start_ns, "window_end_ns": r.window_end_ns,
                       "wall_ns": r.wall_ns, "window": r.window_basis, "steps": r.steps,
                       "median_step_ns": r.median_step_ns,
                       "categories": [{"category": s.category, "ns": s.total_ns, "share_pct": round(100 * s.share, 3),
                                       "count": s.count} for s in r.shares],
                       "sync_calls": dict(r.sync_calls)} for r in v.breakdown.ranks]},
        "findings": [{"rule": f.rule, "category": f.category, "title": f.title, "kernel": f.kernel,
                      "gain_pct": round(f.gain_pct, 3), "gain_formula": f.gain_formula,
                      "evidence": [[str(k), _plain(x)] for k, x in f.evidence], "fix": f.fix, "message": f.message,
                      "source": f.source, "scope": f.scope, "rank": f.rank,
                      "kernel_gain_pct": f.kernel_gain_pct, "explains": list(f.explains)} for f in v.findings],
        "combined_gain_pct": None if v.combined_gain_pct is None else round(v.combined_gain_pct, 3),
        "combined_formula": v.combined_formula,
        "not_evaluated": [{"rule": n.rule, "reason": n.reason} for n in v.not_evaluated],
        "not_measured": [{"what": n.what, "reason": n.reason, "kernels": n.kernels} for n in v.not_measured],
    }


def show_json(report: Report, timeline_limit: int | None = None) -> dict[str, Any]:
    """The document of `show --json`: the report's kernels (the --kernel matches, else every kernel)."""
    session, summary = report.session, report.summary
    d = session.device
    return {
        "schema": JSON_SCHEMA,
        "session": {
            "created_utc": session.created_utc,
            "kernelscope_version": session.kernelscope_version,
            "command": session.command,
            "exit_code": session.exit_code,
            "outcome": session.outcome,
        },
        "device": None if d is None else {
            "name": d.name,
            "index": d.index,
            "compute_capability": list(d.compute_capability),
            "arch": d.arch,
            "attributes": {m.raw_name: _metric(m) for m in d.attributes.values()},
        },
        "collectors": {k: v.to_dict() for k, v in sorted(session.collectors.items())},
        "artifacts": dict(session.artifacts),
        "gpu_samples": [x.to_dict() for x in session.samples],
        "total_kernel_ns": summary.total_kernel_ns,
        "launch_count": summary.launch_count,
        "verdict": verdict_json(report.verdict),
        "kernels": [_kernel(k) for k in report.kernels],
        **({} if timeline_limit is None else {"timeline": timeline_json(report.analysis.timeline, timeline_limit)}),
    }
