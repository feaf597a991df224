"""The session's verdict, the first thing `show` says: where the wall time goes (analyze/breakdown.py), what
to fix first, and what was not measured. Plain data, every number taken from the session analysis or the
recorded durations it sums.

Findings come from the program rules (analyze/program_rules.py: host syncs, launch overhead, copies, host
stalls, FP32 matmuls, unfused chains, stragglers) and the kernel rules (analyze/recommend.py), in one list
ranked by gain as a share of wall time. A kernel finding's gain becomes a share of wall time by
KERNEL_GAIN_FORMULA. Communication kernels get communication findings only; a generic symptom (a rule's declared
``symptom``, analyze/rule.py) that another finding on the same kernel explains is folded into it; a finding whose
rule ``needs`` another's fix first comes right after it; the kernel rules about the launch cycle
give way to the program rules that see the whole run. Gains that claim the same time (one breakdown
category) are combined, never summed (COMBINED_FORMULA).
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, replace

from kernelscope.analyze import breakdown as bd
from kernelscope.analyze.analysis import SessionAnalysis
from kernelscope.analyze.kernel_table import SessionSummary
from kernelscope.analyze import operator_rules  # noqa: F401  (registers the program rules that read operators)
from kernelscope.analyze.program_rules import PROGRAM_RULES, ProgramContext, run_program_rules
from kernelscope.analyze.ranks import RanksReport
from kernelscope.analyze.recommend import TIMELINE_RULES
from kernelscope.analyze.rule import Finding, NotEvaluated, explained, prerequisites, replaced_by
from kernelscope.model import Session
from kernelscope.model.launch_table import collector_paused

TOP_KERNELS = 3  # kernels named in "by kernel"; the rest are summed as one share
TOP_GAINS = 5  # findings the terminal and HTML list (show --json writes every one)
MIN_WALL_GAIN_PCT = 0.1  # kernel findings under this share of wall time stay in the kernels' panels only
KERNEL_GAIN_FORMULA = ("gain % of the kernel's time x the kernel's share of all kernel time x kernel time's share of "
                       "the window's wall time (breakdown, mean over ranks)")
COMBINED_FORMULA = ("per breakdown category 1 - product(1 - gain) over its findings, capped at the category's share; "
                    "categories (disjoint time) added")
NO_REGION = "(no region)"
SHARE_FORMULA = "time / sum of all kernel durations"


@dataclass(frozen=True)
class TimeShare:
    name: str
    total_ns: int
    share: float | None  # 0..1 of the group's total; None when the total is 0
    count: int = 0  # launches (kernels) or records (copies); kernels summed in "others"


@dataclass(frozen=True)
class NotMeasured:
    what: str
    reason: str
    kernels: int = 0  # how many kernels it concerns (0: the whole session)


@dataclass(frozen=True)
class SessionVerdict:
    kernel_time_ns: int
    launches: int
    kernel_count: int
    by_kernel: tuple[TimeShare, ...]  # the TOP_KERNELS largest, then "N others" when there are more
    by_kind: tuple[TimeShare, ...]  # kernels, memcpy, memset: GPU time of each kind (timeline rows)
    by_kind_missing: str | None  # why there is no split by kind (no timeline: counter-pass-only session)
    by_region: tuple[TimeShare, ...]  # kernel time by innermost region (largest TOP_KERNELS, then the rest
    #                                   as one); empty when no launch has one
    findings: tuple[Finding, ...]  # every finding with a gain, largest first
    unranked: int  # findings with no kernel-time estimate (shown in the kernels' panels, not ranked here)
    not_measured: tuple[NotMeasured, ...]
    breakdown: bd.Breakdown = bd.Breakdown(())
    not_evaluated: tuple[NotEvaluated, ...] = ()  # program rules that could not run, with the data they lacked
    combined_gain_pct: float | None = None  # COMBINED_FORMULA over findings
    combined_formula: str = COMBINED_FORMULA
    too_short: str | None = None  # why the window is too short to judge the program (breakdown.too_short): no
    #                               program rule ran; None when it was judged

    @property
    def gains(self) -> tuple[Finding, ...]:
        return self.findings[:TOP_GAINS]

    def for_kernel(self, name: str) -> tuple[tuple[int, Finding], ...]:
        """The findings of the one list that name the kernel (by full name), with their place in it (1 = first)."""
        return tuple((i, f) for i, f in enumerate(self.findings, 1) if name in f.kernels)


def _shares(totals: dict[str, tuple[int, int]], whole: int) -> tuple[TimeShare, ...]:
    rows = [TimeShare(name, ns, ns / whole if whole else None, n) for name, (ns, n) in totals.items()]
    return tuple(sorted(rows, key=lambda r: (-r.total_ns, r.name)))


def _by_kernel(summary: SessionSummary) -> tuple[TimeShare, ...]:
    whole = summary.total_kernel_ns
    top = [TimeShare(k.label, k.total_ns, k.share_of_kernel_time if whole else None, k.launches)
           for k in summary.kernels[:TOP_KERNELS]]
    rest = summary.kernels[TOP_KERNELS:]
    if rest:
        ns = sum(k.total_ns for k in rest)
        top.append(TimeShare(f"{len(rest)} other kernels", ns, ns / whole if whole else None, len(rest)))
    return tuple(top)


def _by_kind(session: Session, analysis: SessionAnalysis) -> tuple[TimeShare, ...]:
    """GPU time of each kind of timeline row (kernels, copies, sets), summed from the columns the rows are
    made of: the timed launches (those with a start, the trace pass's) and the activities."""
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    if not len(analysis.timeline.rows):
        return ()
    _, traced = session.launch_table().durations_by_shape()
    launches = sum(map(len, traced))
    if launches:
        totals["kernel"] = [sum(map(sum, traced)), launches]
    for a in session.activities:
        totals[a.kind][0] += a.duration_ns
        totals[a.kind][1] += 1
    whole = sum(ns for ns, _ in totals.values())
    return _shares({k: (v[0], v[1]) for k, v in totals.items()}, whole)


def _by_region(session: Session, whole: int) -> tuple[TimeShare, ...]:
    table = session.launch_table()  # columns: one pass over durations, no Launch object per launch
    if not any(r for s in table.shapes for r in s.regions if not bd.STEP_RE.match(r)):
        return ()
    every, _ = table.durations_by_shape()
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for s, durations in zip(table.shapes, every):  # innermost region, so nested regions are not counted twice
        named = [r for r in s.regions if not bd.STEP_RE.match(r)]  # steps are the breakdown's window, not regions
        name = named[-1] if named else NO_REGION
        totals[name][0] += sum(durations)
        totals[name][1] += len(durations)
    rows = _shares({k: (v[0], v[1]) for k, v in totals.items()}, whole)
    if len(rows) <= TOP_KERNELS + 1:
        return rows
    rest = rows[TOP_KERNELS:]
    ns = sum(r.total_ns for r in rest)
    return rows[:TOP_KERNELS] + (TimeShare(f"{len(rest)} other regions", ns, ns / whole if whole else None,
                                           sum(r.count for r in rest)),)


def _kernels_share_of_wall(b: bd.Breakdown) -> float | None:
    shares = [r.ns(bd.KERNELS) / r.wall_ns for r in b.ranks if r.wall_ns > 0]
    return sum(shares) / len(shares) if shares else None


def _kernel_findings(analysis: SessionAnalysis, b: bd.Breakdown) -> tuple[list[Finding], int]:
    """The kernel rules' findings with a gain, as shares of wall time; communication kernels and the launch-cycle
    rules left out (module docstring); generic symptoms folded into a specific finding on the same kernel."""
    labels = {k.kernel.name: k.kernel.label for k in analysis.kernels}
    busy = _kernels_share_of_wall(b)
    program = bool(b.ranks)
    ranked = [r for r in analysis.ranked if r.session_gain_pct is not None and r.gain_pct is not None]
    unranked = len(analysis.ranked) - len(ranked)
    by_kernel: dict[str, list] = defaultdict(list)
    for r in ranked:
        if bd.COMM_KERNEL_RE.search(r.kernel) or (program and r.finding.rule in TIMELINE_RULES):
            continue
        by_kernel[r.kernel].append(r)
    out: list[Finding] = []
    for kernel, recs in by_kernel.items():
        generic = explained()  # declared by the rules (analyze/rule.py)
        specific = [r for r in recs if r.finding.rule not in generic]
        folded = tuple(r.finding.rule for r in recs if r.finding.rule in generic) if specific else ()
        for i, r in enumerate(specific or recs):
            gain = r.session_gain_pct
            formula = KERNEL_GAIN_FORMULA if busy is not None else "gain % of the kernel's time x its share of all " \
                "kernel time (no breakdown of wall time)"
            if busy is not None:
                gain *= busy
            if gain < MIN_WALL_GAIN_PCT:
                continue
            out.append(replace(
                r.finding, category=bd.KERNELS, title=r.finding.title or r.finding.rule, gain_pct=gain,
                gain_formula=f"{formula}; kernel gain: {r.gain_basis}", kernel=labels.get(kernel, r.short_name),
                kernels=(kernel,), kernel_gain_pct=r.gain_pct, explains=folded if i == 0 else ()))
    return out, unranked


def _combined(findings: list[Finding], b: bd.Breakdown) -> float | None:
    if not findings:
        return None
    cap = {c: max((r.ns(c) / r.wall_ns * 100 for r in b.ranks if r.wall_ns), default=100.0) for c in bd.CATEGORIES}
    by_cat: dict[str, float] = defaultdict(lambda: 1.0)
    for f in findings:
        by_cat[f.category] *= 1 - min(100.0, f.gain_pct) / 100
    total = sum(min(100 * (1 - keep), cap.get(c, 100.0) if b.ranks else 100.0) for c, keep in by_cat.items())
    return min(100.0, total)


def _one_per_rule(found: list[Finding]) -> list[Finding]:
    """Several ranks with the same program finding: one finding, the largest, naming every rank's gain."""
    by_rule: dict[str, list] = defaultdict(list)
    for f in found:
        by_rule[f.rule].append(f)
    out = []
    for fs in by_rule.values():
        top = max(fs, key=lambda f: f.gain_pct)
        if len(fs) > 1:
            per = ", ".join(f"rank {f.rank}: {f.gain_pct:.1f}%" for f in sorted(fs, key=lambda f: f.rank or 0))
            top = replace(top, evidence=top.evidence + (("ranks with this finding (gain % of wall)", per),),
                          rank=None)
        out.append(top)
    return out


def _too_short(b: bd.Breakdown) -> str | None:
    """Why no rank's window can be judged as a program (every rank too short), None when one can."""
    reasons = [bd.too_short(r) for r in b.ranks]
    if not reasons or not all(reasons):
        return None
    return reasons[0] if len(set(reasons)) == 1 else "; ".join(f"rank {r.rank}: {w}" for r, w in zip(b.ranks, reasons))


def _findings(session: Session, analysis: SessionAnalysis, ranks: RanksReport | None
              ) -> tuple[bd.Breakdown, list[Finding], int, list[NotEvaluated], str | None]:
    b, gaps = bd.breakdown(session, ranks.collectives if ranks is not None else None)
    cc = session.device.compute_capability if session.device is not None else None
    ctx = ProgramContext(session, b, gaps, ranks, tuple(cc) if cc else None)
    short = _too_short(b)
    found, skipped = run_program_rules(ctx) if b.ranks and not short else ([], [])
    not_eval = list(skipped)
    if not b.ranks or short:
        not_eval += [NotEvaluated(r.rule_id, short or b.missing_reason or "no breakdown") for r in PROGRAM_RULES]
    rules = {f.rule for f in found}
    found = [f for f in found if not (replaced_by().get(f.rule, set()) & rules)]
    program = _one_per_rule(found)
    kernel, unranked = _kernel_findings(analysis, b)
    every = sorted(program + kernel, key=lambda f: (-round(f.gain_pct, 6), f.scope != "program",
                                                   f.rule in explained(), f.rule, f.kernel or ""))
    return b, _prerequisites_first(every), unranked, not_eval, short


def _prerequisites_first(findings: list[Finding]) -> list[Finding]:
    """A finding whose fix cannot work until another's is done (the rule's declared ``needs``) comes right after it,
    whatever its gain."""
    out = list(findings)
    for rule, before in prerequisites().items():
        i = next((k for k, f in enumerate(out) if f.rule == rule), None)
        j = max((k for k, f in enumerate(out) if f.rule in before), default=None)
        if i is not None and j is not None and j > i:
            f = out.pop(i)
            out.insert(j, f)  # j moved down by one: right after its prerequisite
    return out


def _not_measured(session: Session, analysis: SessionAnalysis) -> tuple[NotMeasured, ...]:
    """Collectors that did not run fully, then what the kernels lack, grouped by reason (one reason,
    e.g. no counter pass, takes several things away from the same kernels)."""
    out: list[NotMeasured] = []
    for name, status in sorted(session.collectors.items()):
        if status.status != "ok":
            out.append(NotMeasured(f"{name} ({status.status})", status.reason or "no reason was recorded"))
    if analysis.ceilings.missing_reason:  # said once for the session, not per kernel
        out.append(NotMeasured("measured ceilings (roofs, % of measured peak)", analysis.ceilings.missing_reason))
    by_reason: dict[str, tuple[list[str], set[str]]] = {}
    for k in analysis.kernels:
        for what, why in k.missing:
            if why == analysis.ceilings.missing_reason:
                continue
            whats, kernels = by_reason.setdefault(why, ([], set()))
            if what not in whats:
                whats.append(what)
            kernels.add(k.kernel.name)
    out += [NotMeasured("; ".join(whats), why, len(kernels)) for why, (whats, kernels) in by_reason.items()]
    return tuple(out)


@collector_paused()
def session_verdict(session: Session, analysis: SessionAnalysis, ranks: RanksReport | None = None) -> SessionVerdict:
    summary = analysis.summary
    b, findings, unranked, not_eval, short = _findings(session, analysis, ranks)
    return SessionVerdict(
        summary.total_kernel_ns,
        summary.launch_count,
        len(summary.kernels),
        _by_kernel(summary),
        _by_kind(session, analysis),
        analysis.timeline.missing_reason,
        _by_region(session, summary.total_kernel_ns),
        tuple(findings),
        unranked,
        _not_measured(session, analysis),
        b,
        tuple(not_eval),
        _combined(findings, b),
        too_short=short,
    )
