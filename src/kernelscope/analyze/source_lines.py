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

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from kernelscope.analyze import thresholds as th
from kernelscope.model.session import Session
from kernelscope.model.source_lines import SassInstruction, SourceFile, SourceLine, SourceLines

TOP_LINES = 10
TOP_STALLS = 3
DIVERGED_ACTIVE_THREADS = th.DIVERGENCE_MAX_ACTIVE_THREADS  # a line at or under this many active lanes is shown so


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
    active_threads: float | None = None  # thread_inst_executed / inst_executed of the line; None: not measured


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
        c.get("shared_wavefronts_excessive"), c.get("shared_conflicts_nway"), c.get("local_sectors"),
        active_threads(c))


def _excess_key(r: LineRank) -> float:
    return (r.excess_sectors or 0.0) + (r.excess_wavefronts or 0.0) + (r.local_sectors or 0.0)


def file_notes(src: SourceLines, disk_sha256: Mapping[str, str] | None = None) -> list[str]:
    """One sentence per source file whose text on this machine differs from the run's: ``disk_sha256`` maps a
    path to the SHA-256 of the file read there (the caller reads the files, and only when the user asks; a path
    it does not map is not on this machine or was not read: the session's own copy of the hot lines is shown)."""
    notes: list[str] = []
    for f in src.files if disk_sha256 else ():
        now = disk_sha256.get(f.path)
        if f.sha256 is not None and now is not None and now != f.sha256:
            notes.append(f"{f.path} changed since the run (its checksum differs): the text shown is the run's")
    return notes


def rank_lines(kernel: str, launch: int, src: SourceLines, top: int = TOP_LINES,
               disk_sha256: Mapping[str, str] | None = None) -> KernelLines:
    """The launch's lines by samples and by excess traffic (``top`` of each), with its notes (file_notes with
    ``disk_sha256``)."""
    total = src.total("samples") if src.has("samples") else None
    ranks = [_rank(src, ln, total) for ln in src.lines]
    hot = sorted(ranks, key=lambda r: (-(r.samples or 0.0), -(r.line.counts.get("inst_executed", 0.0))))
    excess = sorted((r for r in ranks if _excess_key(r) > 0), key=lambda r: -_excess_key(r))
    notes = [src.note] if src.note else []
    notes += file_notes(src, disk_sha256)
    return KernelLines(kernel, launch, total, hot[:top], excess[:top], notes, len(src.lines))


def source_files(session: Session) -> list[SourceFile]:
    """The source files the session's launches name, in launch order (duplicates kept: one per launch)."""
    return [f for _, x in session.launch_table().detailed(having="source_lines") for f in x.source_lines.files]


def source_lines_of(session: Session, kernel_regex: str | None = None, top: int = TOP_LINES,
                    disk_sha256: Mapping[str, str] | None = None) -> list[KernelLines]:
    """Every launch with per-line counters (of kernels whose name matches ``kernel_regex``), in launch order;
    ``disk_sha256`` as file_notes takes it."""
    pattern = re.compile(kernel_regex) if kernel_regex else None
    out = []
    table = session.launch_table()
    for i, x in table.detailed(having="source_lines"):
        if pattern is not None and not pattern.search(x.kernel):
            continue
        out.append(rank_lines(x.kernel, i, x.source_lines, top, disk_sha256))
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
RULE_LINE_MIN_SHARE = 0.01  # of the rule's count over all lines: a line with less is not named


def opcode(sass: str) -> str:
    """The SASS instruction's opcode without its predicate or modifiers: "@!P0 FFMA.FTZ R1, ..." -> "FFMA"."""
    words = sass.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else ""


def instruction_count(ins: SassInstruction, rule_id: str) -> float:
    """The count that locates ``rule_id``'s cause on one SASS instruction (RULE_COUNTS; 0 when not measured)."""
    count = RULE_COUNTS[rule_id][0]
    if count == "fma_inst_executed":  # inst_executed of an FMA instruction
        return ins.counts.get("inst_executed", 0.0) if opcode(ins.sass) in FMA_OPCODES else 0.0
    if count == "idle_lane_slots":
        if "inst_executed" not in ins.counts or "thread_inst_executed" not in ins.counts:
            return 0.0
        return WARP_SIZE * ins.counts["inst_executed"] - ins.counts["thread_inst_executed"]
    return ins.counts.get(count, 0.0)


def rule_count(ln: SourceLine, rule_id: str) -> float:
    """The per-line count that locates ``rule_id``'s cause on ``ln`` (RULE_COUNTS; 0 when not measured): the sum
    of its instructions' (idle lane slots per instruction, so a line's converged instructions add nothing)."""
    count = RULE_COUNTS[rule_id][0]
    if count in ("fma_inst_executed", "idle_lane_slots"):
        return sum(instruction_count(i, rule_id) for i in ln.instructions)
    return ln.counts.get(count, 0.0)


def active_threads(counts: dict[str, float]) -> float | None:
    """thread_inst_executed / inst_executed of a line's or instruction's counts; None when either was not measured
    or nothing ran."""
    inst, threads = counts.get("inst_executed"), counts.get("thread_inst_executed")
    return threads / inst if inst and threads is not None else None


@dataclass
class _Located:
    where: str  # file:line, or +PC offset (no line information)
    text: str | None  # source text, or the SASS instruction
    value: float  # the rule's count
    counts: dict[str, float]  # of the line or instruction


def _located(src: SourceLines, rule_id: str) -> list[_Located]:
    """Lines with the rule's count; without line information, the SASS instructions that carry it."""
    out = []
    for ln in src.lines:
        if ln.file is None:
            out += [_Located(f"+{i.pc_offset:04x} (no line information)", i.sass, v, i.counts)
                    for i in ln.instructions if (v := instruction_count(i, rule_id)) > 0]
        elif (v := rule_count(ln, rule_id)) > 0:
            out.append(_Located(src.location(ln), src.text(ln), v, ln.counts))
    return out


def rule_lines(src: SourceLines | None, rule_id: str) -> tuple[str, list[tuple[str, float]]]:
    """The lines responsible for a kernel rule's finding, most first: (a sentence to add to its message, evidence
    pairs ``(<ncu metric> at <file:line>, value)``); ("", []) when the launch has no per-line counters for it.
    Instructions without line information are named by their SASS and offset, with how to get lines."""
    if src is None or rule_id not in RULE_COUNTS:
        return "", []
    count, what = RULE_COUNTS[rule_id]
    located = _located(src, rule_id)
    if not located:
        return "", []
    total = sum(x.value for x in located)
    samples = src.total("samples") if src.has("samples") else None
    ranked = [x for x in sorted(located, key=lambda x: -x.value) if x.value >= RULE_LINE_MIN_SHARE * total]
    ranked = ranked[:RULE_LINES]
    from kernelscope.model.source_lines import COUNT_METRICS

    metric = COUNT_METRICS.get(count) or {
        "fma_inst_executed": f"inst_executed of {'/'.join(FMA_OPCODES)}",
        "idle_lane_slots": f"{WARP_SIZE} x inst_executed - thread_inst_executed"}[count]
    parts, evidence = [], []
    for x in ranked:
        share = f", {100 * x.counts.get('samples', 0) / samples:.1f}% of warp samples" if samples else ""
        if count == "idle_lane_slots" and (active := active_threads(x.counts)) is not None:
            share = f", {active:.1f} active threads per instruction" + share
        parts.append(x.where.rsplit("/", 1)[-1].removesuffix(" (no line information)")
                     + (f" `{x.text.strip()}`" if x.text else "")
                     + f" ({100 * x.value / total:.0f}% of the {what}{share})")
        evidence.append((f"{metric} at {x.where}", x.value))
    if all(x.where.endswith("(no line information)") for x in ranked):
        return (" Instructions (the kernel has no line information; build it with -lineinfo to see source lines): "
                + "; ".join(parts) + ".", evidence)
    return " Lines: " + "; ".join(parts) + ".", evidence


def with_lines(message: str, where: str) -> str:
    """``message`` with the lines sentence after its first sentence, where views that draw a finding's first
    sentences show it."""
    if not where:
        return message
    cut = message.find(". ")
    return message + where if cut < 0 else message[:cut + 1] + where + message[cut + 1:]


# What a line does, read from the SASS opcodes under it (learn mode labels the W4A16 kernel's hot lines with them).
# A line takes the first phase in this order that it has an executed instruction of ("any"), or whose opcodes are at
# least PHASE_MIN_SHARE of its executed instructions ("share"): a load or an MMA surrounded by address arithmetic is
# still the line's point, while the unpack and the math are the bulk of theirs.
OPCODE_PHASES: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("MMA", "any", ("HMMA", "HGMMA", "IMMA", "IGMMA", "QGMMA", "DMMA", "BMMA")),
    ("loads", "any", ("LDG", "LDGSTS", "UTMALDG", "UBLKCP")),
    ("write-back", "any", ("STG", "RED", "REDG", "ATOM", "ATOMG", "UTMASTG", "UBLKRED")),
    ("unpack", "share", ("LOP3", "PRMT", "SHF", "I2F", "I2FP", "HADD2", "HFMA2", "HMUL2")),
    ("fp32 math", "share", ("FFMA", "FMUL", "FADD")),
    ("shared memory", "share", ("LDS", "LDSM", "STS", "STSM")),
)
PHASE_MIN_SHARE = 0.5


def line_phase(ln: SourceLine) -> str | None:
    """The line's phase by OPCODE_PHASES, with the opcodes that decided it (most executed first), e.g.
    "MMA (HGMMA)"; None when no rule matches or nothing on the line ran. Counts are inst_executed per SASS
    instruction."""
    by_op: dict[str, float] = {}
    for ins in ln.instructions:
        n = ins.counts.get("inst_executed", 0.0)
        if n > 0:
            op = opcode(ins.sass)
            by_op[op] = by_op.get(op, 0.0) + n
    total = sum(by_op.values())
    for phase, how, ops in OPCODE_PHASES:
        hit = sorted((op for op in by_op if op in ops), key=lambda op: -by_op[op])
        n = sum(by_op[op] for op in hit)
        if hit and (how == "any" or n >= PHASE_MIN_SHARE * total):
            return f"{phase} ({' '.join(hit)})"
    return None
