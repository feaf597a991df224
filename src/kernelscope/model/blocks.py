"""What in-kernel instrumentation recorded for one launch: per block, the SM it ran
on and when; per warp, the phases (scopes) it went through.

Stored compactly as parallel lists (one entry per block or per scope), because a
launch has thousands of blocks. Times are on the GPU clock the instrumentation
read (``clock``, e.g. %globaltimer in ns); ``clock_offset_ns`` turns them into
the session clock when that offset was measured, and is None otherwise.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Dim3 = tuple[int, int, int]


def block_xyz(block_id: int, grid: Dim3) -> Dim3:
    x, rest = block_id % grid[0], block_id // grid[0]
    return (x, rest % grid[1], rest // grid[1])


@dataclass
class BlockRecords:
    """One row per block that wrote its record: linear block id, SM id, start and end time.

    ``problems`` holds what the reader found wrong with the buffer itself (a
    truncated buffer, rows the kernel never wrote, a row holding another block's
    id), one sentence each; coverage and timing checks are analyze's job.
    """

    grid: Dim3
    block_id: list[int] = field(default_factory=list)
    smid: list[int] = field(default_factory=list)
    start_ns: list[int] = field(default_factory=list)
    end_ns: list[int] = field(default_factory=list)
    clock: str = "globaltimer"
    clock_offset_ns: int | None = None  # session time = GPU time + offset; None: not measured
    source: str = "triton-block-recorder"  # or "kernelscope.cuh"
    nsmid: int | None = None  # %nsmid: one more than the highest SM id the device can report; None: not read
    buffer_rows: int = 0  # complete rows the buffer held, written or not
    problems: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.block_id)
        if not (len(self.smid) == len(self.start_ns) == len(self.end_ns) == n):
            raise ValueError("block records need one SM id, start and end per block id")

    def __len__(self) -> int:
        return len(self.block_id)

    @property
    def expected_blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    def to_dict(self) -> dict[str, Any]:
        return {
            "grid": list(self.grid), "clock": self.clock, "clock_offset_ns": self.clock_offset_ns,
            "source": self.source, "nsmid": self.nsmid, "buffer_rows": self.buffer_rows,
            "problems": list(self.problems),
            "block_id": list(self.block_id), "smid": list(self.smid),
            "start_ns": list(self.start_ns), "end_ns": list(self.end_ns),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "BlockRecords":
        off, nsm = d.get("clock_offset_ns"), d.get("nsmid")
        g = [int(v) for v in d["grid"]]
        if len(g) != 3:
            raise ValueError(f"expected a three-dimensional grid, got {d['grid']!r}")
        return cls(
            grid=(g[0], g[1], g[2]),
            block_id=[int(v) for v in d.get("block_id", [])], smid=[int(v) for v in d.get("smid", [])],
            start_ns=[int(v) for v in d.get("start_ns", [])], end_ns=[int(v) for v in d.get("end_ns", [])],
            clock=str(d.get("clock", "globaltimer")), clock_offset_ns=None if off is None else int(off),
            source=str(d.get("source", "")), nsmid=None if nsm is None else int(nsm),
            buffer_rows=int(d.get("buffer_rows", 0)),
            problems=[str(p) for p in d.get("problems", [])],
        )


@dataclass
class WarpScopes:
    """The scopes one warp went through, in order: index into PhaseScopes.names, start, end.

    Start and end are in PhaseScopes.time_unit (SM cycles for Proton's clock64,
    counted from the block's first record). ``block_offset_ns``: %globaltimer ns
    from the launch's earliest block start to this block's; None: not recorded.
    """

    block_id: int
    warp: int
    smid: int | None = None
    scope: list[int] = field(default_factory=list)
    start_ns: list[int] = field(default_factory=list)
    end_ns: list[int] = field(default_factory=list)
    block_offset_ns: int | None = None

    def __post_init__(self) -> None:
        if not (len(self.scope) == len(self.start_ns) == len(self.end_ns)):
            raise ValueError("warp scopes need one start and end per scope")

    def to_dict(self) -> dict[str, Any]:
        return {"block_id": self.block_id, "warp": self.warp, "smid": self.smid, "scope": list(self.scope),
                "start_ns": list(self.start_ns), "end_ns": list(self.end_ns), "block_offset_ns": self.block_offset_ns}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "WarpScopes":
        sm, off = d.get("smid"), d.get("block_offset_ns")
        return cls(block_id=int(d["block_id"]), warp=int(d["warp"]), smid=None if sm is None else int(sm),
                   scope=[int(v) for v in d.get("scope", [])], start_ns=[int(v) for v in d.get("start_ns", [])],
                   end_ns=[int(v) for v in d.get("end_ns", [])], block_offset_ns=None if off is None else int(off))


@dataclass
class PhaseScopes:
    """Phases a kernel author marked (load, dequantize, compute, ...), per warp, from one launch.

    ``problems`` says what the collector dropped or could not record (e.g. a
    full buffer), one sentence each, so a short timeline is never mistaken
    for a complete one.
    """

    names: list[str] = field(default_factory=list)
    warps: list[WarpScopes] = field(default_factory=list)
    clock: str = "globaltimer"
    clock_offset_ns: int | None = None
    source: str = "proton"
    problems: list[str] = field(default_factory=list)

    @property
    def time_unit(self) -> str:
        """What start_ns / end_ns count: ns for %globaltimer, SM cycles for clock64 (Proton's default)."""
        return "cycles" if self.clock == "clock64" else "ns"

    def to_dict(self) -> dict[str, Any]:
        return {"names": list(self.names), "clock": self.clock, "clock_offset_ns": self.clock_offset_ns,
                "source": self.source, "problems": list(self.problems), "warps": [w.to_dict() for w in self.warps]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "PhaseScopes":
        off = d.get("clock_offset_ns")
        return cls(names=[str(n) for n in d.get("names", [])],
                   warps=[WarpScopes.from_dict(w) for w in d.get("warps", [])],
                   clock=str(d.get("clock", "globaltimer")), clock_offset_ns=None if off is None else int(off),
                   source=str(d.get("source", "")), problems=[str(p) for p in d.get("problems", [])])
