"""The schema of a session file (version 1): what `Session.load` checks before building the model.

Parts a session can lose without misleading anyone (one launch, one metric, one
sample, the instrumentation of one launch) are skipped and named; the rest must
be right or the file is refused.
"""
from __future__ import annotations

from typing import Any, Callable

from kernelscope.model import source_lines as sl
from kernelscope.model.metric import SOURCES
from kernelscope.model.schema import (F, Invalid, Spec, any_json, boolean, either, fallback, list_of, map_of, number,
                                      obj, one_of, optional, short_string, string)

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
# `sm_count: 1e9` is a skipped attribute with its field named, not a billion-element tuple. %smid is a 16-bit
# register (block_records.smid below), so no GPU reports more SMs than 65536.
MAX_SM_COUNT = 65536
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

collective = obj({  # model/ranks.Collective
    "name": F(string, True), "process_group": F(optional(string)), "in_nelems": F(optional(_count)),
    "out_nelems": F(optional(_count)), "group_size": F(optional(number(1, integer=True))), "dtype": F(optional(string)),
    "seq": F(optional(_count)),
})

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

activity = obj({
    "kind": F(string, True), "name": F(string, True), "start_ns": F(_int, True), "duration_ns": F(_ns, True),
    "bytes": F(optional(_count)), "stream": F(optional(_int)), "rank": F(optional(_count)),
})

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

session = obj({
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
})


def check_session(doc: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The document with bad optional parts left out, and one line per part left out.

    Raises Invalid (with the field path) when the file cannot be used at all.
    """
    problems: list[str] = []
    return session(doc, "", problems), problems
