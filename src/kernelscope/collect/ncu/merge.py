"""The counter pass in a session: choose what ncu profiles, then merge its
results into the trace-pass launches (matched by kernel name, launch
configuration and occurrence), or build a session from a report alone."""
from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from kernelscope.model.names import short_kernel_name
from kernelscope.collect.ncu.fields import (
    DERIVED_RATIOS,
    NCU_DEVICE_ATTRIBUTES,
    NCU_FIELDS,
    STALL_FIELDS,
)
from kernelscope.collect.ncu.derive import resolve_field
from kernelscope.collect.ncu.report_reader import NcuKernelResult, NcuReport
from kernelscope.model import CollectorStatus, Device, Launch, Metric, Session, attribute
from kernelscope.model import collectors as collector


def top_kernel_regex(session: Session, top: int) -> str | None:
    """Regex over ncu's function names for the ``top`` kernels by total trace time."""
    totals: dict[str, int] = defaultdict(int)
    for x in session.launches:
        totals[short_kernel_name(x.kernel)] += x.duration_ns
    names = sorted(totals, key=lambda n: -totals[n])[:top]
    if not names:
        return None
    return "^(?:" + "|".join(re.escape(n) for n in names) + ")$"


def resolve_fields(raw: dict[str, Metric]) -> dict[str, Metric]:
    """Model-named metrics from raw ncu metrics via NCU_FIELDS: the first of a field's names present, else its
    first derivation whose parts are present (formula kept), else missing with what would add it."""
    out: dict[str, Metric] = {f.model_name: resolve_field(f, raw) for f in NCU_FIELDS}
    out.update((f.model_name, resolve_field(f, raw)) for f in STALL_FIELDS)
    for name, (num, den) in DERIVED_RATIOS.items():
        if out[name].is_missing and not out[num].is_missing and not out[den].is_missing and out[den].value:
            out[name] = Metric(value=float(out[num].value) / float(out[den].value), unit=out[name].unit,
                               source="derived", raw_name=f"{out[num].raw_name} / {out[den].raw_name}",
                               formula=f"{num} / {den}")
    return out


def _apply(launch: Launch, k: NcuKernelResult) -> None:
    launch.counters = dict(k.metrics)
    launch.findings = list(k.findings)
    if k.source_lines is not None:
        launch.source_lines = k.source_lines
    for name, m in resolve_fields(k.metrics).items():
        current = launch.metrics.get(name)
        if current is None or current.is_missing:  # trace-pass values stay; ncu's own copy is in counters
            launch.metrics[name] = m
    for r in k.nvtx_ranges:
        if r not in launch.regions:
            launch.regions.append(r)


def launch_from_result(k: NcuKernelResult) -> Launch:
    duration = k.metrics.get("gpu__time_duration.sum")
    launch = Launch(kernel=k.name, grid=k.grid, block=k.block, start_ns=None,
                    duration_ns=int(duration.value) if duration is not None else 0)
    smem_s, smem_d = (
        k.metrics.get("launch__shared_mem_per_block_static"),
        k.metrics.get("launch__shared_mem_per_block_dynamic"),
    )
    if smem_s is not None and smem_d is not None:
        launch.metrics["shared_memory_per_block_bytes"] = Metric(
            value=int(smem_s.value) + int(smem_d.value), unit="byte/block", source="derived",
            raw_name=f"{smem_s.raw_name} + {smem_d.raw_name}", formula="static + dynamic shared memory per block")
    _apply(launch, k)
    return launch


@dataclass(frozen=True)
class MergeStats:
    matched_by_config: int
    matched_by_name: int
    unmatched: int


def merge(session: Session, report: NcuReport, launch_skip: int = 0) -> MergeStats:
    """Attach each ncu result to the trace-pass launch it measured.

    ncu (per-launch-config filter mode) profiles occurrence ``launch_skip`` of
    each (kernel, grid, block); the same occurrence of the same configuration
    in the trace pass is its match. Failing that, the next unmatched launch of
    the same kernel name; failing that, the result becomes a launch of its own.
    """
    by_config: dict[tuple, list[Launch]] = defaultdict(list)
    by_name: dict[str, list[Launch]] = defaultdict(list)
    for x in session.launches:
        short = short_kernel_name(x.kernel)
        by_config[(short, x.grid, x.block)].append(x)
        by_name[short].append(x)
    taken: set[int] = set()
    next_occurrence: dict[tuple, int] = defaultdict(lambda: launch_skip)
    cfg = name = lost = 0
    for k in report.kernels:
        key = (k.function, k.grid, k.block)
        candidates = by_config.get(key, [])
        idx = next_occurrence[key]
        target = candidates[idx] if idx < len(candidates) and id(candidates[idx]) not in taken else None
        if target is not None:
            next_occurrence[key] = idx + 1
            cfg += 1
        else:
            target = next((x for x in by_name.get(k.function, []) if id(x) not in taken), None)
            if target is not None:
                name += 1
        if target is None:
            lost += 1
            session.launches.append(launch_from_result(k))
            continue
        taken.add(id(target))
        _apply(target, k)
    return MergeStats(cfg, name, lost)


def device_from_report(report: NcuReport) -> Device | None:
    m = report.kernels[0].metrics
    name = m.get("device__attribute_display_name")
    major = m.get("device__attribute_compute_capability_major")
    minor = m.get("device__attribute_compute_capability_minor")
    if name is None or major is None or minor is None:
        return None
    attrs = {model: attribute(m[raw].value, unit, raw, source="ncu") for raw, model, unit in NCU_DEVICE_ATTRIBUTES
             if raw in m}
    return Device(index=0, name=str(name.value), compute_capability=(int(major.value), int(minor.value)),
                  attributes=attrs)


def report_time_details(report: NcuReport) -> dict[str, object]:
    """The report's capture times for the counters collector's details (the session header shows them)."""
    t = report.times
    out: dict[str, object] = {}
    if t is None or t.session_created_utc is None:
        out["report_created_missing"] = (
            t.missing_reason if t is not None else None
        ) or "the report was not read for it"
    else:
        out["report_created_utc"] = t.session_created_utc
    if t is not None and t.result_created_utc:
        out["results_created_utc"] = [min(t.result_created_utc), max(t.result_created_utc)]
    return out


def session_from_report(session: Session, report: NcuReport) -> None:
    """Fill a session from a report alone (`kernelscope import`, or a non-Python program)."""
    session.launches = [launch_from_result(k) for k in report.kernels]
    if session.device is None:
        session.device = device_from_report(report)
    session.collectors.setdefault(collector.TRACE, CollectorStatus(
        "not-run", "the session was built from an Nsight Compute report: kernel start times and "
                   "regions outside NVTX are not in it"))
