"""The session file: its format, the checks applied while reading it, and writing it.

A session file is JSON (gzip-compressed when its name ends in .gz) with ``"format": "kernelscope-session"`` and a
``schema_version``. This module writes schema 2 and reads schemas 1 and 2 into the same Session:

- **Schema 1** stores every launch and region as one object (repeating every metric's unit, source and raw name,
  ~3 KB a launch). Its fields are checked by the specs below (``check_session``).
- **Schema 2** keeps schema 1's other fields and stores launches and regions in columns, beside them:

    "kernels":        [name, ...]                          each kernel name once
    "launch_shapes":  [{kernel: index, grid, block, stream, device_index, regions, metric_names,
                        metrics: {name: metric}, varying: {name: metric without "value"}}, ...]
    "launch_columns": {shape: [...], start_ns: [...], duration_ns: [...], correlation_id: [...],
                       metric_values: {name: [...]}}   one entry per launch (absolute values, not differences:
                                                       a damaged entry then loses one launch, not the rest)
    "launch_details": [{launch: index, counters, findings, block_records, scopes, collective,
                        source_lines (optional: counters per source line, model/source_lines.py)}, ...]
    "region_names":   [name, ...],  "region_columns": {name: [...], cpu_start_ns: [...], ...}

  Plain JSON (stdlib): with launches in columns, parsing is a few long lists of integers, which the stdlib parser
  reads at tens of millions of numbers a second, so no third-party codec is needed in model/.

Reading checks what it reads: parts a session can lose without misleading anyone (one launch, one metric, one
sample, the instrumentation of one launch, a bad shape with its launches) are skipped and named by their field path
in ``skipped_on_load``; the rest must be right or the file is refused with one sentence (SessionFileError).
"""
from __future__ import annotations

import gzip
import json
import marshal
import os
from dataclasses import fields as dataclass_fields
from itertools import repeat
from operator import itemgetter
from pathlib import Path
from typing import Any, Callable, TypeVar

from kernelscope.model import source_lines as sl
from kernelscope.model.blocks import BlockRecords, PhaseScopes
from kernelscope.model.collectors import CollectorStatus
from kernelscope.model.device import MAX_SM_COUNT, Device
from kernelscope.model.escape import visible
from kernelscope.model.files import InputFileError, read_input, write_atomic
from kernelscope.model.vendor_rule import VendorRuleResult
from kernelscope.model.host_sync import HostSync
from kernelscope.model.launch import Activity, DeclaredWork, Launch, Region
from kernelscope.model.launch_table import LaunchDetails, LaunchShape, LaunchTable, collector_paused
from kernelscope.model.memory import Mark, MemoryHistory, StepWindow
from kernelscope.model.operators import Operators
from kernelscope.model.metric import SOURCES, MetricMap, metrics_from_dict, metrics_to_dict
from kernelscope.model.ranks import Collective, RankInfo
from kernelscope.model.sample import Sample
from kernelscope.model.schema import (INT64, F, Invalid, Spec, any_json, boolean, either, fallback, list_of, map_of,
                                      number, obj, one_of, optional, short_string, string)
from kernelscope.model.source_lines import SourceLines

# What each top-level part of a session file holds, in the words of the report an import made it from (the first
# name of a path the loader names), so damage is said as the report's.
PART_WORDS = {"kernels": "kernel name", "launch_shapes": "launch configuration (grid, block, registers, shared "
              "memory)", "launch_columns": "launch record", "launch_details": "metrics", "device": "device"}

FORMAT_NAME = "kernelscope-session"
SCHEMA_VERSION = 2  # what this module writes: launches and regions in columns
READABLE_VERSIONS = (1, 2)  # schema 1: launches and regions one object each (files of kernelscope < 2)


class SessionFileError(Exception):
    """A session file that cannot be read; the message is one sentence for the user."""


# == Schema 1: the checks of every field (schema 2 reuses them for everything but launches and regions) =========
# Device attributes that are text; every other attribute is a number (the analyses do arithmetic on them).
TEXT_DEVICE_ATTRIBUTES = frozenset({"driver_version", "pci_bus_id_string", "name", "uuid", "serial"})

_int = number(integer=True)
_count = number(0, integer=True)
_ns = number(0, integer=True)
_finite = number()
_scalar = either(_finite, string, boolean, expected="a number, a string or true/false")
_free_json = any_json()
_any_object = obj({})


def _json_object(v: Any, path: str, problems: list[str]) -> Any:
    return _free_json(_any_object(v, path, problems), path, problems)


def _metric_rule(d: dict[str, Any]) -> tuple[str, str] | None:
    if d.get("value") is None and not d.get("missing_reason"):
        return "missing_reason", "the reason a metric without a value is missing"
    if d.get("source") == "derived" and d.get("value") is not None and not d.get("formula"):
        return "formula", "the formula of a derived value"
    return None


def metric(value: Spec) -> Spec:
    return obj({
        "value": F(optional(value)), "unit": F(string), "source": F(one_of(*SOURCES), True),
        "raw_name": F(string, True), "missing_reason": F(optional(string)), "formula": F(optional(string)),
    }, _metric_rule)


_numeric_metric = metric(_finite)
_text_metric = metric(string)
_counter_metric = metric(either(_finite, string, expected="a number or a string"))  # ncu keeps a few as text

# Device counts that size what the analyses build (one entry per SM, per warp slot): bounded at load, so
# `sm_count: 1e9` is a skipped attribute with its field named, not a billion-element tuple.
DEVICE_COUNT_BOUNDS = {"sm_count": MAX_SM_COUNT, "max_threads_per_sm": 1 << 16, "max_blocks_per_sm": 1 << 12,
                       "warp_size": 1024, "max_threads_per_block": 1 << 16}
_device_counts = {name: metric(number(1, most, integer=True)) for name, most in DEVICE_COUNT_BOUNDS.items()}

numeric_metrics = map_of(lambda name: _numeric_metric)
device_attributes = map_of(lambda name: _text_metric if name in TEXT_DEVICE_ATTRIBUTES
                           else _device_counts.get(name, _numeric_metric))
counter_metrics = map_of(lambda name: _counter_metric)


def _dim3(lo: int, hi: int) -> Spec:
    item = number(lo, hi, integer=True)

    def check(v: Any, path: str, problems: list[str]) -> Any:
        if not isinstance(v, list) or len(v) != 3:
            raise Invalid(path, "three dimensions [x, y, z]", v)
        return [item(x, f"{path}[{i}]", problems) for i, x in enumerate(v)]
    return check


_grid = _dim3(1, 2**31 - 1)
_block = _dim3(1, 1024)


def _same_lengths(*names: str) -> Any:
    def rule(d: dict[str, Any]) -> tuple[str, str] | None:
        n = len(d.get(names[0]) or [])
        for name in names[1:]:
            if len(d.get(name) or []) != n:
                return name, f"one entry per entry of {names[0]} ({n})"
        return None
    return rule


block_records = obj({
    "grid": F(_grid, True), "clock": F(string), "clock_offset_ns": F(optional(_int)), "source": F(string),
    "nsmid": F(optional(number(1, 65536, integer=True))), "buffer_rows": F(_count),
    "problems": F(list_of(string)),
    "block_id": F(list_of(_count)), "smid": F(list_of(number(0, 65535, integer=True))),
    "start_ns": F(list_of(_int)), "end_ns": F(list_of(_int)),
}, _same_lengths("block_id", "smid", "start_ns", "end_ns"))

_warp = obj({
    "block_id": F(_count, True), "warp": F(_count, True), "smid": F(optional(_count)),
    "scope": F(list_of(_count)), "start_ns": F(list_of(_int)), "end_ns": F(list_of(_int)),
    "block_offset_ns": F(optional(_int)),
}, _same_lengths("scope", "start_ns", "end_ns"))


def _scope_names_rule(d: dict[str, Any]) -> tuple[str, str] | None:
    n = len(d.get("names") or [])
    for i, w in enumerate(d.get("warps") or []):
        if any(s >= n for s in w.get("scope") or []):
            return "warps", f"scope indices below the number of scope names ({n}) in warps[{i}]"
    return None


phase_scopes = obj({
    "names": F(list_of(string)), "warps": F(list_of(_warp)), "clock": F(string),
    "clock_offset_ns": F(optional(_int)), "source": F(string), "problems": F(list_of(string)),
}, _scope_names_rule)

finding = obj({
    "source": F(string, True), "rule_id": F(string, True), "name": F(string, True), "section": F(string, True),
    "severity": F(string, True), "title": F(string, True), "message": F(string, True),
    "speedup_type": F(optional(string)), "speedup_pct": F(optional(number(-1e6, 1e6))),
    "evidence": F(list_of(list_of(optional(_scalar)))),
}, lambda d: next((("evidence", "[raw name, value] pairs") for e in d.get("evidence") or []
                   if len(e) != 2 or not isinstance(e[0], str)), None))

_collective_fields = {  # model/ranks.Collective
    "name": F(string, True), "process_group": F(optional(string)), "in_nelems": F(optional(_count)),
    "out_nelems": F(optional(_count)), "group_size": F(optional(number(1, integer=True))), "dtype": F(optional(string)),
    "seq": F(optional(_count)),
}
collective = obj(_collective_fields)

def _few(most: int, field_name: str) -> Callable[[dict[str, Any]], tuple[str, str] | None]:
    def rule(d: dict[str, Any]) -> tuple[str, str] | None:
        return None if len(d.get(field_name) or {}) <= most else (field_name, f"at most {most} entries")
    return rule


_source_counts = map_of(lambda name: number(0), drop=False)  # model/source_lines: count name -> a count >= 0
_sass = obj({
    "pc_offset": F(_count, True), "sass": F(short_string(sl.MAX_TEXT), True), "counts": F(_source_counts),
    "stalls": F(_source_counts),
}, _few(64, "stalls"))
_source_line = obj({
    "file": F(optional(number(0, sl.MAX_FILES - 1, integer=True))), "line": F(_count, True),
    "counts": F(_source_counts), "stalls": F(_source_counts),
    "instructions": F(list_of(_sass, max_items=sl.MAX_INSTRUCTIONS)),
}, _few(64, "stalls"))
_source_file = obj({
    "path": F(short_string(sl.MAX_PATH), True), "sha256": F(optional(short_string(64))),
    "line_count": F(optional(_count)),
    "excerpt": F(map_of(lambda k: _excerpt_line(k), drop=False)),
}, _few(sl.MAX_EXCERPT_LINES, "excerpt"))


def _excerpt_line(key: str) -> Spec:
    if not key.isdigit() or len(key) > 9:
        def bad(v: Any, path: Any, problems: list[str]) -> Any:
            raise Invalid(path, "a line number as the key", found=repr(key[:40]))
        return bad
    return short_string(sl.MAX_TEXT)


def _source_lines_rule(d: dict[str, Any]) -> tuple[str, str] | None:
    n = len(d.get("files") or [])
    lines = d.get("lines") or []
    if any(ln.get("file") is not None and ln["file"] >= n for ln in lines):
        return "lines", f"file indices below the number of files ({n})"
    if sum(len(ln.get("instructions") or []) for ln in lines) > sl.MAX_INSTRUCTIONS:
        return "lines", f"at most {sl.MAX_INSTRUCTIONS} instructions in all"
    return None


source_lines = obj({  # model/source_lines.SourceLines
    "files": F(list_of(_source_file, max_items=sl.MAX_FILES)),
    "lines": F(list_of(_source_line, max_items=sl.MAX_LINES), True),
    "note": F(optional(short_string(sl.MAX_NOTE))),
}, _source_lines_rule)

rank_info = obj({  # model/ranks.RankInfo
    "rank": F(_count, True), "world_size": F(optional(number(1, integer=True))), "local_rank": F(optional(_count)),
    "host": F(optional(string)), "device_index": F(optional(_count)), "device_name": F(optional(string)),
    "pid": F(optional(_count)), "nccl_version": F(optional(string)), "backend": F(optional(string)),
    "process_groups": F(list_of(_json_object)), "source": F(optional(string)), "clock_offset_ns": F(_int),
    "alignment_error_ns": F(optional(_ns)),
})

launch = obj({
    "kernel": F(string, True), "grid": F(_grid, True), "block": F(_block, True),
    "start_ns": F(optional(_int)), "duration_ns": F(_ns, True), "stream": F(optional(_int)),
    "device_index": F(optional(_count)), "correlation_id": F(optional(_int)), "regions": F(list_of(string)),
    "metrics": F(numeric_metrics), "counters": F(counter_metrics), "findings": F(list_of(finding, drop=True)),
    "block_records": F(fallback(optional(block_records), None)),
    "scopes": F(fallback(optional(phase_scopes), None)),
    "rank": F(optional(_count)), "collective": F(fallback(optional(collective), None)),
    "source_lines": F(fallback(optional(source_lines), None)),
})

_activity_fields = {  # model/launch.Activity
    "kind": F(string, True), "name": F(string, True), "start_ns": F(_int, True), "duration_ns": F(_ns, True),
    "bytes": F(optional(_count)), "stream": F(optional(_int)), "rank": F(optional(_count)),
}
activity = obj(_activity_fields)

region = obj({
    "name": F(string, True), "cpu_start_ns": F(_int, True), "cpu_duration_ns": F(_ns, True),
    "gpu_start_ns": F(optional(_int)), "gpu_duration_ns": F(optional(_ns)), "rank": F(optional(_count)),
})

sample = obj({
    "wall_time_ns": F(_int, True), "device_index": F(_count, True), "metrics": F(numeric_metrics),
    "t_ns": F(optional(_int)),
})

device = obj({
    "index": F(_count, True), "name": F(string, True),
    "compute_capability": F(list_of(number(0, 99, integer=True)), True), "attributes": F(device_attributes),
}, lambda d: None if len(d["compute_capability"]) == 2 else ("compute_capability", "[major, minor]"))

collector = obj(
    {
        "status": F(one_of("ok", "partial", "not-run", "failed"), True),
        "reason": F(optional(string)),
        "details": F(_json_object),
    }
)

declared_work = obj({
    "region": F(string, True), "occurrence": F(_count, True), "flops": F(optional(number(0))),
    "bytes": F(optional(number(0))), "units": F(map_of(lambda k: number(0), drop=False)),
})

host_sync = obj({
    "name": F(string, True), "kind": F(one_of("device", "stream", "event", "memcpy"), True),
    "cpu_start_ns": F(_int, True), "cpu_duration_ns": F(_ns, True),
})

_mark_value = either(
    _finite, string, boolean, list_of(_finite), expected="a number, a string, true/false or a list of numbers"
)

mark = obj({  # model/memory.Mark
    "name": F(string, True), "wall_time_ns": F(_int, True), "t_ns": F(optional(_int)), "step": F(optional(_count)),
    "allocated_bytes": F(optional(_count)), "reserved_bytes": F(optional(_count)),
    "memory_missing_reason": F(optional(string)), "values": F(map_of(lambda k: _mark_value, drop=False)),
})


def _memory_rule(d: dict[str, Any]) -> tuple[str, str] | None:
    same = _same_lengths("t_ns", "action", "address", "size", "stack")(d)
    if same is not None:
        return same
    if any(a >= len(d.get("actions") or []) for a in d.get("action") or []):
        return "action", "indices into actions"
    if any(k >= len(d.get("stacks") or []) for k in d.get("stack") or []):
        return "stack", "indices into stacks, or -1"
    return None


memory_history = obj({  # model/memory.MemoryHistory
    "device_index": F(_count, True), "actions": F(list_of(string), True), "t_ns": F(list_of(_int), True),
    "action": F(list_of(_count), True), "address": F(list_of(_count), True), "size": F(list_of(_count), True),
    "stack": F(list_of(number(-1, integer=True)), True), "stacks": F(list_of(list_of(string))),
    "end_allocated_bytes": F(_count, True), "end_reserved_bytes": F(_count, True),
    "max_entries": F(optional(_count)), "problems": F(list_of(string)),
}, _memory_rule)

step_window = obj({  # model/memory.StepWindow
    "first": F(_count, True), "last": F(_count, True), "steps_run": F(_count),
    "recorded_first": F(optional(_count)), "recorded_last": F(optional(_count)),
}, lambda d: None if d["first"] <= d["last"] else ("last", "a step at or after first"))

def _same_length_pairs(d: dict[str, Any]) -> tuple[str, str] | None:
    n = len(d.get("ops") or [])
    for keys, idx in ((("launch_correlation", "launch_op"), "launch_op"), (("sync_start_ns", "sync_op"), "sync_op")):
        same = _same_lengths(*keys)(d)
        if same is not None:
            return same
        if any(k >= n for k in d.get(idx) or []):
            return idx, "indices into ops"
    return None


_dims = any_json(8)
operator_record = obj({  # model/operators.Operator
    "name": F(string, True), "calls": F(_count), "outer": F(optional(string)),
    "input_dims": F(list_of(_dims)), "input_types": F(list_of(string)), "module": F(optional(string)),
    "python_frame": F(optional(string)), "concrete_inputs": F(list_of(string)),
})
operators = obj({  # model/operators.Operators
    "ops": F(list_of(operator_record), True), "launch_correlation": F(list_of(_int)), "launch_op": F(list_of(_count)),
    "sync_start_ns": F(list_of(_int)), "sync_op": F(list_of(_count)), "shapes": F(boolean), "stacks": F(boolean),
}, _same_length_pairs)

_schema1_session = obj({
    "kernelscope_version": F(string), "created_utc": F(string), "command": F(list_of(string)),
    "exit_code": F(optional(_int)), "outcome": F(string), "device": F(fallback(optional(device), None)),
    "time_origin_ns": F(_int), "collectors": F(map_of(lambda k: collector)),
    "artifacts": F(map_of(lambda k: string)), "environment": F(fallback(_json_object, {})),
    "regions": F(list_of(region, drop=True)), "activities": F(list_of(activity, drop=True)),
    "launches": F(list_of(launch, drop=True)), "samples": F(list_of(sample, drop=True)),
    "declared_work": F(list_of(declared_work, drop=True)),
    "ranks": F(list_of(rank_info)),  # a bad rank record makes the file unreadable: launches point at ranks
    "host_syncs": F(list_of(host_sync, drop=True)),
    "marks": F(list_of(mark, drop=True)),
    "memory": F(fallback(optional(memory_history), None)),  # a damaged history is left out, the rest still loads
    "steps": F(optional(step_window)),
    "operators": F(fallback(optional(operators), None)),  # damaged: left out, the launches still load
})


def check_session(doc: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The document with bad optional parts left out, and one line per part left out.

    Raises Invalid (with the field path) when the file cannot be used at all.
    """
    problems: list[str] = []
    return _schema1_session(doc, "", problems), problems


# == Schema 2: launches and regions in columns, checked as they are read ==========================================
LAUNCH_KEYS = ("kernels", "launch_shapes", "launch_columns", "launch_details")


# -- encoding ------------------------------------------------------------------------------------------------
def _template_dict(t: tuple[Any, ...]) -> dict[str, Any]:
    unit, source, raw_name, missing_reason, formula = t
    d: dict[str, Any] = {"unit": unit, "source": source, "raw_name": raw_name}
    if missing_reason is not None:
        d["missing_reason"] = missing_reason
    if formula is not None:
        d["formula"] = formula
    return d


def encode_launches(t: LaunchTable) -> dict[str, Any]:
    kernels = list(dict.fromkeys(s.kernel for s in t.shapes))
    kernel_id = {k: i for i, k in enumerate(kernels)}
    varying = {n for s in t.shapes for n in s.varying}
    return {
        "kernels": kernels,
        "launch_shapes": [{
            "kernel": kernel_id[s.kernel], "grid": list(s.grid), "block": list(s.block), "stream": s.stream,
            "device_index": s.device_index, "regions": list(s.regions), "metric_names": list(s.metric_names),
            "metrics": metrics_to_dict(s.metrics), "varying": {n: _template_dict(v) for n, v in s.varying.items()},
            **({"rank": s.rank} if s.rank is not None else {}),
        } for s in t.shapes],
        "launch_columns": {
            "shape": t.shape, "start_ns": t.start_ns, "duration_ns": t.duration_ns,
            "correlation_id": t.correlation_id,
            "metric_values": {n: t.metric_values[n] for n in sorted(varying)},
        },
        "launch_details": [{
            "launch": i, "counters": metrics_to_dict(d.counters), "findings": [f.to_dict() for f in d.findings],
            **({"block_records": d.block_records.to_dict()} if d.block_records is not None else {}),
            **({"scopes": d.scopes.to_dict()} if d.scopes is not None else {}),
            **({"collective": d.collective.to_dict()} if d.collective is not None else {}),
            **({"source_lines": d.source_lines.to_dict()} if d.source_lines is not None else {}),
        } for i, d in sorted(t.details.items())],
    }


# -- decoding, with the checks -------------------------------------------------------------------------------
_template = obj({"unit": F(string), "source": F(one_of(*SOURCES), True), "raw_name": F(string, True),
                 "missing_reason": F(optional(string)), "formula": F(optional(string))})

def _shape_names_rule(d: dict[str, Any]) -> tuple[str, str] | None:
    if set(d.get("metric_names") or []) == set(d.get("metrics") or {}) | set(d.get("varying") or {}):
        return None
    return "metric_names", "the names of its metrics and varying metrics"


_shape_fields = {
    "kernel": F(number(0, integer=True), True), "grid": F(_grid, True), "block": F(_block, True),
    "stream": F(optional(_int)), "device_index": F(optional(_count)), "regions": F(list_of(string)),
    "metric_names": F(list_of(string)), "metrics": F(map_of(lambda n: _numeric_metric, drop=False)),
    "varying": F(map_of(lambda n: _template, drop=False)), "rank": F(optional(_count)),
}
_shape = obj(_shape_fields, _shape_names_rule)
# _shape for a shape whose metric_names, metrics and varying are known to pass (their checks add no problems
# and change nothing): the other fields in the same order, then the same rule.
_shape_rest = obj({k: f for k, f in _shape_fields.items() if k not in ("metric_names", "metrics", "varying")},
                  _shape_names_rule)

# _shape's parts checked apart when shapes are checked over the column: their metrics (checked once per distinct
# text, with the rule that only reads them) and the other fields (grid and block: _dims_pass).
_SHAPE_METRIC_FIELDS = ("metric_names", "metrics", "varying")
_shape_metrics = obj({k: _shape_fields[k] for k in _SHAPE_METRIC_FIELDS}, _shape_names_rule)
_shape_others = {k: f for k, f in _shape_fields.items() if k not in (*_SHAPE_METRIC_FIELDS, "grid", "block")}

_detail_fields = {
    "launch": F(_count, True), "counters": F(counter_metrics), "findings": F(list_of(finding, drop=True)),
    "block_records": F(fallback(optional(block_records), None)),
    "scopes": F(fallback(optional(phase_scopes), None)),
    "collective": F(fallback(optional(collective), None)),
    "source_lines": F(fallback(optional(source_lines), None)),
}
_detail = obj(_detail_fields)


def _is_int(v: Any) -> bool:
    return type(v) is int and -INT64 <= v <= INT64


_NONE = type(None)


def _ints_ok(col: list[Any], nullable: bool, lo: int = -INT64, hi: int = INT64) -> bool:
    """The whole column at C speed (type set, min, max); the row-by-row check runs only when this fails."""
    types = set(map(type, col))
    if not types <= ({int, _NONE} if nullable else {int}):
        return False
    vals = [v for v in col if v is not None] if _NONE in types else col
    return not vals or (min(vals) >= lo and max(vals) <= hi)


def _bad_rows(col: list[Any], ok: Any, name: str, expected: str, bad: dict[int, str]) -> None:
    """Rows of ``col`` that ``ok`` refuses, named."""
    for i, v in enumerate(col):
        if not ok(v) and i not in bad:
            bad[i] = str(Invalid(f"launch_columns.{name}[{i}]", expected, v))


def _metric_value_ok(v: Any) -> bool:
    return v is None or (
        type(v) in (int, float) and abs(v) <= INT64 and v == v and v not in (float("inf"), float("-inf"))
    )


def _floats_ok(col: list[Any]) -> bool:
    types = set(map(type, col))
    if not types <= {int, float, _NONE}:
        return False
    vals = [v for v in col if v is not None] if _NONE in types else col
    return not vals or (min(vals) >= -INT64 and max(vals) <= INT64)  # NaN fails neither: checked below


def _a_list(v: Any, path: str) -> list[Any]:
    if not isinstance(v, list):
        raise Invalid(path, "a list", v)
    return v


def _passing_columns(items: list[Any], fields: dict[str, F]) -> dict[str, list[Any]] | None:
    """Each field's values over ``items`` (None where an item lacks an optional field), when every item is an
    object whose fields all pass their whole-column checks: what schema.obj's check finds item by item, without
    copying the items (such checks change nothing). None: some item needs the check one by one, which names what
    is wrong."""
    if set(map(type, items)) != {dict}:
        return None
    got: dict[str, list[Any]] = {}
    for name, f in fields.items():
        try:
            present = list(map(itemgetter(name), items))
        except KeyError:
            if f.required:
                return None
            present = [x[name] for x in items if name in x]
        column = getattr(f.spec, "column", None)
        if (column is None and present) or (column is not None and not column(present)):
            return None
        got[name] = (present if len(present) == len(items) else [x.get(name) for x in items] if present
                     else [None] * len(items))
    return got


def _in_order_of(cls: Any, columns: dict[str, list[Any]]) -> list[list[Any]]:
    """The columns in the order of the dataclass ``cls``'s fields, its constructor's positional arguments."""
    return [columns[f.name] for f in dataclass_fields(cls)]


def _dims_pass(col: list[Any], lo: int, hi: int) -> bool:
    """Every value of ``col`` passes _dim3(lo, hi): a list of three integers from lo to hi (checked over the
    column)."""
    return (set(map(type, col)) == {list} and set(map(len, col)) == {3}
            and number(lo, hi, integer=True).column([x for v in col for x in v]))  # type: ignore[attr-defined]


def _text_of(*parts: Any) -> str | None:
    """The repr of decoded JSON values, None where it cannot be made (nesting deeper than repr goes)."""
    try:
        return repr(parts)
    except RecursionError:
        return None


def _varying(d: dict[str, Any]) -> dict[str, Any]:
    return {n: (v.get("unit", ""), v["source"], v["raw_name"], v.get("missing_reason"), v.get("formula"))
            for n, v in (d.get("varying") or {}).items()}


def _shapes_by_column(items: list[Any], kernels: list[str]) -> list[LaunchShape | None] | None:
    """The shapes when every one passes _shape, checked over the column: the fields other than the metrics field by
    field, the metrics (metric_names, metrics, varying) checked and decoded once per distinct content. None: some
    shape needs the check one by one (which names what is wrong)."""
    if len(items) < 2:
        return None
    cols = _passing_columns(items, _shape_others)
    if cols is None or max(cols["kernel"]) >= len(kernels):
        return None
    try:
        grids, blocks = [d["grid"] for d in items], [d["block"] for d in items]
    except KeyError:
        return None
    if not (_dims_pass(grids, 1, 2**31 - 1) and _dims_pass(blocks, 1, 1024)):
        return None
    # The key is the marshal of the parts: equal bytes are equal values of the same types (1, 1.0 and true differ).
    decoded: dict[bytes, tuple[tuple[str, ...], MetricMap, dict[str, Any]]] = {}
    parts = []
    for d in items:
        try:
            key = marshal.dumps((d.get("metric_names"), d.get("metrics"), d.get("varying")))
        except ValueError:  # nested deeper than marshal goes
            return None
        got = decoded.get(key)
        if got is None:
            found: list[str] = []
            try:
                m = _shape_metrics(d, "", found)
            except Invalid:
                return None
            if found:
                return None
            got = decoded[key] = (tuple(m.get("metric_names") or ()), metrics_from_dict(m.get("metrics") or {}),
                                  _varying(m))
        parts.append(got)
    return [LaunchShape(kernels[k], tuple(g), tuple(b), stream, device, tuple(r or ()), names, dict(metrics),
                        dict(varying), rank)  # Metric is immutable: shared between shapes
            for k, g, b, stream, device, r, (names, metrics, varying), rank in zip(
                cols["kernel"], grids, blocks, cols["stream"], cols["device_index"], cols["regions"], parts,
                cols["rank"])]


def _decode_shapes(doc: dict[str, Any], problems: list[str]) -> list[LaunchShape | None]:
    """The launch shapes; a damaged one is None (its launches are dropped) and named."""
    kernels = list_of(string)(doc.get("kernels", []), "kernels", problems)
    items = _a_list(doc.get("launch_shapes", []), "launch_shapes")
    passed = _shapes_by_column(items, kernels)
    if passed is not None:
        return passed
    shapes: list[LaunchShape | None] = []
    # Shapes that differ only in regions (one per profiler step) repeat the same metrics: those are checked and
    # decoded once. The key is their text (repr), which tells apart every value JSON can hold (1, 1.0 and true).
    known: dict[str, tuple[MetricMap, dict[str, Any]]] = {}
    for i, d in enumerate(items):
        path = f"launch_shapes[{i}]"
        try:
            key = _text_of(d.get("metric_names"), d.get("metrics"), d.get("varying")) if type(d) is dict else None
            got = known.get(key) if key is not None else None
            if got is None:
                d = _shape(d, path, problems)
                metrics = metrics_from_dict(d.get("metrics") or {})
                varying = _varying(d)
                if key is not None:
                    known[key] = (metrics, varying)
            else:  # metric_names, metrics and varying passed _shape before: the rest is checked as _shape would
                d = _shape_rest(d, path, problems)
                metrics, varying = got
            if d["kernel"] >= len(kernels):
                raise Invalid(f"{path}.kernel", f"an index into kernels (below {len(kernels)})", d["kernel"])
            shapes.append(LaunchShape(
                kernels[d["kernel"]], tuple(d["grid"]), tuple(d["block"]), d.get("stream"),  # type: ignore[arg-type]
                d.get("device_index"), tuple(d.get("regions") or ()), tuple(d.get("metric_names") or ()),
                dict(metrics), dict(varying), d.get("rank")))  # Metric is immutable: shared between shapes
        except Invalid as e:
            shapes.append(None)
            problems.append(f"skipped {path} and its launches ({e})")
    return shapes


def _decode_columns(doc: dict[str, Any], shapes: list[LaunchShape | None], problems: list[str]
                    ) -> tuple[dict[str, list[Any]], dict[str, list[Any]], dict[int, str]]:
    """The per-launch columns and the rows that cannot be used (index -> why). Raises Invalid when the columns
    disagree on the number of launches."""
    cols = obj({})(doc.get("launch_columns", {}), "launch_columns", problems)
    names = ("shape", "start_ns", "duration_ns", "correlation_id")
    got = {n: _a_list(cols.get(n, []), f"launch_columns.{n}") for n in names}
    values = map_of(lambda n: lambda v, p, pr: _a_list(v, p), drop=False)(
        cols.get("metric_values", {}), "launch_columns.metric_values", problems)
    n = len(got["shape"])
    for name, col in [*got.items(), *((f"metric_values.{k}", v) for k, v in values.items())]:
        if len(col) != n:
            raise Invalid(f"launch_columns.{name}", f"one entry per launch ({n})", col)
    bad: dict[int, str] = {}
    if not _ints_ok(got["shape"], False, 0, len(shapes) - 1):
        _bad_rows(got["shape"], lambda v: _is_int(v) and 0 <= v < len(shapes), "shape",
                  f"an index into launch_shapes (below {len(shapes)})", bad)
    if None in shapes:
        for i, v in enumerate(got["shape"]):
            if i not in bad and shapes[v] is None:
                bad[i] = f"launch_shapes[{v}] was skipped"
    start, corr = got["start_ns"], got["correlation_id"]
    if not _ints_ok(start, True):
        _bad_rows(start, lambda v: v is None or _is_int(v), "start_ns", "an integer or null", bad)
    if not _ints_ok(got["duration_ns"], False, 0):
        _bad_rows(got["duration_ns"], lambda v: _is_int(v) and v >= 0, "duration_ns", "an integer >= 0", bad)
    if not _ints_ok(corr, True):
        _bad_rows(corr, lambda v: v is None or _is_int(v), "correlation_id", "an integer or null", bad)
    for name, col in values.items():
        if not (_floats_ok(col) and all(map(_metric_value_ok, (v for v in col if type(v) is float)))):
            _bad_rows(col, _metric_value_ok, f"metric_values.{name}", "a finite number or null", bad)
        for i, v in enumerate(col if None in col else ()):  # a value its template cannot carry: missing, no reason
            s = shapes[got["shape"][i]] if i not in bad else None
            if s is not None and name in s.varying and v is None and not s.varying[name][3]:
                bad[i] = f"launch_columns.metric_values.{name}[{i}]: expected a value or a missing_reason, found null"
    return got, values, bad


_DETAIL_OTHERS = {k: f for k, f in _detail_fields.items() if k != "collective"}


def _details_by_column(items: list[Any], n: int) -> dict[int, LaunchDetails] | None:
    """The details when every one passes _detail with a launch index below ``n``, checked over the column (the
    collectives field by field). None: some detail needs the check one by one (which names what is wrong)."""
    if len(items) < 2:
        return None
    cols = _passing_columns(items, _DETAIL_OTHERS)
    if cols is None or max(cols["launch"]) >= n:
        return None
    given = [d.get("collective") for d in items]
    some = [c for c in given if c is not None]
    by_field = _passing_columns(some, _collective_fields) if some else {k: [] for k in _collective_fields}
    if by_field is None:
        return None
    made: list[Collective | None] = list(map(Collective, *_in_order_of(Collective, by_field)))
    if len(made) != len(given):
        placed = iter(made)
        made = [None if c is None else next(placed) for c in given]
    count = len(items)
    if (not any(cols["findings"]) and cols["block_records"].count(None) == count
            and cols["scopes"].count(None) == count and cols["source_lines"].count(None) == count):
        # nothing but a collective each (counters that pass counter_metrics' column check are empty objects)
        made_details = map(LaunchDetails, [{} for _ in items], [[] for _ in items], repeat(None), repeat(None),
                           made, repeat(None))
    else:
        made_details = map(lambda c, f, b, s, col, sl: LaunchDetails(
            metrics_from_dict(c or {}), [VendorRuleResult.from_dict(x) for x in f or []],
            None if b is None else BlockRecords.from_dict(b), None if s is None else PhaseScopes.from_dict(s), col,
            None if sl is None else SourceLines.from_dict(sl)),
            cols["counters"], cols["findings"], cols["block_records"], cols["scopes"], made,
            cols["source_lines"])
    return dict(zip(cols["launch"], made_details))


def _decode_details(doc: dict[str, Any], n: int, problems: list[str]) -> dict[int, LaunchDetails]:
    """Counter results, findings, instrumentation and collectives of the few launches that have them."""
    details: dict[int, LaunchDetails] = {}
    items = _a_list(doc.get("launch_details", []), "launch_details")
    passed_all = _details_by_column(items, n)
    if passed_all is not None:
        return passed_all
    passed = _detail.columns(items) if len(items) > 1 else None  # type: ignore[attr-defined]
    for j, d in enumerate(items if passed is None else passed):
        path = f"launch_details[{j}]"
        try:
            if passed is None:  # one by one: names what is wrong
                d = _detail(d, path, problems)
            if d["launch"] >= n:
                raise Invalid(f"{path}.launch", f"a launch index (below {n})", d["launch"])
        except Invalid as e:
            problems.append(f"skipped {path} ({e})")
            continue
        details[d["launch"]] = LaunchDetails(
            metrics_from_dict(d.get("counters") or {}),
            [VendorRuleResult.from_dict(f) for f in d.get("findings") or []],
            None if d.get("block_records") is None else BlockRecords.from_dict(d["block_records"]),
            None if d.get("scopes") is None else PhaseScopes.from_dict(d["scopes"]),
            None if d.get("collective") is None else Collective.from_dict(d["collective"]),
            None if d.get("source_lines") is None else SourceLines.from_dict(d["source_lines"]))
    return details


def decode_launches(doc: dict[str, Any], problems: list[str]) -> LaunchTable:
    """The launches of a schema-2 document. Raises Invalid when the columns cannot be used at all."""
    shapes = _decode_shapes(doc, problems)
    got, values, bad = _decode_columns(doc, shapes, problems)
    n = len(got["shape"])
    start, corr = got["start_ns"], got["correlation_id"]
    details = _decode_details(doc, n, problems)
    table = LaunchTable([s for s in shapes if s is not None])  # type: ignore[misc]
    new_id = {}
    for old, s in enumerate(shapes):
        if s is not None:
            new_id[old] = len(new_id)
    keep = range(n) if not bad else [i for i in range(n) if i not in bad]
    for i in sorted(bad):
        problems.append(f"skipped launches[{i}] ({bad[i]})")
    if bad or len(new_id) != len(shapes):
        table.shape = [new_id[got["shape"][i]] for i in keep]
        table.start_ns = [start[i] for i in keep]
        table.duration_ns = [got["duration_ns"][i] for i in keep]
        table.correlation_id = [corr[i] for i in keep]
        table.metric_values = {k: [v[i] for i in keep] for k, v in values.items()}
        pos = {old: new for new, old in enumerate(keep)}
        table.details = {pos[i]: d for i, d in details.items() if i in pos}
    else:
        table.shape, table.start_ns, table.duration_ns, table.correlation_id = got["shape"], start, \
            got["duration_ns"], corr
        table.metric_values, table.details = values, details
    return table


# -- regions, also column-wise (a run with a named range per step has as many regions as steps) ------------------
REGION_KEYS = ("region_names", "region_columns")
_REGION_FIELDS = ("cpu_start_ns", "cpu_duration_ns", "gpu_start_ns", "gpu_duration_ns")


def encode_regions(regions: list[Region]) -> dict[str, Any]:
    names = list(dict.fromkeys(r.name for r in regions))
    ids = {n: i for i, n in enumerate(names)}
    cols: dict[str, Any] = {"name": [ids[r.name] for r in regions]}
    for f in _REGION_FIELDS:
        cols[f] = [getattr(r, f) for r in regions]
    if any(r.rank is not None for r in regions):  # multi-process sessions only: one-process files stay as they were
        cols["rank"] = [r.rank for r in regions]
    return {"region_names": names, "region_columns": cols}


def decode_regions(doc: dict[str, Any], problems: list[str]) -> list[Region]:
    names = list_of(string)(doc.get("region_names", []), "region_names", problems)
    cols = obj({})(doc.get("region_columns", {}), "region_columns", problems)
    fields = ("name", *_REGION_FIELDS, *(("rank",) if "rank" in cols else ()))
    got = {f: _a_list(cols.get(f, []), f"region_columns.{f}") for f in fields}
    n = len(got["name"])
    for f, col in got.items():
        if len(col) != n:
            raise Invalid(f"region_columns.{f}", f"one entry per region ({n})", col)
    bad: dict[int, str] = {}
    checks = {
        "name": (False, 0, len(names) - 1, f"an index into region_names (below {len(names)})"),
        "cpu_start_ns": (False, -INT64, INT64, "an integer"),
        "cpu_duration_ns": (False, 0, INT64, "an integer >= 0"),
        "gpu_start_ns": (True, -INT64, INT64, "an integer or null"),
        "gpu_duration_ns": (True, 0, INT64, "an integer >= 0 or null"),
        "rank": (True, 0, INT64, "an integer >= 0 or null"),
    }
    checks = {f: c for f, c in checks.items() if f in got}
    for f, (nullable, lo, hi, expected) in checks.items():
        if not _ints_ok(got[f], nullable, lo, hi):
            for i, v in enumerate(got[f]):
                if not ((v is None and nullable) or (_is_int(v) and lo <= v <= hi)) and i not in bad:
                    bad[i] = str(Invalid(f"region_columns.{f}[{i}]", expected, v))
    for i in sorted(bad):
        problems.append(f"skipped regions[{i}] ({bad[i]})")
    if not bad:
        return list(map(Region, [names[k] for k in got["name"]], *(got[f] for f in fields[1:])))
    return [Region(names[row[0]], *row[1:]) for i, row in enumerate(zip(*got.values())) if i not in bad]


# == The document: writing (schema 2) and reading (schema 1 or 2) ================================================
S = TypeVar("S")


def _header(session: Any) -> dict[str, Any]:
    return {
        "format": FORMAT_NAME,
        "schema_version": SCHEMA_VERSION,
        "kernelscope_version": session.kernelscope_version,
        "created_utc": session.created_utc,
        "command": list(session.command),
        "exit_code": session.exit_code,
        "outcome": session.outcome,
        "device": None if session.device is None else session.device.to_dict(),
        "time_origin_ns": session.time_origin_ns,
        "collectors": {k: v.to_dict() for k, v in session.collectors.items()},
        "artifacts": dict(session.artifacts),
        "environment": session.environment,
        "activities": [a.to_dict() for a in session.activities],
        "samples": [x.to_dict() for x in session.samples],
        **({"declared_work": [w.to_dict() for w in session.declared_work]} if session.declared_work else {}),
        **({"ranks": [r.to_dict() for r in session.ranks]} if session.ranks else {}),
        **({"host_syncs": [h.to_dict() for h in session.host_syncs]} if session.host_syncs else {}),
        **({"marks": [m.to_dict() for m in session.marks]} if session.marks else {}),
        **({"memory": session.memory.to_dict()} if session.memory is not None else {}),
        **({"steps": session.steps.to_dict()} if session.steps is not None else {}),
        **({"operators": session.operators.to_dict()} if getattr(session, "operators", None) is not None else {}),
    }


def to_document(session: Any) -> dict[str, Any]:
    """The session (a model.Session) as the JSON document a file holds: schema 2."""
    d = _header(session)
    d.update(encode_regions(session.regions))
    d.update(encode_launches(session.launch_table()))
    return d


def _activities_by_column(items: Any) -> list[Activity] | None:
    """The activities when every one passes ``activity``, checked over the column (a trace has one per memcpy
    and memset); None: there are none or few, or some activity needs the check one by one."""
    if type(items) is not list or len(items) < 2:
        return None
    cols = _passing_columns(items, _activity_fields)
    return None if cols is None else list(map(Activity, *_in_order_of(Activity, cols)))


def _fields(d: dict[str, Any]) -> dict[str, Any]:
    """A checked schema-1 document's fields as the Session's constructor takes them."""
    dev = d.get("device")
    return dict(
        command=[str(c) for c in d.get("command", [])],
        created_utc=str(d.get("created_utc", "")),
        kernelscope_version=str(d.get("kernelscope_version", "")),
        exit_code=d.get("exit_code"),
        outcome=str(d.get("outcome", "complete")),
        device=None if dev is None else Device.from_dict(dev),
        time_origin_ns=int(d.get("time_origin_ns", 0)),
        launches=[Launch.from_dict(x) for x in d.get("launches", [])],
        activities=[Activity.from_dict(a) for a in d.get("activities", [])],
        regions=[Region.from_dict(r) for r in d.get("regions", [])],
        samples=[Sample.from_dict(x) for x in d.get("samples", [])],  # optional: older files have none
        collectors={k: CollectorStatus.from_dict(v) for k, v in d.get("collectors", {}).items()},
        artifacts={str(k): str(v) for k, v in (d.get("artifacts") or {}).items()},
        environment=dict(d.get("environment") or {}),
        declared_work=[DeclaredWork.from_dict(w) for w in d.get("declared_work") or []],  # optional: older files
        ranks=[RankInfo.from_dict(r) for r in d.get("ranks") or []],  # optional: one-process sessions have none
        host_syncs=[HostSync.from_dict(h) for h in d.get("host_syncs") or []],  # optional: older files have none
        marks=[Mark.from_dict(m) for m in d.get("marks") or []],  # optional, like memory and steps
        memory=None if d.get("memory") is None else MemoryHistory.from_dict(d["memory"]),
        steps=None if d.get("steps") is None else StepWindow.from_dict(d["steps"]),
        operators=None if d.get("operators") is None else Operators.from_dict(d["operators"]),  # older files: none
    )


def from_document(doc: Any, name: str | os.PathLike[str], session_type: Callable[..., S]) -> S:
    """A decoded session file (schema 1 or 2), checked, as a ``session_type`` (model.Session): schema 1's launches
    and regions become the same Session as schema 2's columns. What is skipped is named in ``skipped_on_load``;
    what cannot be used raises SessionFileError naming ``name``. ``doc`` itself is left as it was."""
    path = Path(name)
    if not isinstance(doc, dict) or doc.get("format") != FORMAT_NAME:
        raise SessionFileError(f"{path} is JSON but not a kernelscope session file.")
    version = doc.get("schema_version")
    if version not in READABLE_VERSIONS:
        raise SessionFileError(
            f"{path} uses session schema version {visible(str(version))[:40]}, and this kernelscope reads versions "
            f"{' and '.join(map(str, READABLE_VERSIONS))}."
        )
    doc = dict(doc)
    table = None
    activities = _activities_by_column(doc.get("activities"))
    if activities is not None:  # all pass: nothing for check_session to do with them
        del doc["activities"]
    try:
        if version == 2:
            columns = {k: doc.pop(k, None) for k in (*LAUNCH_KEYS, *REGION_KEYS)}
            doc.pop("launches", None)
            doc.pop("regions", None)
        doc, skipped = check_session(doc)
        if version == 2:
            columns = {k: v for k, v in columns.items() if v is not None}
            doc["regions"] = []
            regions = decode_regions(columns, skipped)
            table = decode_launches(columns, skipped)
    except Invalid as e:
        raise SessionFileError(f"{path} is a damaged kernelscope session: {e}.") from None
    try:
        fields = _fields(doc)
        if activities is not None:
            fields["activities"] = activities
        session = session_type(**fields)
        if table is not None:
            session.set_launch_table(table)  # type: ignore[attr-defined]
            session.regions = regions  # type: ignore[attr-defined]
    except (KeyError, TypeError, ValueError, OverflowError) as e:  # the schema should have caught it
        raise SessionFileError(f"{path} is a damaged kernelscope session ({type(e).__name__}: {e}).") from None
    session.skipped_on_load = skipped  # type: ignore[attr-defined]
    return session


def write(session: Any, path: str | os.PathLike[str], force: bool = True) -> Path:
    """Write the session's document atomically (temp file + rename), gzip-compressed when the name ends in .gz.
    ``force=False`` (a command without -f) never replaces a file, also not one created while it was encoded."""
    path = Path(path)
    # Compact separators: a million-entry column written one entry a line would be most of the file.
    data = json.dumps(to_document(session), separators=(",", ":"), sort_keys=False).encode()
    if path.name.endswith(".gz"):
        data = gzip.compress(data, compresslevel=6, mtime=0)
    return write_atomic(path, data, force=force)


def read(path: str | os.PathLike[str], session_type: Callable[..., S]) -> S:
    """The session in the file at ``path`` (see from_document); a file that cannot be read raises
    SessionFileError with one sentence."""
    path = Path(path)
    try:
        raw = read_input(path)  # a regular file, at most the input limit, decompressed as a bounded stream
    except FileNotFoundError:
        raise SessionFileError(f"{path}: no such session file.") from None
    except IsADirectoryError:
        raise SessionFileError(f"{path} is a directory, not a session file.") from None
    except InputFileError as e:
        if e.damaged:
            raise SessionFileError(f"{path} is not a kernelscope session: it is damaged or not JSON.") from None
        raise SessionFileError(str(e)) from None
    except OSError as e:
        raise SessionFileError(f"{path} cannot be read ({e.strerror}).") from None
    with collector_paused():  # decoded JSON and the session built from it hold no cycles
        try:
            doc = json.loads(raw)
        except ValueError:
            raise SessionFileError(f"{path} is not a kernelscope session: it is damaged or not JSON.") from None
        except RecursionError:
            raise SessionFileError(f"{path} is not a kernelscope session: its JSON is nested too deeply.") from None
        del raw
        session = from_document(doc, path, session_type)
        del doc  # freed before the collector runs again, which would otherwise walk it once more
        return session


def checked(session: Any, name: str | os.PathLike[str], session_type: Callable[..., S]) -> S:
    """The session as ``read`` would return it from the file ``write`` writes: the same checks on the same
    document (an importer's values that no file may hold, such as a time past int64, NaN or nesting deeper than
    the schema allows, are found here, before the file is written). Parts reading would skip are left out and
    named in ``skipped_on_load``; what reading would refuse raises SessionFileError."""
    try:
        doc = json.loads(json.dumps(to_document(session), separators=(",", ":")))
    except RecursionError:
        raise SessionFileError(f"{name} would not load: its data is nested too deeply.") from None
    except (TypeError, ValueError, OverflowError) as e:
        raise SessionFileError(f"{name} would not load: a value cannot be written as JSON ({e}).") from None
    try:
        return from_document(doc, name, session_type)
    except SessionFileError as e:
        raise SessionFileError(str(e).replace(f"{name} is a damaged kernelscope session",
                                              f"{name} would not load", 1)) from None
