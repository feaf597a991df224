"""NVIDIA's rule results beside kernelscope's findings, per kernel and cause.

An Nsight Compute report carries NVIDIA's own guided-analysis results (rule, message, estimated speedup).
For each cause either side names, one row says what kernelscope's rule concluded (fired with its gain, found
nothing, could not run, or has no rule for it), what NVIDIA's rules said (their estimates and their type), and,
where the two disagree, why: the evidence one side lacked, a threshold, or what each estimate is a share of.
"""
from __future__ import annotations

from dataclasses import dataclass

from kernelscope.analyze.recommend import NCU_SAME_CAUSE, KernelRecommendations, Recommendation
from kernelscope.analyze.rules import RULES
from kernelscope.analyze.rule import Finding
from kernelscope.model import Launch

AGREE, DIFFER, KERNELSCOPE_ONLY, NVIDIA_ONLY = "agree", "differ", "kernelscope only", "NVIDIA only"
# estimates further apart than this (points of the kernel's time) are a disagreement worth explaining
ESTIMATE_GAP_POINTS = 20.0

# The section each NVIDIA rule runs on (ncu 2025.3.1's rule files, as the H200 reports in tests/data/ncu_sets
# name them): a report without that section has no result from the rule.
NVIDIA_RULE_SECTION: dict[str, str] = {
    "CPIStall": "WarpStateStats", "IssueSlotUtilization": "SchedulerStats", "ThreadDivergence": "WarpStateStats",
    "TheoreticalOccupancy": "Occupancy", "AchievedOccupancy": "Occupancy", "LaunchConfiguration": "LaunchStats",
    "UncoalescedGlobalAccess": "SourceCounters", "UncoalescedSharedAccess": "SourceCounters",
    "MemoryCacheAccessPattern": "MemoryWorkloadAnalysis_Tables",
    "SharedMemoryConflicts": "MemoryWorkloadAnalysis_Tables",
}


OWN_RULES = frozenset(r.rule_id for r in RULES)
NO_NVIDIA_RULE = "Nsight Compute has no rule on this cause"


@dataclass(frozen=True)
class RuleComparison:
    cause: str  # kernelscope's rule id, or NVIDIA's where no kernelscope rule judges the cause
    kernelscope: str  # "fired" | "found nothing" | "not evaluated" | "no rule"
    kernelscope_gain_pct: float | None
    nvidia: tuple[tuple[str, str, float | None, str | None], ...]  # (rule id, title, estimated speedup %, type)
    agreement: str  # AGREE | DIFFER | KERNELSCOPE_ONLY | NVIDIA_ONLY
    explanation: str


def nvidia_causes(f: Finding) -> tuple[str, ...]:
    """The kernelscope rules that judge the cause of NVIDIA's finding (its access-pattern findings on local
    loads and stores are local memory's, not coalescing's)."""
    if f.rule == "MemoryCacheAccessPattern" and "local" in f.title.lower():
        return ("local-memory", "register-spills")
    return NCU_SAME_CAUSE.get(f.rule, ())


def _judging(rule_id: str) -> list[str]:
    """NVIDIA's rules whose findings this kernelscope rule judges."""
    rules = [r for r, ours in NCU_SAME_CAUSE.items() if rule_id in ours]
    if rule_id in ("local-memory", "register-spills"):
        rules.append("MemoryCacheAccessPattern")
    return rules


def _nvidia_silent(rule_id: str, x: Launch | None) -> str:
    rules = _judging(rule_id)
    if not rules:
        return NO_NVIDIA_RULE
    sections = sorted({NVIDIA_RULE_SECTION[r] for r in rules if r in NVIDIA_RULE_SECTION})
    seen = {f.section for f in (x.findings if x is not None else [])}
    if sections and not seen & set(sections):
        return (f"NVIDIA's {', '.join(rules)} run on the {', '.join(sections)} section, from which the report holds "
                "no rule result: the section was not collected, or its rules raised nothing")
    return (f"NVIDIA's {', '.join(rules)} ran (the report holds results from {', '.join(sections)}) and raised "
            "nothing on this cause: their thresholds are not kernelscope's (its evidence is listed with its finding)")


def _estimates_text(nv: tuple[tuple[str, str, float | None, str | None], ...]) -> str:
    parts = []
    for rule, title, pct, kind in nv:
        est = "no estimate" if pct is None else f"{pct:.0f}% ({kind or 'unknown'}" + (
            ": of one unit's work, not of the kernel's time)" if kind == "local" else ")")
        parts.append(f"{rule}{f' ({title})' if title else ''}: {est}")
    return "; ".join(parts)


def _both(r: Recommendation, nv: tuple[tuple[str, str, float | None, str | None], ...]) -> RuleComparison:
    rid = r.finding.rule
    global_est = [pct for _, _, pct, kind in nv if pct is not None and kind == "global"]
    if r.gain_pct is None or not global_est or any(abs(p - r.gain_pct) <= ESTIMATE_GAP_POINTS for p in global_est):
        why = f"both name this cause; kernelscope's gain: {r.gain_basis}; NVIDIA's: {_estimates_text(nv)}"
        return RuleComparison(rid, "fired", r.gain_pct, nv, AGREE, why)
    why = (f"both name this cause, with estimates {ESTIMATE_GAP_POINTS:.0f}+ points apart: kernelscope's "
           f"{r.gain_pct:.0f}% is {r.gain_basis}; NVIDIA's is {_estimates_text(nv)}")
    return RuleComparison(rid, "fired", r.gain_pct, nv, DIFFER, why)


def compare_with_nvidia(recs: KernelRecommendations, x: Launch | None) -> tuple[RuleComparison, ...]:
    """One row per cause that kernelscope's rules or NVIDIA's name for this kernel."""
    rows: list[RuleComparison] = []
    skipped = {n.rule: n.reason for n in recs.not_evaluated}
    mine = {r.finding.rule: r for r in recs.recommendations if r.source == "kernelscope"}
    for rid in [m for r in mine.values() for m in r.merged]:
        mine.setdefault(rid, mine[next(k for k, r in mine.items() if rid in r.merged)])
    theirs: dict[str, list[Recommendation]] = {}
    for r in recs.recommendations:
        if r.source != "kernelscope":
            causes = nvidia_causes(r.finding)
            hit = next((mine[c].finding.rule for c in causes if c in mine), None)
            theirs.setdefault(hit or (causes[0] if causes else r.finding.rule), []).append(r)
    for rid, r in mine.items():
        if r.finding.rule != rid:
            continue  # merged into another finding: that row speaks for it
        nv = r.ncu_estimates + tuple((n.finding.rule, n.finding.title, n.finding.kernel_gain_pct,
                                      n.finding.estimate_type) for n in theirs.pop(rid, []))
        rows.append(_both(r, nv) if nv else RuleComparison(rid, "fired", r.gain_pct, (), KERNELSCOPE_ONLY,
                                                            _nvidia_silent(rid, x)))
    for cause, found in theirs.items():
        nv = tuple((n.finding.rule, n.finding.title, n.finding.kernel_gain_pct, n.finding.estimate_type)
                   for n in found)
        if cause in skipped:
            rows.append(RuleComparison(cause, "not evaluated", None, nv, NVIDIA_ONLY,
                                       f"kernelscope's {cause} could not run: {skipped[cause]}"))
        elif cause in OWN_RULES:
            rows.append(RuleComparison(cause, "found nothing", None, nv, NVIDIA_ONLY,
                                       f"kernelscope's {cause} looked at this cause and found nothing worth a finding "
                                       "(under its threshold): NVIDIA's estimate is shown, not ranked as a gain"))
        else:
            rows.append(RuleComparison(cause, "no rule", None, nv, NVIDIA_ONLY,
                                       f"no kernelscope rule judges this cause; NVIDIA's finding is ranked on its "
                                       f"own estimate ({found[0].gain_basis})"))
    return tuple(rows)
