"""Benchmark results as plain JSON: schema name and version, environment, settings, rows.

A row is one implementation at one parameter point: ``status`` is ``ok``,
``failed`` or ``oom``; a row that did not run keeps its error text and has no
timing (never a zero). Derived numbers (TFLOP/s) carry the formula they came
from. No third-party imports: a results file loads and plots anywhere.
"""
from __future__ import annotations

import gzip
import json
import os
import zlib
from dataclasses import dataclass, field
from typing import Any

SCHEMA = "kernelscope.bench"
SCHEMA_VERSION = 1
STATUSES = ("ok", "failed", "oom")
_CORE = ("impl", "params", "status", "error")


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

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write atomically (a temporary file, then rename), so a crash never leaves half a file."""
        tmp = f"{os.fspath(path)}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.to_dict(), f, indent=1)
            f.write("\n")
        os.replace(tmp, path)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "BenchResults":
        return cls(benchmark=d["benchmark"], environment=d.get("environment", {}), settings=d.get("settings", {}),
                   rows=[BenchRow.from_dict(r) for r in d["rows"]], command=list(d.get("command", [])))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "BenchResults":
        try:
            with open(path, "rb") as f:
                raw = f.read()
            if raw[:2] == b"\x1f\x8b":  # gzip-compressed (results.json.gz), as session files may be
                raw = gzip.decompress(raw)
            doc = json.loads(raw.decode("utf-8"))
        except FileNotFoundError:
            raise ResultsFileError(f"{path} does not exist") from None
        except (OSError, EOFError, zlib.error, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ResultsFileError(f"{path} is not a readable JSON file ({e})") from None
        if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
            raise ResultsFileError(f"{path} is not a kernelscope benchmark results file (no schema {SCHEMA!r})")
        if doc.get("schema_version") != SCHEMA_VERSION:
            raise ResultsFileError(f"{path} has results schema version {doc.get('schema_version')!r}; "
                                   f"this kernelscope reads version {SCHEMA_VERSION}")
        try:
            return cls.from_dict(doc)
        except (KeyError, TypeError, ValueError, AttributeError) as e:
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
