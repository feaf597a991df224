"""Recommendations: kernelscope's rules and NVIDIA's, merged and ranked by estimated gain.

Estimated gain is the share of the kernel's time a fix could save:
- kernelscope's rules: each rule's named formula (Rule.gain_formula), from the
  counters that triggered it, capped to 0..100;
- one finding per cause: NVIDIA's finding on a cause a kernelscope rule judges
  (NCU_SAME_CAUSE) is merged into that rule's finding when it fires, its
  estimate shown as NVIDIA's (``ncu_estimates``); when the rule looked and
  found nothing, NVIDIA's estimate is shown (``vendor_pct``) but not ranked as
  a gain; kernelscope's own findings of one cause merge too (KS_SAME_CAUSE);
- NVIDIA's other findings: ncu's "global" estimated speedup, capped at the
  kernel's headroom (100 - busiest unit % of peak). A "local" estimate is of
  the unit the rule looks at, not of the kernel: kept and shown as such
  (``local_pct``), not ranked as a kernel gain;
- a launch-bound kernel's in-kernel gains are scaled by its share of its
  launch cycle (a faster kernel does not shorten the wait for the CPU); so are
  those of a kernel host-gaps finds waiting on the host (its GPU time's share of
  its GPU time and the idle gaps before its launches).
Order: kernel gain, largest first; then estimates that are not kernel gains;
then findings without an estimate. Session gain = kernel gain x the kernel's share of all
kernel time, which ranks findings across kernels.
A rule that cannot run says why (NotEvaluated); none is silently skipped.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from kernelscope.analyze.bound import LAUNCH, OCCUPANCY
from kernelscope.analyze.libraries import (LAUNCH_CONFIG_RULES, LIBRARIES, LIBRARY_DESIGN_RULES,
                                          NCU_LAUNCH_CONFIG_RULES, by_design, not_yours)
from kernelscope.analyze.rules import RULES, NotEvaluated, RuleContext
from kernelscope.analyze.rule import Finding, symptoms, vendor_finding
from kernelscope.analyze.rules.base import headroom_pct
from kernelscope.model import Launch

NCU_GAIN_BASIS = "Nsight Compute's estimated speedup ({type})"
NCU_CAPPED_BASIS = ("Nsight Compute's estimated speedup (global), capped at the kernel's headroom "
                    "(100 - busiest unit % of peak): no kernelscope rule checks this cause")
NCU_UNCONFIRMED_BASIS = ("Nsight Compute's estimate, not confirmed: kernelscope's {rules} looked at the same "
                         "evidence and found nothing worth a finding")
LAUNCH_SHARE_BASIS = " x the kernel's share of its launch cycle (launch-bound: median duration / (duration + gap))"
HOST_WAIT_SHARE_BASIS = (" x the kernel's share of its launch cycle (host waits: its GPU time / (GPU time + every idle "
                         "gap before its launches))")
SESSION_GAIN_FORMULA = "kernel gain % x the kernel's share of all kernel time"
_RULE_BY_ID = {r.rule_id: r for r in RULES}

# NVIDIA's rules and the kernelscope rules that judge the same cause on the same evidence: when
# one of those fires, NVIDIA's finding is merged into it (its estimate shown as NVIDIA's); when
# they looked and found nothing, NVIDIA's estimate is shown but not ranked as a gain.
NCU_SAME_CAUSE: dict[str, tuple[str, ...]] = {
    "CPIStall": ("dominant-stall",),
    "IssueSlotUtilization": ("dominant-stall",),
    "ThreadDivergence": ("thread-divergence",),
    "TheoreticalOccupancy": ("occupancy-limit",),
    "AchievedOccupancy": ("occupancy-limit", "tail-effect", "small-grid"),
    "LaunchConfiguration": ("tail-effect", "small-grid"),
    "UncoalescedGlobalAccess": ("uncoalesced-global",),
    "MemoryCacheAccessPattern": ("uncoalesced-global",),  # "only N of the 32 bytes per sector are used"
    "UncoalescedSharedAccess": ("shared-bank-conflicts",),
    "SharedMemoryConflicts": ("shared-bank-conflicts",),
}

# kernelscope findings that are one cause seen twice: (absorbed, into, when). The absorbed one's
# evidence is kept in the surviving finding's ``merged``.
def _stall_is_occupancy(ctx: RuleContext, fired: dict[str, Finding]) -> bool:
    """Warps wait because there are too few of them to hide it: the kernel is occupancy-limited, or the
    occupancy rule found a change of the launch that fits more warps and estimated its gain."""
    occ = fired.get("occupancy-limit")
    return ctx.bound.bound == OCCUPANCY or (occ is not None and occ.kernel_gain_pct is not None)


KS_SAME_CAUSE = (("register-spills", "local-memory", lambda ctx, fired: True),
                 ("dominant-stall", "occupancy-limit", _stall_is_occupancy))

# Rules about the launch cycle itself, not about the kernel's execution: not scaled by its share.
TIMELINE_RULES = ("launch-bound", "host-gaps")


@dataclass(frozen=True)
class Recommendation:
    kernel: str
    short_name: str
    finding: Finding
    gain_pct: float | None  # % of this kernel's time
    gain_basis: str  # the formula, or NVIDIA's estimate and its type
    session_gain_pct: float | None  # % of all kernel time in the session
    local_pct: float | None = None  # ncu "local" estimate: % of one unit's work, not of the kernel
    vendor_pct: float | None = None  # NVIDIA's own estimate where kernelscope did not take it as the gain
    ncu_estimates: tuple[tuple[str, str, float | None, str | None], ...] = ()  # merged: (rule, title, %, type)
    merged: tuple[str, ...] = ()  # kernelscope rule ids merged into this one (same cause)

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
    """NVIDIA's rule results worth acting on (optimizations, warnings and errors about the kernel), as Findings."""
    if x is None:
        return []
    return [vendor_finding(f) for f in x.findings if f.severity in ("optimization", "warning", "error")
            and not f.message.startswith("The optional metric")]  # ncu notes about its own report


def gain_basis(f: Finding) -> str:
    if f.source == "ncu-rule":
        return NCU_GAIN_BASIS.format(type=f.estimate_type or "no estimate")
    r = _RULE_BY_ID.get(f.rule)
    return r.gain_formula if r else "not estimated"




def rank_key(r: Recommendation) -> tuple:
    tier = 0 if r.gain_pct is not None else 1 if (r.local_pct is not None or r.vendor_pct is not None) else 2
    return (tier, -round(r.gain_pct or r.local_pct or r.vendor_pct or 0.0, 1),
            symptoms().get(r.finding.rule, 0) if r.source == "kernelscope" else 0, r.source != "kernelscope",
            r.finding.rule, r.finding.title)


def _stall_explains(recs: list[Recommendation]) -> list[Recommendation]:
    """The dominant stall is why a kernel waits, not a fix of its own: when another finding with a gain is there, it
    is folded into the best of them (kept in ``merged``)."""
    stall = [r for r in recs if r.source == "kernelscope" and r.finding.rule == "dominant-stall"]
    others = [r for r in recs if r not in stall and r.gain_pct is not None]
    if not stall or not others:
        return recs
    top = others[0]
    kept = [r for r in recs if r not in stall]
    i = kept.index(top)
    kept[i] = replace(top, merged=top.merged + ("dominant-stall",) + sum((r.merged for r in stall), ()),
                      ncu_estimates=top.ncu_estimates + sum((r.ncu_estimates for r in stall), ()))
    return kept


def launch_cycle_share(ctx: RuleContext) -> float | None:
    """For a launch-bound kernel: median duration / (duration + median idle gap before it); else None."""
    if ctx.bound.bound != LAUNCH:
        return None
    ev = dict(ctx.bound.evidence)
    dur, gap = ev.get("median duration (trace pass)"), ev.get("median idle gap before launch")
    if not isinstance(dur, (int, float)) or not isinstance(gap, (int, float)) or dur + gap <= 0:
        return None
    return dur / (dur + gap)


def cycle_scale(ctx: RuleContext, fired: dict[str, Finding]) -> tuple[float, str] | None:
    """What in-kernel gains are scaled by, and its basis: the launch-bound share, else, when host-gaps fired,
    the kernel's GPU time / (its GPU time + the idle gaps before its launches); None otherwise."""
    launch = launch_cycle_share(ctx)
    if launch is not None:
        return launch, LAUNCH_SHARE_BASIS
    busy, gaps = ctx.kernel.total_ns, sum(ctx.gaps_before_ns)
    if "host-gaps" in fired and busy + gaps > 0:
        return busy / (busy + gaps), HOST_WAIT_SHARE_BASIS
    return None


def _same_stall(ncu: Finding, ours: Finding) -> bool:
    """ncu's CPIStall names one stall reason per finding ("Long Scoreboard Stalls"): it is the cause of
    dominant-stall only when it names the same reason; any other pairing is the same cause by the table."""
    if ncu.rule != "CPIStall" or ours.rule != "dominant-stall" or not ncu.title:
        return True
    reason = ncu.title.lower().replace(" stalls", "").replace(" ", "_")
    return any(f"_stalled_{reason}_per_issue" in name for name, _ in ours.evidence)


def _ncu_recommendation(ctx: RuleContext, f: Finding, outcomes: dict,
                        scale: tuple[float, str] | None) -> Recommendation:
    """NVIDIA's finding that no kernelscope finding took in: unconfirmed, or capped at the headroom."""
    k = ctx.kernel
    local = f.estimate_type == "local"
    if local or f.kernel_gain_pct is None:
        return Recommendation(k.name, k.label, f, None, gain_basis(f), None, f.kernel_gain_pct if local else None)
    mapped = NCU_SAME_CAUSE.get(f.rule, ())
    looked = [r for r in mapped if r in outcomes and outcomes[r] is None]
    if looked:
        return Recommendation(k.name, k.label, f, None, NCU_UNCONFIRMED_BASIS.format(rules=", ".join(looked)), None,
                              None, f.kernel_gain_pct)
    gain, basis = f.kernel_gain_pct, NCU_GAIN_BASIS.format(type="global")
    head = headroom_pct(ctx.launch, ctx.ceilings)
    if head is not None and gain > head[0]:
        gain, basis = head[0], NCU_CAPPED_BASIS
    if scale is not None:
        gain, basis = gain * scale[0], basis + scale[1]
    return Recommendation(k.name, k.label, f, gain, basis, gain * ctx.kernel.share_of_kernel_time,
                          vendor_pct=f.kernel_gain_pct if gain != f.kernel_gain_pct else None)


# Communication kernels (NCCL): few SMs by design, and their time is mostly waiting and transfer. They get the
# communication findings of the verdict (straggler, exposed communication), never launch-configuration advice.
COMM_KERNEL = next(lib.pattern for lib in LIBRARIES if lib.communication)
COMM_REASON = ("a communication (NCCL) kernel: kernel rules do not apply; the verdict's rank findings and the "
               "Collectives panel judge it")


def _run_rules(ctx: RuleContext) -> tuple[dict[str, Finding | NotEvaluated | None], list[NotEvaluated],
                                         dict[str, Finding]]:
    """Every rule's outcome on the kernel, the rules that could not run, and the findings. A library kernel
    (analyze/libraries.py) is not judged by the launch-configuration rules, and its design findings carry no gain."""
    outcomes: dict[str, Finding | NotEvaluated | None] = {}
    lib = ctx.library
    for r in RULES:
        out = NotEvaluated(r.rule_id, not_yours(lib)) if lib and r.rule_id in LAUNCH_CONFIG_RULES else r.check(ctx)
        outcomes[r.rule_id] = out
    skipped = [o for o in outcomes.values() if isinstance(o, NotEvaluated)]
    fired = {rid: f for rid, f in outcomes.items() if isinstance(f, Finding)}
    for rid in LIBRARY_DESIGN_RULES if lib else ():
        if rid in fired:
            fired[rid] = replace(fired[rid], kernel_gain_pct=None, estimate_type=None,
                                 message=f"{fired[rid].message} {by_design(lib)}")
    return outcomes, skipped, fired


def recommend(ctx: RuleContext) -> KernelRecommendations:
    """Run every rule on one kernel, merge NVIDIA's findings on the same causes, rank by estimated gain."""
    if COMM_KERNEL.search(ctx.kernel.name):
        return KernelRecommendations(ctx.kernel.name, (), tuple(NotEvaluated(r.rule_id, COMM_REASON) for r in RULES),
                                     0)
    outcomes, skipped, fired = _run_rules(ctx)
    lib = ctx.library
    # one cause, one finding: kernelscope's own duplicates first
    into: dict[str, str] = {}
    for absorbed, target, when in KS_SAME_CAUSE:
        if absorbed in fired and target in fired and when(ctx, fired):
            into[absorbed] = target
    merged: dict[str, list[str]] = {}
    for absorbed, target in into.items():
        merged.setdefault(target, []).append(absorbed)
    scale = cycle_scale(ctx, fired)
    share = ctx.kernel.share_of_kernel_time
    ncu_into: dict[str, list[Finding]] = {}
    recs: list[Recommendation] = []
    for f in nvidia_findings(ctx.launch):
        if lib and f.rule in NCU_LAUNCH_CONFIG_RULES:
            skipped.append(NotEvaluated(f.rule, not_yours(lib)))
            continue
        target = next((into.get(r, r) for r in NCU_SAME_CAUSE.get(f.rule, ())
                       if r in fired and _same_stall(f, fired[r])), None)
        if target is not None:
            ncu_into.setdefault(target, []).append(f)
        else:
            recs.append(_ncu_recommendation(ctx, f, outcomes, scale))
    for rid, f in fired.items():
        if rid in into:
            continue
        gain, basis = f.kernel_gain_pct, gain_basis(f)
        if gain is not None and scale is not None and rid not in TIMELINE_RULES:
            gain, basis = gain * scale[0], basis + scale[1]
        ncu = tuple((n.rule, n.title, n.kernel_gain_pct, n.estimate_type) for n in ncu_into.get(rid, ()))
        recs.append(Recommendation(ctx.kernel.name, ctx.kernel.label, f, gain, basis,
                                   None if gain is None else gain * share, ncu_estimates=ncu,
                                   merged=tuple(merged.get(rid, ()))))
    recs.sort(key=rank_key)
    recs = _stall_explains(recs)
    return KernelRecommendations(ctx.kernel.name, tuple(recs), tuple(skipped), len(RULES) - len(skipped))


def rank_session(per_kernel: list[KernelRecommendations]) -> tuple[Recommendation, ...]:
    """All kernels' recommendations, by estimated gain over the whole session."""
    allr = [r for k in per_kernel for r in k.recommendations]
    return tuple(sorted(allr, key=lambda r: (r.session_gain_pct is None, -(r.session_gain_pct or 0.0),
                                             r.source != "kernelscope", r.short_name, r.finding.rule)))
