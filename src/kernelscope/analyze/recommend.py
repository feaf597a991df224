"""Recommendations: kernelscope's rules and NVIDIA's, merged and ranked by estimated gain.

Estimated gain is the share of the kernel's time a fix could save:
- kernelscope's rules: each rule's named formula (Rule.gain_formula), from the
  counters that triggered it, capped to 0..100;
- NVIDIA's rules: ncu's own "estimated speedup" as the report records it
  when its type is "global" (of the kernel's duration). A "local" estimate is
  of the unit the rule looks at, not of the kernel: it is kept and shown as
  such (``local_pct``) but does not rank as a kernel gain.
Order: kernel gain, largest first; then local-only estimates; then findings
without an estimate. Session gain = kernel gain x the kernel's share of all
kernel time, which ranks findings across kernels.
A rule that cannot run says why (NotEvaluated); none is silently skipped.
"""
from __future__ import annotations

from dataclasses import dataclass

from kernelscope.analyze.rules import RULES, NotEvaluated, RuleContext
from kernelscope.model import Finding, Launch

NCU_GAIN_BASIS = "Nsight Compute's estimated speedup ({type})"
SESSION_GAIN_FORMULA = "kernel gain % x the kernel's share of all kernel time"
_RULE_BY_ID = {r.rule_id: r for r in RULES}


@dataclass(frozen=True)
class Recommendation:
    kernel: str
    short_name: str
    finding: Finding
    gain_pct: float | None  # % of this kernel's time
    gain_basis: str  # the formula, or NVIDIA's estimate and its type
    session_gain_pct: float | None  # % of all kernel time in the session
    local_pct: float | None = None  # ncu "local" estimate: % of one unit's work, not of the kernel

    @property
    def source(self) -> str:
        return self.finding.source


@dataclass(frozen=True)
class KernelRecommendations:
    kernel: str
    recommendations: tuple[Recommendation, ...]  # best estimated gain first
    not_evaluated: tuple[NotEvaluated, ...]
    rules_run: int  # kernelscope rules that looked at the data (fired or not)


def nvidia_findings(x: Launch | None) -> list[Finding]:
    """NVIDIA's rule results worth acting on: optimizations, warnings and errors about the kernel."""
    if x is None:
        return []
    return [f for f in x.findings if f.severity in ("optimization", "warning", "error")
            and not f.message.startswith("The optional metric")]  # ncu notes about its own report


def gain_basis(f: Finding) -> str:
    if f.source == "ncu-rule":
        return NCU_GAIN_BASIS.format(type=f.speedup_type or "no estimate")
    r = _RULE_BY_ID.get(f.rule_id)
    return r.gain_formula if r else "not estimated"


def rank_key(r: Recommendation) -> tuple:
    tier = 0 if r.gain_pct is not None else 1 if r.local_pct is not None else 2
    return (tier, -(r.gain_pct or r.local_pct or 0.0), r.source != "kernelscope", r.finding.rule_id, r.finding.title)


def _recommendation(k_name: str, short: str, f: Finding, share: float) -> Recommendation:
    local = f.source == "ncu-rule" and f.speedup_type == "local"
    gain = None if local else f.speedup_pct
    return Recommendation(k_name, short, f, gain, gain_basis(f), None if gain is None else gain * share,
                          f.speedup_pct if local else None)


def recommend(ctx: RuleContext) -> KernelRecommendations:
    """Run every rule on one kernel, add NVIDIA's findings, rank by estimated gain."""
    findings: list[Finding] = []
    skipped: list[NotEvaluated] = []
    for r in RULES:
        out = r.check(ctx)
        if isinstance(out, NotEvaluated):
            skipped.append(out)
        elif isinstance(out, Finding):
            findings.append(out)
    findings += nvidia_findings(ctx.launch)
    share = ctx.kernel.share_of_kernel_time
    recs = [_recommendation(ctx.kernel.name, ctx.kernel.label, f, share) for f in findings]
    recs.sort(key=rank_key)
    return KernelRecommendations(ctx.kernel.name, tuple(recs), tuple(skipped), len(RULES) - len(skipped))


def rank_session(per_kernel: list[KernelRecommendations]) -> tuple[Recommendation, ...]:
    """All kernels' recommendations, by estimated gain over the whole session."""
    allr = [r for k in per_kernel for r in k.recommendations]
    return tuple(sorted(allr, key=lambda r: (r.session_gain_pct is None, -(r.session_gain_pct or 0.0),
                                             r.source != "kernelscope", r.short_name, r.finding.rule_id)))
