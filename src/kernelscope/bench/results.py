"""Benchmark results as plain JSON: schema name and version, environment, settings, rows.

A row is one implementation at one parameter point: ``status`` is ``ok``,
``failed`` or ``oom``; a row that did not run keeps its error text and has no
timing (never a zero). Derived numbers (TFLOP/s) carry the formula they came
from. No third-party imports: a results file loads and plots anywhere.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import Any

from kernelscope.model.files import InputFileError, read_input, write_atomic
from kernelscope.model.schema import (F, Invalid, Spec, any_json, boolean, either, list_of, map_of, number, obj,
                                      one_of, optional, short_string, string)

SCHEMA = "kernelscope.bench"
SCHEMA_VERSION = 1
STATUSES = ("ok", "failed", "oom")
_CORE = ("impl", "params", "status", "error")


# Parameters each benchmark's plots and tables group by; a row without them cannot be placed.
POINT_PARAMS = {"attention": ("batch", "heads", "seq_len", "head_dim"), "w4a16": ("m", "k", "n")}
_size = number(1, 2**40, integer=True)
LABEL_CHARS = 200  # implementation names and dtypes label plot lines, titles and ticks
_num = number()
_time = number(0)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)
_scalar = either(_num, string, boolean, expected="a number, a string or true/false")
_value = either(optional(_scalar), list_of(optional(_scalar)), any_json(4), expected="a value")


def _row(benchmark: str) -> Spec:
    params = {name: F(_size, True) for name in POINT_PARAMS.get(benchmark, ())}
    if benchmark == "attention":
        params.update(causal=F(boolean, True), dtype=F(short_string(LABEL_CHARS), True))
    if benchmark == "w4a16":
        params.update(groupsize=F(number(-1, 2**20, integer=True), True))

    def value(name: str) -> Spec:  # timings and sizes are numbers: the plots divide and take logs
        numeric = name.endswith(("_ms", "_bytes", "_mhz_after", "_c_after")) or name in ("tflops", "flops", "repeats",
                                                                                      "warmup", "pct_of_floor")
        return optional(_time if name.endswith("_ms") else _num) if numeric else _value

    def rule(d: dict[str, Any]) -> tuple[str, str] | None:
        if d["status"] != "ok" and not d.get("error"):
            return "error", f"the error that stopped a {d['status']} row"
        if d["status"] == "ok" and d.get("median_ms") is None:
            return "median_ms", "the median time of an ok row"
        order = [k for k in ("min_ms", "q1_ms", "median_ms", "q3_ms", "max_ms") if _is_number(d.get(k))]
        for lo, hi in zip(order, order[1:]):  # the plots draw q1..q3 around the median as error bars
            if d[lo] > d[hi]:
                return hi, f"a time no smaller than {lo} ({d[lo]!r})"
        return None

    row = obj(
        {
            "impl": F(short_string(LABEL_CHARS), True),
            "params": F(obj(params), True),
            "status": F(one_of(*STATUSES), True),
            "error": F(optional(string)),
        },
        rule,
    )

    def check(v: Any, path: str, problems: list[str]) -> Any:
        d = row(v, path, problems)
        for k, x in d.items():
            if k not in _CORE:
                d[k] = value(k)(x, f"{path}.{k}", problems)
        return d
    return check


def check_results(doc: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The results document checked field by field; raises Invalid naming the field path."""
    problems: list[str] = []
    bench = doc.get("benchmark")
    spec = obj({"benchmark": F(string, True), "command": F(list_of(string)),
                "environment": F(obj({"device": F(map_of(lambda k: obj({}), drop=False)),
                                      "date_utc": F(optional(string))})),
                "settings": F(obj({})), "rows": F(list_of(_row(bench if isinstance(bench, str) else ""), drop=True),
                                                True)})
    doc = spec(doc, "", problems)
    any_json()(doc.get("environment"), "environment", problems)
    any_json()(doc.get("settings"), "settings", problems)
    return doc, problems


class ResultsFileError(Exception):
    """A file that is not a readable results file; the message is one sentence."""


@dataclass
class BenchRow:
    """One implementation at one parameter point.

    ``values`` holds the flat measured and derived fields (median_ms, min_ms,
    ..., tflops and tflops_formula, peak_memory_bytes, ...); empty unless ok.
    """

    impl: str
    params: dict[str, Any]
    status: str
    error: str | None = None
    values: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"row status must be one of {', '.join(STATUSES)}, got {self.status!r}")
        if self.status != "ok" and not self.error:
            raise ValueError(f"a {self.status} row needs the error that stopped it")
        if self.status == "ok" and self.values.get("median_ms") is None:
            raise ValueError("an ok row needs its median_ms")

    def get(self, key: str) -> Any:
        return self.values.get(key)

    def to_dict(self) -> dict[str, Any]:
        return {"impl": self.impl, "params": self.params, "status": self.status, "error": self.error, **self.values}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "BenchRow":
        return cls(impl=d["impl"], params=dict(d["params"]), status=d["status"], error=d.get("error"),
                   values={k: v for k, v in d.items() if k not in _CORE})


@dataclass
class BenchResults:
    benchmark: str
    environment: dict[str, Any]
    settings: dict[str, Any]
    rows: list[BenchRow] = field(default_factory=list)
    command: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "benchmark": self.benchmark,
                "command": self.command, "environment": self.environment, "settings": self.settings,
                "rows": [r.to_dict() for r in self.rows]}

    def save(self, path: str | os.PathLike[str], force: bool = True) -> None:
        """Write atomically (a temporary file, then rename), so a crash never leaves half a file; ``force=False``
        never replaces an existing file (OutputFileError), also not one created while the benchmark ran."""
        write_atomic(path, (json.dumps(self.to_dict(), indent=1) + "\n").encode(), force=force)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "BenchResults":
        return cls(benchmark=d["benchmark"], environment=d.get("environment", {}), settings=d.get("settings", {}),
                   rows=[BenchRow.from_dict(r) for r in d["rows"]], command=list(d.get("command", [])))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "BenchResults":
        try:
            raw = read_input(path)  # a regular file, bounded; gzip (results.json.gz) decompressed as a stream
            doc = json.loads(raw.decode("utf-8"))
        except FileNotFoundError:
            raise ResultsFileError(f"{path} does not exist") from None
        except InputFileError as e:
            raise ResultsFileError(str(e) if not e.damaged else f"{path} is not a readable JSON file ({e.reason})"
                                   ) from None
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ResultsFileError(f"{path} is not a readable JSON file ({e})") from None
        except RecursionError:
            raise ResultsFileError(f"{path} is not a readable JSON file (nested too deeply)") from None
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise ResultsFileError(f"{path} is not a kernelscope benchmark results file (no schema {SCHEMA!r})")
        if doc.get("schema_version") != SCHEMA_VERSION:
            raise ResultsFileError(f"{path} has results schema version {doc.get('schema_version')!r}; "
                                   f"this kernelscope reads version {SCHEMA_VERSION}")
        try:
            doc, skipped = check_results(doc)
        except Invalid as e:
            raise ResultsFileError(f"{path} is a damaged results file: {e}") from None
        if skipped:
            raise ResultsFileError(f"{path} is a damaged results file: {skipped[0]}"
                                   + (f" and {len(skipped) - 1} more" if len(skipped) > 1 else ""))
        try:
            return cls.from_dict(doc)
        except (KeyError, TypeError, ValueError, AttributeError) as e:  # the schema should have caught it
            raise ResultsFileError(f"{path} has a malformed results row or field ({type(e).__name__}: {e})") from None


def clock_flag_note(results: "BenchResults") -> str | None:
    """One line about rows measured while the GPU was throttled or clocked down (marked ! in tables)."""
    ok = [r for r in results.rows if r.status == "ok"]
    flagged = [r for r in ok if r.get("clock_flags_after")]
    if not flagged:
        return None
    reasons = "; ".join(sorted({f for r in flagged for f in r.get("clock_flags_after")}))
    return (f"! {len(flagged)} of {len(ok)} measurements were taken while the GPU was throttled or clocked far "
            f"below its maximum (marked !): {reasons}")
