"""The launch part of a session file, schema 2: launches as shapes and columns, checked as they are read.

Schema 1 stored every launch as one object repeating every metric's unit, source and raw name (~3 KB
a launch). Schema 2 stores, beside the session's other fields (unchanged):

  "kernels":        [name, ...]                          each kernel name once
  "launch_shapes":  [{kernel: index, grid, block, stream, device_index, regions, metric_names,
                      metrics: {name: metric}, varying: {name: metric without "value"}}, ...]
  "launch_columns": {shape: [...], start_ns: [...], duration_ns: [...], correlation_id: [...],
                     metric_values: {name: [...]}}   one entry per launch (absolute values, not differences:
                                                     a damaged entry then loses one launch, not the rest)
  "launch_details": [{launch: index, counters, findings, block_records, scopes, collective,
                      source_lines (optional: counters per source line, model/source_lines.py)}, ...]

Plain JSON (stdlib): with launches in columns, parsing is a few long lists of integers, which the
stdlib parser reads at tens of millions of numbers a second, so no third-party codec is needed in
model/ (measured in benchmarks/scale/RESULTS.md). Damaged parts are skipped and named like schema 1:
a bad shape drops its launches, a bad row drops that launch (named ``launches[i]``), a bad detail
drops that part of its launch.
"""
from __future__ import annotations

from typing import Any

from kernelscope.model import session_schema as s1
from kernelscope.model.blocks import BlockRecords, PhaseScopes
from kernelscope.model.finding import Finding
from kernelscope.model.ranks import Collective
from kernelscope.model.source_lines import SourceLines
from kernelscope.model.launch import Region
from kernelscope.model.launch_table import LaunchDetails, LaunchShape, LaunchTable
from kernelscope.model.metric import metrics_from_dict, metrics_to_dict
from kernelscope.model.schema import INT64, F, Invalid, list_of, map_of, obj, optional, string

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
_template = obj({"unit": F(string), "source": F(s1.one_of(*s1.SOURCES), True), "raw_name": F(string, True),
                 "missing_reason": F(optional(string)), "formula": F(optional(string))})

_shape = obj({
    "kernel": F(s1.number(0, integer=True), True), "grid": F(s1._grid, True), "block": F(s1._block, True),
    "stream": F(optional(s1._int)), "device_index": F(optional(s1._count)), "regions": F(list_of(string)),
    "metric_names": F(list_of(string)), "metrics": F(map_of(lambda n: s1._numeric_metric, drop=False)),
    "varying": F(map_of(lambda n: _template, drop=False)), "rank": F(optional(s1._count)),
}, lambda d: None if set(d.get("metric_names") or []) == set(d.get("metrics") or {}) | set(d.get("varying") or {})
   else ("metric_names", "the names of its metrics and varying metrics"))

_detail = obj({
    "launch": F(s1._count, True), "counters": F(s1.counter_metrics), "findings": F(list_of(s1.finding, drop=True)),
    "block_records": F(s1.fallback(optional(s1.block_records), None)),
    "scopes": F(s1.fallback(optional(s1.phase_scopes), None)),
    "collective": F(s1.fallback(optional(s1.collective), None)),
    "source_lines": F(s1.fallback(optional(s1.source_lines), None)),
})


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


def _decode_shapes(doc: dict[str, Any], problems: list[str]) -> list[LaunchShape | None]:
    """The launch shapes; a damaged one is None (its launches are dropped) and named."""
    kernels = list_of(string)(doc.get("kernels", []), "kernels", problems)
    shapes: list[LaunchShape | None] = []
    for i, d in enumerate(_a_list(doc.get("launch_shapes", []), "launch_shapes")):
        path = f"launch_shapes[{i}]"
        try:
            d = _shape(d, path, problems)
            if d["kernel"] >= len(kernels):
                raise Invalid(f"{path}.kernel", f"an index into kernels (below {len(kernels)})", d["kernel"])
            shapes.append(LaunchShape(
                kernels[d["kernel"]], tuple(d["grid"]), tuple(d["block"]), d.get("stream"),  # type: ignore[arg-type]
                d.get("device_index"), tuple(d.get("regions") or ()), tuple(d.get("metric_names") or ()),
                metrics_from_dict(d.get("metrics") or {}),
                {n: (v.get("unit", ""), v["source"], v["raw_name"], v.get("missing_reason"), v.get("formula"))
                 for n, v in (d.get("varying") or {}).items()}, d.get("rank")))
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


def _decode_details(doc: dict[str, Any], n: int, problems: list[str]) -> dict[int, LaunchDetails]:
    """Counter results, findings, instrumentation and collectives of the few launches that have them."""
    details: dict[int, LaunchDetails] = {}
    for j, d in enumerate(_a_list(doc.get("launch_details", []), "launch_details")):
        path = f"launch_details[{j}]"
        try:
            d = _detail(d, path, problems)
            if d["launch"] >= n:
                raise Invalid(f"{path}.launch", f"a launch index (below {n})", d["launch"])
        except Invalid as e:
            problems.append(f"skipped {path} ({e})")
            continue
        details[d["launch"]] = LaunchDetails(
            metrics_from_dict(d.get("counters") or {}), [Finding.from_dict(f) for f in d.get("findings") or []],
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
