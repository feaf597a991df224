"""`show --json`: a stable JSON of what `show` draws, from an analyze.report.Report. Each kernel
configuration's metrics are keyed by their raw collector name, each in Metric.to_dict's form
(value, unit, source; the raw name is the key)."""
from __future__ import annotations

from dataclasses import asdict
from typing import Any

from kernelscope.analyze.analysis import KernelAnalysis
from kernelscope.analyze.collectives import ALGBW_FORMULA, BUSBW_FORMULA, WAIT_FORMULA, WARMUP_RULE, CollectiveRow
from kernelscope.analyze.kernel_table import WAVES_FORMULA, ConfigSummary
from kernelscope.analyze.memory import ALLOCATED_FORMULA, BASELINE_FORMULA, RESERVED_FORMULA, MemoryReport
from kernelscope.analyze.ranks import IMBALANCE_FORMULA, OVERLAP_FORMULA, RanksReport
from kernelscope.analyze.report import KernelReport, Report
from kernelscope.analyze.rule import Finding
from kernelscope.analyze.timeline import Timeline
from kernelscope.model import Metric

JSON_SCHEMA = "kernelscope-show/1"


def _rule_result(f: Finding) -> dict[str, Any]:
    """A kernel finding, kernelscope's or NVIDIA's, under the keys of NVIDIA's rule results as the session stores them
    (model.VendorRuleResult.to_dict)."""
    return {"source": f.source, "rule_id": f.rule, "name": f.rule_title, "section": f.section, "severity": f.severity,
            "title": f.title, "message": f.message, "speedup_type": f.estimate_type, "speedup_pct": f.kernel_gain_pct,
            "evidence": [list(e) for e in f.evidence]}


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
                       "median_step_ns": r.median_step_ns, "median_step_basis": r.step_basis,
                       "categories": [{"category": s.category, "ns": s.total_ns, "share_pct": round(100 * s.share, 3),
                                       "count": s.count} for s in r.shares],
                       "sync_calls": dict(r.sync_calls)} for r in v.breakdown.ranks]},
        "findings": [{"rule": f.rule, "category": f.category, "title": f.title, "kernel": f.kernel,
                      "gain_pct": round(f.gain_pct, 3), "gain_formula": f.gain_formula,
                      "evidence": [[str(k), _plain(x)] for k, x in f.evidence], "fix": f.fix, "message": f.message,
                      "source": f.source, "scope": f.scope, "rank": f.rank,
                      "kernel_gain_pct": f.kernel_gain_pct, "explains": list(f.explains),
                      "kernels": list(f.kernels)} for f in v.findings],
        "combined_gain_pct": None if v.combined_gain_pct is None else round(v.combined_gain_pct, 3),
        "combined_formula": v.combined_formula,
        "not_evaluated": [{"rule": n.rule, "reason": n.reason} for n in v.not_evaluated],
        "too_short": v.too_short,
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
        **({"operators": operators_json(report.operators)} if report.operators is not None
           and report.operators.missing_reason is None else {}),
        **({} if timeline_limit is None else {"timeline": timeline_json(report.analysis.timeline, timeline_limit)}),
    }


def operators_json(ops: Any) -> dict[str, Any]:
    """The operators behind the kernels (analyze.operators.OperatorsReport)."""
    m = ops.model
    model = None if m is None else {"flops_per_step": _metric(m.flops_per_step), "flops_per_s": _metric(m.flops_per_s),
                                    "utilisation_pct": _metric(m.utilisation_pct),
                                    "counted_launches": m.counted_launches, "launches": m.launches}
    return {"missing": list(ops.missing), "model_flops": model, "rows": [{
        "operator": r.name, "outer": r.outer, "inputs": r.shapes, "python_line": r.python_line,
        "modules": list(r.modules), "calls": r.calls, "launches": r.launches, "kernel_ns": r.kernel_ns,
        "kernels": list(r.kernels), "formula": r.formula, "flops": r.flops, "bytes": r.bytes,
        "flops_per_s": _metric(r.flops_per_s), "bytes_per_s": _metric(r.bytes_per_s),
        "pct_of_compute_ceiling": _metric(r.pct_of_compute_ceiling),
        "pct_of_bandwidth_ceiling": _metric(r.pct_of_bandwidth_ceiling)} for r in ops.rows]}


# -- each kernel's analysis: bound, throughput, % of peak, roofline point, ranked recommendations with evidence
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
                             "merged": list(r.merged), "finding": _rule_result(r.finding)}
                            for r in a.recommendations.recommendations],
        "not_evaluated": [{"rule_id": n.rule, "reason": n.reason} for n in a.recommendations.not_evaluated],
        "nvidia_comparison": [{"cause": c.cause, "kernelscope": c.kernelscope,
                               "kernelscope_gain_pct": c.kernelscope_gain_pct,
                               "nvidia": [{"rule_id": n, "title": t, "pct": p, "type": ty} for n, t, p, ty in c.nvidia],
                               "agreement": c.agreement, "explanation": c.explanation}
                              for c in a.nvidia_comparison],
        "missing": [{"what": what, "why": why} for what, why in a.missing],
    }


# -- `ranks` and `collectives` (one rank for a one-process session)
def _collective(row: CollectiveRow) -> dict[str, Any]:
    return {
        "name": row.name, "process_group": row.process_group, "index": row.index, "operation": row.operation,
        "bytes": row.bytes, **({"bytes_missing_reason": row.bytes_missing_reason} if row.bytes is None else {}),
        "straggler_rank": row.straggler_rank,
        "ranks": {str(t.rank): {"start_ns": t.start_ns, "end_ns": t.end_ns, "wait_ns": t.wait_ns} for t in row.ranks},
        "spread_ns": row.spread_ns, "transfer_ns": row.transfer_ns,
        "algbw_gb_s": None if row.algbw_gb_s is None else round(row.algbw_gb_s, 3),
        "busbw_gb_s": None if row.busbw_gb_s is None else round(row.busbw_gb_s, 3),
        **({"bandwidth_missing_reason": row.bandwidth_missing_reason} if row.busbw_gb_s is None else {}),
    }


def ranks_json(report: RanksReport) -> dict[str, Any]:
    """The keys `show --json` gains: ranks, collectives, and how they were derived.

    collectives: in time order per process group, each with `name`, `process_group`, `bytes`,
    `straggler_rank` and `ranks`: {"<rank>": {`start_ns`, `end_ns`, `wait_ns`}}, plus the index in its
    group, the nccl-tests operation and bandwidths (with their formulas)."""
    c, s = report.collectives, report.summary
    run = c.run_straggler
    return {
        "ranks": [{**r.info.to_dict(), "kernels": r.kernels, "span_ns": r.span_ns, "compute_ns": r.compute_ns,
                   "communication_ns": r.communication_ns, "idle_ns": r.idle_ns, "overlap_ns": r.overlap_ns,
                   "overlap_pct": None if r.overlap_pct is None else round(r.overlap_pct, 3),
                   "wait_ns": r.wait_ns, "collectives": r.collectives} for r in s.ranks],
        "collectives": [_collective(row) for row in c.rows],
        "ranks_summary": {
            "compute_imbalance_pct": None if s.compute_imbalance_pct is None else round(s.compute_imbalance_pct, 3),
            "straggler_rank": None if run is None else run.rank,
            "straggler": None if run is None else {"rank": run.rank, "collectives": run.collectives,
                                                   "caused_wait_ns": run.caused_wait_ns, "sentence": run.sentence,
                                                   "warmup_collectives": run.warmup_collectives,
                                                   "warmup_wait_ns": run.warmup_wait_ns},
            "stragglers": [{"rank": x.rank, "collectives": x.collectives, "caused_wait_ns": x.caused_wait_ns,
                            "warmup_collectives": x.warmup_collectives, "warmup_wait_ns": x.warmup_wait_ns}
                           for x in c.stragglers],
            "straggler_rule": WARMUP_RULE,
            "collectives_missing_reason": c.missing_reason,
            "notes": list(s.notes),
            "formulas": {"wait_ns": WAIT_FORMULA, "algbw_gb_s": ALGBW_FORMULA, "busbw_gb_s": BUSBW_FORMULA,
                         "overlap_pct": OVERLAP_FORMULA, "compute_imbalance_pct": IMBALANCE_FORMULA},
        },
    }


# -- `memory` (run --memory): the numbers the Memory panel draws, with their formulas
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
