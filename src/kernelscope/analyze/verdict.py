"""The session's verdict, the first thing `show` says: where the GPU time goes, what to fix first, and
what was not measured. Plain data, every number taken from the session analysis or the recorded
durations it sums; nothing is estimated here that the analysis did not estimate.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from kernelscope.analyze.analysis import SessionAnalysis
from kernelscope.analyze.kernel_table import SessionSummary
from kernelscope.model import Session

TOP_KERNELS = 3  # kernels named in "by kernel"; the rest are summed as one share
TOP_GAINS = 3  # the largest estimated gains across the session
NO_REGION = "(no region)"
SHARE_FORMULA = "time / sum of all kernel durations"


@dataclass(frozen=True)
class TimeShare:
    name: str
    total_ns: int
    share: float | None  # 0..1 of the group's total; None when the total is 0
    count: int = 0  # launches (kernels) or records (copies); kernels summed in "others"


@dataclass(frozen=True)
class Gain:
    kernel: str  # label as in the kernel table
    rule: str  # the finding's title (or rule id)
    source: str  # "kernelscope" | "ncu-rule"
    gain_pct: float  # % of this kernel's time
    session_gain_pct: float  # % of all kernel time (recommend.SESSION_GAIN_FORMULA)


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
    gains: tuple[Gain, ...]  # at most TOP_GAINS, largest session gain first
    unranked: int  # findings with no kernel-time estimate (shown in the kernels' panels, not ranked here)
    not_measured: tuple[NotMeasured, ...]


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
    if not any(s.regions for s in table.shapes):
        return ()
    every, _ = table.durations_by_shape()
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for s, durations in zip(table.shapes, every):  # innermost region, so nested regions are not counted twice
        name = s.regions[-1] if s.regions else NO_REGION
        totals[name][0] += sum(durations)
        totals[name][1] += len(durations)
    rows = _shares({k: (v[0], v[1]) for k, v in totals.items()}, whole)
    if len(rows) <= TOP_KERNELS + 1:
        return rows
    rest = rows[TOP_KERNELS:]
    ns = sum(r.total_ns for r in rest)
    return rows[:TOP_KERNELS] + (TimeShare(f"{len(rest)} other regions", ns, ns / whole if whole else None,
                                           sum(r.count for r in rest)),)


def _gains(analysis: SessionAnalysis) -> tuple[tuple[Gain, ...], int]:
    labels = {k.kernel.name: k.kernel.label for k in analysis.kernels}
    ranked = [r for r in analysis.ranked if r.session_gain_pct is not None and r.gain_pct is not None]
    gains = tuple(Gain(labels.get(r.kernel, r.short_name), r.finding.title or r.finding.rule_id, r.source,
                       r.gain_pct, r.session_gain_pct) for r in ranked[:TOP_GAINS])
    return gains, len(analysis.ranked) - len(ranked)


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


def session_verdict(session: Session, analysis: SessionAnalysis) -> SessionVerdict:
    summary = analysis.summary
    gains, unranked = _gains(analysis)
    return SessionVerdict(
        summary.total_kernel_ns,
        summary.launch_count,
        len(summary.kernels),
        _by_kernel(summary),
        _by_kind(session, analysis),
        analysis.timeline.missing_reason,
        _by_region(session, summary.total_kernel_ns),
        gains,
        unranked,
        _not_measured(session, analysis),
    )
