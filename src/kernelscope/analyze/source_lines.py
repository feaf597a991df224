"""Hot lines: a kernel's source lines ranked by warp samples and by excess memory traffic.

Formulas (every count is ncu's, summed over the line's instructions; model/source_lines.py):
  sample share      = line samples / all samples of the launch
  stall share       = samples of one stall reason on the line / line samples
  excess sectors    = derived__memory_l2_theoretical_sectors_global_excessive (actual - ideal L2 sectors, global)
  excess wavefronts = derived__memory_l1_wavefronts_shared_excessive (shared-memory bank conflicts)
  FMA instructions  = inst_executed of the line's FFMA / HFMA2 / DFMA instructions (SASS opcode per PC)
  idle lane slots   = sum over the line's instructions of (32 x inst_executed - thread_inst_executed): the lanes
                      a warp issued with nothing to do (thread divergence)
  active threads    = thread_inst_executed / inst_executed of the line (32: no divergence)
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from kernelscope.model.session import Session
from kernelscope.model.source_lines import SourceLine, SourceLines

TOP_LINES = 10
TOP_STALLS = 3


@dataclass
class LineRank:
    line: SourceLine
    location: str  # path:line, or "(no line information)"
    text: str | None  # the source text kept in the session; None: not kept
    samples: float | None  # None: the report has no warp samples
    sample_share: float | None  # of all the launch's samples
    stalls: list[tuple[str, float]]  # top stall reasons: (reason, share of the line's samples)
    excess_sectors: float | None  # global L2 sectors beyond the ideal; None: not measured
    sectors: float | None
    ideal_sectors: float | None
    excess_wavefronts: float | None  # shared-memory wavefronts beyond the ideal (bank conflicts)
    conflict_ways: float | None  # largest n-way shared bank conflict of the line's instructions
    local_sectors: float | None  # L2 sectors of local memory (spills, dynamically indexed arrays)


@dataclass
class KernelLines:
    kernel: str
    launch: int  # index of the launch in the session
    total_samples: float | None
    hot: list[LineRank]  # by samples, most first
    by_excess: list[LineRank]  # lines with excess global sectors, shared wavefronts or local traffic, most first
    notes: list[str] = field(default_factory=list)
    lines_total: int = 0


def _rank(src: SourceLines, ln: SourceLine, total: float | None) -> LineRank:
    c = ln.counts
    samples = c.get("samples") if src.has("samples") else None
    line_samples = c.get("samples", 0.0)
    stalls = sorted(((r, v / line_samples) for r, v in ln.stalls.items() if line_samples > 0),
                    key=lambda rv: -rv[1])[:TOP_STALLS]
    return LineRank(
        ln, src.location(ln), src.text(ln), samples,
        (samples or 0.0) / total if total else None, stalls,
        c.get("global_sectors_excessive"), c.get("global_sectors"), c.get("global_sectors_ideal"),
        c.get("shared_wavefronts_excessive"), c.get("shared_conflicts_nway"), c.get("local_sectors"))


def _excess_key(r: LineRank) -> float:
    return (r.excess_sectors or 0.0) + (r.excess_wavefronts or 0.0) + (r.local_sectors or 0.0)


def file_notes(src: SourceLines, read=lambda p: Path(p).read_bytes()) -> list[str]:
    """One sentence per source file on this machine whose text differs from the run's (by SHA-256)."""
    notes = []
    for f in src.files:
        if f.sha256 is None:
            continue
        try:
            now = hashlib.sha256(read(f.path)).hexdigest()
        except OSError:
            continue  # not on this machine: the session's own copy of the hot lines is shown
        if now != f.sha256:
            notes.append(f"{f.path} changed since the run (its checksum differs): the text shown is the run's")
    return notes


def rank_lines(kernel: str, launch: int, src: SourceLines, top: int = TOP_LINES) -> KernelLines:
    total = src.total("samples") if src.has("samples") else None
    ranks = [_rank(src, ln, total) for ln in src.lines]
    hot = sorted(ranks, key=lambda r: (-(r.samples or 0.0), -(r.line.counts.get("inst_executed", 0.0))))
    excess = sorted((r for r in ranks if _excess_key(r) > 0), key=lambda r: -_excess_key(r))
    notes = [src.note] if src.note else []
    notes += file_notes(src)
    return KernelLines(kernel, launch, total, hot[:top], excess[:top], notes, len(src.lines))


def source_lines_of(session: Session, kernel_regex: str | None = None, top: int = TOP_LINES) -> list[KernelLines]:
    """Every launch with per-line counters (of kernels whose name matches ``kernel_regex``), in launch order."""
    pattern = re.compile(kernel_regex) if kernel_regex else None
    out = []
    table = session.launch_table()
    for i, x in table.detailed():
        if x.source_lines is None or (pattern is not None and not pattern.search(x.kernel)):
            continue
        out.append(rank_lines(x.kernel, i, x.source_lines, top))
    return out


# The per-line count that locates each kernel rule's cause, and how a line's share of it is named.
RULE_COUNTS: dict[str, tuple[str, str]] = {
    "uncoalesced-global": ("global_sectors_excessive", "excess global sectors"),
    "shared-bank-conflicts": ("shared_wavefronts_excessive", "excess shared wavefronts"),
    "local-memory": ("local_sectors", "local sectors"),
    "fma-instead-of-tensor": ("fma_inst_executed", "FMA instructions executed"),
    "thread-divergence": ("idle_lane_slots", "idle lane slots"),
}
WARP_SIZE = 32
FMA_OPCODES = ("FFMA", "HFMA2", "DFMA")  # SASS fused multiply-adds on the FMA pipes
RULE_LINES = 3  # lines named in a finding


def opcode(sass: str) -> str:
    """The SASS instruction's opcode without its predicate or modifiers: "@!P0 FFMA.FTZ R1, ..." -> "FFMA"."""
    words = sass.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def rule_count(ln: SourceLine, rule_id: str) -> float:
    """The per-line count that locates ``rule_id``'s cause on ``ln`` (RULE_COUNTS; 0 when not measured)."""
    count = RULE_COUNTS[rule_id][0]
    if count == "fma_inst_executed":  # inst_executed of the line's FMA instructions
        return sum(i.counts.get("inst_executed", 0.0) for i in ln.instructions if opcode(i.sass) in FMA_OPCODES)
    if count == "idle_lane_slots":  # per instruction, so a line's converged instructions add nothing
        return sum(WARP_SIZE * i.counts["inst_executed"] - i.counts["thread_inst_executed"] for i in ln.instructions
                   if "inst_executed" in i.counts and "thread_inst_executed" in i.counts)
    return ln.counts.get(count, 0.0)


def active_threads(ln: SourceLine) -> float | None:
    """thread_inst_executed / inst_executed of the line; None when either was not measured or nothing ran."""
    inst, threads = ln.counts.get("inst_executed"), ln.counts.get("thread_inst_executed")
    return threads / inst if inst and threads is not None else None


def rule_lines(src: SourceLines | None, rule_id: str) -> tuple[str, list[tuple[str, float]]]:
    """The lines responsible for a kernel rule's finding, most first: (a sentence to add to its message, evidence
    pairs ``(<ncu metric> at <file:line>, value)``); ("", []) when the launch has no per-line counters for it."""
    if src is None or rule_id not in RULE_COUNTS:
        return "", []
    count, what = RULE_COUNTS[rule_id]
    located = [(ln, v) for ln in src.lines if (v := rule_count(ln, rule_id)) > 0]
    if not located:
        return "", []
    total = sum(v for _, v in located)
    samples = src.total("samples") if src.has("samples") else None
    ranked = sorted(located, key=lambda lv: -lv[1])[:RULE_LINES]
    from kernelscope.model.source_lines import COUNT_METRICS

    metric = COUNT_METRICS.get(count) or {
        "fma_inst_executed": f"inst_executed of {'/'.join(FMA_OPCODES)}",
        "idle_lane_slots": f"{WARP_SIZE} x inst_executed - thread_inst_executed"}[count]
    parts, evidence = [], []
    for ln, v in ranked:
        where = src.location(ln)
        text = src.text(ln)
        share = f", {100 * ln.counts.get('samples', 0) / samples:.1f}% of warp samples" if samples else ""
        if count == "idle_lane_slots" and (active := active_threads(ln)) is not None:
            share = f", {active:.1f} active threads per instruction" + share
        parts.append(f"{where.rsplit('/', 1)[-1]}" + (f" `{text.strip()}`" if text else "")
                     + f" ({100 * v / total:.0f}% of the {what}{share})")
        evidence.append((f"{metric} at {where}", v))
    return " Lines: " + "; ".join(parts) + ".", evidence


def with_lines(message: str, where: str) -> str:
    """``message`` with the lines sentence after its first sentence, where views that draw a finding's first
    sentences show it."""
    if not where:
        return message
    cut = message.find(". ")
    return message + where if cut < 0 else message[:cut + 1] + where + message[cut + 1:]


# What a line does, read from the SASS opcodes under it (learn mode labels the W4A16 kernel's hot lines with them).
OPCODE_PHASES: dict[str, tuple[str, ...]] = {
    "MMA": ("HMMA", "HGMMA", "IMMA", "IGMMA", "QGMMA", "DMMA", "WARPGROUP"),
    "loads": ("LDG", "LDGSTS", "LDGDEPBAR", "UTMALDG", "UBLKCP", "LDS", "LDSM", "SYNCS"),
    "unpack": ("LOP3", "PRMT", "SHF", "I2F", "I2FP", "HADD2", "HFMA2", "HMUL2"),
    "write-back": ("STG", "STS", "RED", "ATOMG", "UTMASTG"),
}


PHASE_MIN_SHARE = 0.5  # a line takes a phase when its opcodes are at least this share of its executed instructions


def line_phase(ln: SourceLine) -> str | None:
    """The phase whose opcodes (OPCODE_PHASES) account for the most of the line's executed instructions
    (inst_executed per SASS instruction), when they are at least PHASE_MIN_SHARE of them; else None."""
    by_phase: dict[str, float] = {}
    total = 0.0
    for ins in ln.instructions:
        n = ins.counts.get("inst_executed", 0.0)
        total += n
        op = opcode(ins.sass)
        for phase, ops in OPCODE_PHASES.items():
            if op in ops:
                by_phase[phase] = by_phase.get(phase, 0.0) + n
    best = max(by_phase.items(), key=lambda kv: kv[1], default=None)
    return best[0] if best is not None and total > 0 and best[1] >= PHASE_MIN_SHARE * total else None
