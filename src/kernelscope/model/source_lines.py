"""Counters per source line of one kernel launch, and per SASS instruction under each line.

Read from Nsight Compute's SourceCounters / WarpStateStats sections (collect/ncu/source_lines.py); every count
is the sum over the line's instructions of one per-instruction ncu metric (names in COUNT_METRICS), except
``shared_conflicts_nway`` (ncu's n-way bank conflict degree of a shared-memory instruction), whose line value is
the largest of its instructions'. A count absent from ``counts`` was not in the report. The text of the hottest
lines (and a few lines around them) is kept, so that `show` needs neither the GPU nor the source tree; the
checksum of each file's text as the report holds it tells whether a file on disk is still that file.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# count name -> the ncu metric (instanced per PC) it sums
COUNT_METRICS: dict[str, str] = {
    "samples": "smsp__pcsamp_sample_count",
    "inst_executed": "inst_executed",
    "global_sectors": "memory_l2_theoretical_sectors_global",
    "global_sectors_ideal": "memory_l2_theoretical_sectors_global_ideal",
    "global_sectors_excessive": "derived__memory_l2_theoretical_sectors_global_excessive",
    "local_sectors": "memory_l2_theoretical_sectors_local",
    "shared_wavefronts": "memory_l1_wavefronts_shared",
    "shared_wavefronts_ideal": "memory_l1_wavefronts_shared_ideal",
    "shared_wavefronts_excessive": "derived__memory_l1_wavefronts_shared_excessive",
    "shared_conflicts_nway": "derived__memory_l1_conflicts_shared_nway",
    "thread_inst_executed": "thread_inst_executed",  # active threads summed over the executed warp instructions
}
MAX_COUNTS = ("shared_conflicts_nway",)  # a line takes the largest of its instructions', not the sum
STALL_PREFIX = "smsp__pcsamp_warps_issue_stalled_"

# Size bounds, checked when a session is read (model/session_codec.py) and kept by the reader.
MAX_FILES = 64
MAX_LINES = 20_000
MAX_INSTRUCTIONS = 200_000
MAX_EXCERPT_LINES = 2_000  # per file
MAX_TEXT = 1_000  # characters of one source line or SASS instruction
MAX_PATH = 4_096
MAX_NOTE = 2_000


@dataclass
class SassInstruction:
    pc_offset: int  # bytes from the kernel's first instruction
    sass: str
    counts: dict[str, float] = field(default_factory=dict)
    stalls: dict[str, float] = field(default_factory=dict)  # stall reason -> warp samples (non-zero only)

    def to_dict(self) -> dict[str, Any]:
        return {"pc_offset": self.pc_offset, "sass": self.sass, "counts": dict(self.counts),
                "stalls": dict(self.stalls)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SassInstruction":
        return cls(d["pc_offset"], d["sass"], dict(d.get("counts") or {}), dict(d.get("stalls") or {}))


@dataclass
class SourceLine:
    file: int | None  # index into SourceLines.files; None: the instructions have no line information
    line: int  # 1-based; 0 with file None
    counts: dict[str, float] = field(default_factory=dict)
    stalls: dict[str, float] = field(default_factory=dict)
    instructions: list[SassInstruction] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "counts": dict(self.counts), "stalls": dict(self.stalls),
                "instructions": [i.to_dict() for i in self.instructions]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SourceLine":
        return cls(d.get("file"), d["line"], dict(d.get("counts") or {}), dict(d.get("stalls") or {}),
                   [SassInstruction.from_dict(i) for i in d.get("instructions") or []])


@dataclass
class SourceFile:
    path: str  # as the compiler recorded it
    sha256: str | None  # of the text the report holds; None: the report holds no text for it
    line_count: int | None  # lines in that text
    excerpt: dict[int, str] = field(default_factory=dict)  # line number -> text, hot lines and their context

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "sha256": self.sha256, "line_count": self.line_count,
                "excerpt": {str(k): v for k, v in sorted(self.excerpt.items())}}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SourceFile":
        return cls(d["path"], d.get("sha256"), d.get("line_count"),
                   {int(k): v for k, v in (d.get("excerpt") or {}).items()})


@dataclass
class SourceLines:
    files: list[SourceFile] = field(default_factory=list)
    lines: list[SourceLine] = field(default_factory=list)
    note: str | None = None  # one sentence when something is missing (no line information, no samples)

    def total(self, count: str) -> float:
        return sum(ln.counts.get(count, 0.0) for ln in self.lines)

    def has(self, count: str) -> bool:
        return any(count in ln.counts for ln in self.lines)

    def location(self, ln: SourceLine) -> str:
        if ln.file is None or not 0 <= ln.file < len(self.files):
            return "(no line information)"
        return f"{self.files[ln.file].path}:{ln.line}"

    def text(self, ln: SourceLine) -> str | None:
        if ln.file is None or not 0 <= ln.file < len(self.files):
            return None
        return self.files[ln.file].excerpt.get(ln.line)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"files": [f.to_dict() for f in self.files], "lines": [ln.to_dict() for ln in self.lines]}
        if self.note is not None:
            d["note"] = self.note
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SourceLines":
        return cls([SourceFile.from_dict(f) for f in d.get("files") or []],
                   [SourceLine.from_dict(ln) for ln in d.get("lines") or []], d.get("note"))
