"""Two sessions of a program compared as programs: wall time per step, where that time goes (the breakdown's
categories, analyze/breakdown.py), which findings of A went away in B, and for each of A's findings the gain its
verdict estimated (the replayed gain where the replay ran, analyze/replay.py) against the gain B measured.

Everything is read from the two sessions' verdicts (analyze/verdict.SessionVerdict): their breakdowns and their
ranked findings. A finding of A is matched in B by its rule and the kernel it names. It is ``gone`` when B does
not report it, or reports it with less than thresholds.FINDING_GONE_BELOW_PCT of B's wall time left to give back.
The measured gain (MEASURED_GAIN_FORMULA) belongs to the change from A to B as a whole: when several findings went
away together, each carries the same measured gain and names the others, since one step time cannot tell their
shares apart, and no error is given for one of them.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from kernelscope.analyze import breakdown as bd
from kernelscope.analyze.replay import GAIN_FORMULA as REPLAY_GAIN_FORMULA
from kernelscope.analyze.thresholds import FINDING_GONE_BELOW_PCT
from kernelscope.analyze.verdict import SessionVerdict

GONE, REMAINS, NEW = "gone", "remains", "new"
REPLAYED, SHARE_ESTIMATE = "replayed", "rule's estimate"  # how the estimate before was made
STEP_TIME_FORMULA = ("median step time of the steady window (breakdown: steps 1..n-1), the slowest rank's where "
                     "there are several; as recorded, with the profiler's cost in it")
MEASURED_GAIN_FORMULA = "1 - step time B / step time A"
PER_STEP_FORMULA = "category time in the window / steps in the window, mean over ranks"
ERROR_FORMULA = "measured gain - estimated gain, in percentage points"


@dataclass(frozen=True)
class StepTime:
    """One session's wall time per step, or why there is none."""

    step_ns: int | None  # STEP_TIME_FORMULA; None when no rank has steps
    steps: int  # steps in the window (the slowest rank's)
    basis: str  # what the step time measures (breakdown.GPU_STEPS or HOST_STEPS), or why there is none


@dataclass(frozen=True)
class CategoryChange:
    """One category of the wall-time breakdown in both sessions."""

    category: str  # breakdown.CATEGORIES
    share_a: float | None  # of the window's wall time, 0..1, mean over ranks; None: no breakdown
    share_b: float | None
    per_step_a_ns: float | None  # PER_STEP_FORMULA; None when the session has no steps
    per_step_b_ns: float | None


@dataclass(frozen=True)
class FindingChange:
    """One finding of A (or a new one of B) and what became of it."""

    rule: str
    title: str
    kernel: str | None  # the kernel it names (label in its session's kernel table); None: the program as a whole
    status: str  # gone | remains | new
    estimated_gain_pct: float | None  # A's verdict's gain, % of A's wall time; None for a finding new in B
    estimate_basis: str  # REPLAYED or SHARE_ESTIMATE ("" for a new finding)
    gain_b_pct: float | None  # B's verdict's gain for the same rule and kernel; None when B does not report it
    measured_gain_pct: float | None  # MEASURED_GAIN_FORMULA, for a gone finding; None otherwise or without steps
    error_pp: float | None  # ERROR_FORMULA, for the one finding that went away (None when several did)
    together_with: tuple[str, ...] = ()  # the other findings that went away with it (share the measured gain)

    @property
    def name(self) -> str:
        return finding_name(self.rule, self.kernel)


@dataclass(frozen=True)
class ProgramDiff:
    step_a: StepTime
    step_b: StepTime
    measured_gain_pct: float | None  # MEASURED_GAIN_FORMULA; None when either session has no step time
    measured_missing: str | None  # why there is no measured gain
    breakdown: tuple[CategoryChange, ...]  # categories with time in either session, in breakdown order
    findings: tuple[FindingChange, ...]  # A's findings in A's ranked order, then B's new ones by gain
    missing_reason: str | None = None  # why the programs cannot be compared (no breakdown, or too short a window)

    @property
    def gone(self) -> tuple[FindingChange, ...]:
        return tuple(f for f in self.findings if f.status == GONE)


def finding_name(rule: str, kernel: str | None) -> str:
    return rule if kernel is None else f"{rule} ({kernel})"


def step_time(v: SessionVerdict) -> StepTime:
    ranks = [r for r in v.breakdown.ranks if r.median_step_ns is not None]
    if not ranks:
        why = v.breakdown.missing_reason or "no steps marked (call kernelscope.step() once per iteration)"
        return StepTime(None, 0, why)
    slowest = max(ranks, key=lambda r: r.median_step_ns or 0)
    return StepTime(slowest.median_step_ns, slowest.steps, slowest.step_basis)


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _category(v: SessionVerdict, category: str) -> tuple[float | None, float | None]:
    ranks = [r for r in v.breakdown.ranks if r.wall_ns > 0]
    share = _mean([r.ns(category) / r.wall_ns for r in ranks])
    per_step = _mean([r.ns(category) / r.steps for r in ranks if r.steps])
    return share, per_step


def _breakdown(a: SessionVerdict, b: SessionVerdict) -> tuple[CategoryChange, ...]:
    out = []
    for c in bd.CATEGORIES:
        (sa, pa), (sb, pb) = _category(a, c), _category(b, c)
        if sa or sb:
            out.append(CategoryChange(c, sa, sb, pa, pb))
    return tuple(out)


def _basis(gain_formula: str) -> str:
    return REPLAYED if gain_formula.startswith(REPLAY_GAIN_FORMULA) else SHARE_ESTIMATE


def _findings(a: SessionVerdict, b: SessionVerdict, measured: float | None) -> tuple[FindingChange, ...]:
    in_b = {}
    for f in b.findings:  # the ranked list: the first of a rule and kernel is its largest
        in_b.setdefault((f.rule, f.kernel), f)
    seen = set()
    rows: list[FindingChange] = []
    for f in a.findings:
        key = (f.rule, f.kernel)
        if key in seen:
            continue
        seen.add(key)
        after = in_b.get(key)
        gain_b = None if after is None else after.gain_pct
        gone = gain_b is None or gain_b < FINDING_GONE_BELOW_PCT
        rows.append(FindingChange(f.rule, f.title, f.kernel, GONE if gone else REMAINS, f.gain_pct,
                                  _basis(f.gain_formula), gain_b, measured if gone else None, None))
    names = [r.name for r in rows if r.status == GONE]
    # the error is the estimate's alone: with several gone, the measured gain is theirs together
    alone = len(names) == 1 and measured is not None
    rows = [replace(r, together_with=tuple(n for n in names if n != r.name),
                    error_pp=measured - r.estimated_gain_pct if alone and r.estimated_gain_pct is not None else None)
            if r.status == GONE else r for r in rows]
    new = [f for key, f in in_b.items() if key not in seen and f.gain_pct >= FINDING_GONE_BELOW_PCT]
    rows += [FindingChange(f.rule, f.title, f.kernel, NEW, None, "", f.gain_pct, None, None) for f in new]
    return tuple(rows)


def _not_a_program(v: SessionVerdict | None) -> str | None:
    """Why a session cannot be compared as a program (no breakdown, or a window too short for the program rules),
    None when it can."""
    if v is None:
        return "no verdict"
    if not v.breakdown.ranks:
        return v.breakdown.missing_reason or "no GPU activity with start times"
    return v.too_short


def program_diff(a: SessionVerdict | None, b: SessionVerdict | None) -> ProgramDiff:
    """A compared with B as programs, from their verdicts (None: a session with no verdict)."""
    none = StepTime(None, 0, "no verdict")
    for which, v in (("A", a), ("B", b)):
        why = _not_a_program(v)
        if why is not None:
            return ProgramDiff(none if a is None else step_time(a), none if b is None else step_time(b), None,
                               f"{which}: {why}", (), (), f"{which}: {why}")
    assert a is not None and b is not None
    sa, sb = step_time(a), step_time(b)
    measured, missing = None, None
    if sa.step_ns is None or sb.step_ns is None:
        missing = f"{'A' if sa.step_ns is None else 'B'}: {(sa if sa.step_ns is None else sb).basis}"
    else:
        measured = 100.0 * (1 - sb.step_ns / sa.step_ns)
    return ProgramDiff(sa, sb, measured, missing, _breakdown(a, b), _findings(a, b, measured))
