"""Panel 10's data: per kernel, duration and spread, throughput, % of peak, roofline
position, bound and ranked recommendations, with every missing part named."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from kernelscope.analyze.arch import UnknownArchError
from kernelscope.analyze.bound import Bound, classify
from kernelscope.analyze.collectives import CollectiveAnalysis
from kernelscope.analyze.counters import counter_launches
from kernelscope.analyze.host_syncs import sync_waits_by_kernel
from kernelscope.analyze.libraries import library_of
from kernelscope.analyze.occupancy import arch_for_device
from kernelscope.analyze.recommend import KernelRecommendations, Recommendation, rank_session, recommend
from kernelscope.analyze.vendor_rules import RuleComparison, compare_with_nvidia
from kernelscope.analyze.roofline import (Ceilings, DeclaredTotals, RooflinePoint, counter_flops, declared_totals,
                                         make_point)
from kernelscope.analyze.rules import RuleContext
from kernelscope.analyze.rules.base import NO_COUNTERS
from kernelscope.analyze.kernel_table import KernelSummary, SessionSummary, summarize
from kernelscope.analyze.thresholds import HOST_STALL_GAP_NS, SPREAD_IQR_MIN_LAUNCHES, VERDICT_MIN_GAIN_PCT
from kernelscope.analyze.timeline import Timeline, build_timeline
from kernelscope.model import Launch, Metric, Session
from kernelscope.model.launch_table import LaunchTable

PEAK_METRICS = (("SM (ncu)", "sm_throughput_pct"), ("memory (ncu)", "memory_throughput_pct"),
                ("DRAM (ncu)", "dram_throughput_pct"), ("tensor pipe (ncu)", "tensor_pipe_pct"))


@dataclass(frozen=True)
class DurationStats:
    launches: int
    median_ns: float
    min_ns: int
    max_ns: int
    q1_ns: float
    q3_ns: float
    source: str  # "trace pass" | "counter pass (ncu replay, serialised)"

    @property
    def spread_ns(self) -> float | None:
        """Run-to-run spread: IQR from SPREAD_IQR_MIN_LAUNCHES launches, max - min below, None for one launch."""
        if self.launches >= SPREAD_IQR_MIN_LAUNCHES:
            return self.q3_ns - self.q1_ns
        return float(self.max_ns - self.min_ns) if self.launches > 1 else None

    @property
    def spread_basis(self) -> str:
        if self.launches >= SPREAD_IQR_MIN_LAUNCHES:
            return "IQR"
        return "max - min" if self.launches > 1 else "one launch: no spread"


def duration_stats(durations: Sequence[int], source: str) -> DurationStats:
    xs = sorted(durations)  # sorted once: statistics.median and quantiles would each sort a million again
    q1, _, q3 = _quartiles_inclusive(xs) if len(xs) > 1 else (xs[0], xs[0], xs[0])
    return DurationStats(len(xs), float(_median_sorted(xs)), xs[0], xs[-1], q1, q3, source)


def _median_sorted(xs: Sequence[int]) -> float:
    """statistics.median of already sorted data (the same formula)."""
    n = len(xs)
    return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2


def _quartiles_inclusive(xs: Sequence[int]) -> list[float]:
    """statistics.quantiles(xs, n=4, method="inclusive") of already sorted data (the same formula)."""
    m = len(xs) - 1
    out = []
    for i in range(1, 4):
        j, delta = divmod(i * m, 4)
        out.append((xs[j] * (4 - delta) + xs[j + 1] * delta) / 4)
    return out


def _duration_stats_of(traced: list[int], every: list[int]) -> DurationStats:
    if traced:
        return duration_stats(traced, "trace pass")
    return duration_stats(every, "counter pass (ncu replay, serialised)")


def _durations_by_kernel(table: LaunchTable) -> dict[str, tuple[list[int], list[int]]]:
    """Per kernel: durations of the launches with a start time (trace pass), and of every launch, sorted."""
    return table.durations_by_kernel()


@dataclass(frozen=True)
class KernelAnalysis:
    kernel: KernelSummary
    durations: DurationStats
    counter_launch: Launch | None  # the first launch the counter pass measured
    profiled_launches: int
    throughput: tuple[tuple[str, Metric], ...]
    pct_of_peak: tuple[tuple[str, Metric], ...]
    roofline: RooflinePoint
    bound: Bound
    recommendations: KernelRecommendations
    missing: tuple[tuple[str, str], ...]  # (what could not be shown, why)
    verdict: str = ""  # one line, plain words: what bounds it and what to do first (verdict())
    # NVIDIA's rule results beside kernelscope's findings, per cause, with why they differ (vendor_rules.py)
    nvidia_comparison: tuple[RuleComparison, ...] = ()


@dataclass(frozen=True)
class SessionAnalysis:
    summary: SessionSummary
    kernels: tuple[KernelAnalysis, ...]  # summary order: most time first
    timeline: Timeline
    ceilings: Ceilings
    regions: tuple[RooflinePoint, ...]  # regions with declared work
    declared: dict[str, DeclaredTotals]
    ranked: tuple[Recommendation, ...]  # every kernel's, by session gain

    def kernel(self, name: str) -> KernelAnalysis:
        """By full name, else the first (most time) with this short name; KeyError if none."""
        for k in self.kernels:
            if k.kernel.name == name:
                return k
        for k in self.kernels:
            if name in (k.kernel.short_name, k.kernel.label):
                return k
        raise KeyError(name)


def _rate(label: str, amount: float | None, time_ns: float | None, unit: str, formula: str,
          why: str) -> tuple[str, Metric]:
    if amount is None or not time_ns:
        return label, Metric.missing(label, why or "no duration was recorded", "derived", unit)
    return label, Metric(amount / (time_ns * 1e-9), unit, "derived", label, formula=formula)


def _declared_for(declared: dict[str, DeclaredTotals], session: Session, kernel: str) -> DeclaredTotals | None:
    return next((d for d in declared.values() if d.per_launch_kernel == kernel), None)


def _mean_declared(session: Session, region: str, attr: str) -> float | None:
    vals = [getattr(w, attr) for w in session.declared_work if w.region == region and getattr(w, attr) is not None]
    return sum(vals) / len(vals) if vals else None


def _kernel(session: Session, k: KernelSummary, timeline: Timeline, ceilings: Ceilings,
            declared: dict[str, DeclaredTotals], arch, sm_count: int | None,
            durations: tuple[list[int], list[int]], sync_waits: dict[str, tuple[int, ...]] | None = None
            ) -> KernelAnalysis:
    profiled = counter_launches(session, k.name)
    x = profiled[0] if profiled else None
    durs = _duration_stats_of(*durations)
    syncs = None if sync_waits is None else sync_waits.get(k.name, ())
    # launch overhead, as the wall-time breakdown classes it: gaps up to the host-stall threshold in which no
    # synchronize returned (after one, the GPU waited on the host: analyze/host_syncs.py)
    gaps_before = tuple(timeline.gaps_before(k.name))
    gaps = ([g for i, g in enumerate(gaps_before) if g <= HOST_STALL_GAP_NS and not syncs[i]] if syncs
            else [g for g in gaps_before if g <= HOST_STALL_GAP_NS])
    bound = classify(x, durations[0], gaps)
    missing: list[tuple[str, str]] = []
    if x is None:
        missing.append(("counters (% of peak, counter-based bound, memory and stall rules)", NO_COUNTERS))
    decl = _declared_for(declared, session, k.name)
    counter_dur = x.metrics.get("duration_ns") if x is not None else None
    cdur = float(counter_dur.value) if counter_dur is not None and not counter_dur.is_missing else None
    # FLOPs per launch: declared work first (exact when declared), then the SASS counters.
    cflops = counter_flops(x) if x is not None else Metric.missing("FLOPs", NO_COUNTERS, "derived", "FLOP")
    dflops = _mean_declared(session, decl.region, "flops") if decl else None
    if dflops is not None:
        flops = Metric(dflops, "FLOP", "user", f"kernelscope.region({decl.region!r}, flops=...)")
        flop_rate = _rate("compute", dflops, durs.median_ns, "FLOP/s", "declared FLOPs / median duration", "")
    else:
        flops = cflops
        flop_rate = _rate("compute", None if cflops.is_missing else float(cflops.value), cdur, "FLOP/s",
                          "counter FLOPs (SASS and tensor-path counters) / counter-pass duration",
                          str(cflops.missing_reason))
    dram = x.metrics.get("dram_bytes") if x is not None else None
    if dram is not None and not dram.is_missing:
        nbytes = dram
        byte_rate = _rate("DRAM", float(dram.value), cdur, "byte/s", "dram__bytes.sum / gpu__time_duration.sum",
                          "the counter pass recorded no duration")
    elif decl and (db := _mean_declared(session, decl.region, "bytes")) is not None:
        nbytes = Metric(db, "byte", "user", f"kernelscope.region({decl.region!r}, bytes=...)")
        byte_rate = _rate("bytes (declared)", db, durs.median_ns, "byte/s", "declared bytes / median duration", "")
    else:
        nbytes = Metric.missing("DRAM bytes", NO_COUNTERS if x is None else "the counter pass has no dram__bytes.sum",
                                "ncu", "byte")
        byte_rate = ("DRAM", Metric.missing("DRAM byte rate", str(nbytes.missing_reason), "derived", "byte/s"))
    throughput = [flop_rate, byte_rate]
    if decl:
        for unit, total in decl.units.items():
            per = total / decl.occurrences
            throughput.append(_rate(unit, per, durs.median_ns, f"{unit}/s", f"declared {unit} / median duration", ""))
    if flops.is_missing:
        missing.append(("FLOPs (FLOP/s, roofline)", str(flops.missing_reason)))
    if nbytes.is_missing:
        missing.append(("DRAM bytes (byte rate, roofline)", str(nbytes.missing_reason)))
    tensor = any(not m.is_missing and float(m.value) > 0 for key, m in (x.metrics.items() if x else ())
                 if key.startswith("mma_")) if x is not None else True
    time_metric = counter_dur
    if dflops is not None or cdur is None:  # declared FLOPs go with the real run's time
        time_metric = Metric(durs.median_ns, "ns", "cupti" if durs.source == "trace pass" else "ncu",
                             f"median kernel duration ({durs.source})")
    point = make_point(k.label, "kernel", flops, nbytes, time_metric, tensor, ceilings)
    peaks: list[tuple[str, Metric]] = []
    for label, key in PEAK_METRICS:
        m = x.metrics.get(key) if x is not None else None
        peaks.append((label, m if m is not None else Metric.missing(key, NO_COUNTERS, "ncu", "%")))
    bw = ceilings.memory_bandwidth
    rate = byte_rate[1]
    if not bw.is_missing and not rate.is_missing and nbytes.source == "ncu":
        peaks.append(("DRAM vs measured copy bandwidth", Metric(100.0 * float(rate.value) / float(bw.value), "%",
                      "derived", "DRAM bytes/s", formula="DRAM bytes/s / measured copy bandwidth x 100")))
    else:
        peaks.append(("DRAM vs measured copy bandwidth", Metric.missing(
            "DRAM vs measured copy bandwidth", ceilings.missing_reason or str(rate.missing_reason or bw.missing_reason),
            "derived", "%")))
    peaks.append(("FLOP/s vs measured roof", point.pct_of_roof))
    if ceilings.missing_reason:
        missing.append(("measured ceilings (roofs, % of measured peak)", ceilings.missing_reason))
    ctx = RuleContext(k, x, bound, arch, sm_count, ceilings, gaps_before, durs.median_ns, syncs, library_of(k.name))
    recs = recommend(ctx)
    return KernelAnalysis(k, durs, x, len(profiled), tuple(throughput), tuple(peaks), point, bound, recs,
                          tuple(missing), verdict(bound, x, dict(peaks), recs), compare_with_nvidia(recs, x))


def _num(x: Launch | None, key: str) -> float | None:
    m = x.metrics.get(key) if x is not None else None
    return None if m is None or m.is_missing or not isinstance(m.value, (int, float)) else float(m.value)


def verdict(bound: Bound, x: Launch | None, peaks: dict[str, Metric], recs: KernelRecommendations) -> str:
    """One line in plain words: what bounds the kernel, with its number, and the first fix (or that
    no finding predicts much). Every number is one the panel shows."""
    b = bound.bound
    if b == "memory-bound":
        bw = peaks.get("DRAM vs measured copy bandwidth")
        if bound.limiter == "DRAM" and bw is not None and not bw.is_missing:
            head = f"memory-bound at {float(bw.value):.0f}% of the measured copy bandwidth"
        else:
            mem = _num(x, "memory_throughput_pct")
            head = f"memory-bound ({bound.limiter or 'memory'}" + (f" at {mem:.0f}% of peak)" if mem else ")")
    elif b == "compute-bound":
        sm, tensor = _num(x, "sm_throughput_pct"), _num(x, "tensor_pipe_pct")
        head = f"compute-bound: SM at {sm:.0f}% of peak" if sm is not None else "compute-bound"
        if tensor is not None and tensor >= 1:
            head += f", tensor pipe {tensor:.0f}% busy"
    elif b == "launch-bound":
        ev = dict(bound.evidence)
        dur, gap = ev.get("median duration (trace pass)"), ev.get("median idle gap before launch")
        head = (f"launch-bound: it runs {dur / 1e3:.1f} µs and the GPU waits {gap / 1e3:.1f} µs for each launch"
                if isinstance(dur, (int, float)) and isinstance(gap, (int, float)) else "launch-bound")
    elif b == "occupancy-limited":
        warps = _num(x, "active_warps_per_scheduler")
        head = ("occupancy-limited: " + (f"{warps:.1f} warps per scheduler to hide latency" if warps is not None
                                         else "too few warps to hide latency"))
    elif b == "latency-bound":
        busy = _num(x, "issue_slots_busy_pct")
        head = "latency-bound: warps wait" + (f", issue slots busy {busy:.0f}%" if busy is not None else "")
    else:
        return f"bound unknown: {bound.reason.split(' and ')[0]}"
    ranked = [r for r in recs.recommendations if r.gain_pct is not None]
    if ranked and ranked[0].gain_pct >= VERDICT_MIN_GAIN_PCT:
        top = ranked[0]
        who = "" if top.source == "kernelscope" else " (NVIDIA's rule)"
        return (
            f"{head}; first fix: {top.finding.title or top.finding.rule}{who}, about {top.gain_pct:.0f}% of its time"
        )
    # estimates that are not gains of the kernel (NVIDIA's local or unconfirmed ones) are named, never called
    # "little left": the verdict must not contradict the recommendations listed under it
    other = [r for r in recs.recommendations if r.gain_pct is None and (r.local_pct or r.vendor_pct or 0) >=
             VERDICT_MIN_GAIN_PCT]
    if other:
        top = max(other, key=lambda r: r.local_pct or r.vendor_pct or 0.0)
        est = top.local_pct if top.local_pct is not None else top.vendor_pct
        kind = "of one unit's work, not of the kernel" if top.local_pct is not None else "not confirmed by kernelscope"
        return (f"{head}; no finding estimates {VERDICT_MIN_GAIN_PCT:.0f}% or more of the kernel's time (NVIDIA's "
                f"{top.finding.title or top.finding.rule}: {est:.0f}%, {kind})")
    return f"{head}; no finding predicts {VERDICT_MIN_GAIN_PCT:.0f}% or more: little left to gain here"


def analyze_session(session: Session, ceilings: Ceilings | None = None,
                    summary: SessionSummary | None = None,
                    collectives: CollectiveAnalysis | None = None) -> SessionAnalysis:
    """Every kernel's analysis, the timeline and the declared regions; ``summary`` and ``collectives`` when the
    caller has them (else made here)."""
    ceilings = ceilings or Ceilings.none()
    summary = summary or summarize(session)
    timeline = build_timeline(session, collectives)
    declared = declared_totals(session)
    arch = None
    if session.device is not None:
        try:
            arch = arch_for_device(session.device)
        except UnknownArchError:
            arch = None
    by_kernel = _durations_by_kernel(session.launch_table())
    sync_waits = sync_waits_by_kernel(session, timeline)  # one pass for every kernel
    kernels = tuple(_kernel(session, k, timeline, ceilings, declared, arch, summary.sm_count, by_kernel[k.name],
                            sync_waits) for k in summary.kernels)
    regions = []
    for d in declared.values():
        flops = (Metric(d.flops, "FLOP", "user", f"kernelscope.region({d.region!r}, flops=...)") if d.flops is not None
                 else Metric.missing("FLOPs", "the region declared no flops", "user", "FLOP"))
        nbytes = (Metric(d.bytes, "byte", "user", f"kernelscope.region({d.region!r}, bytes=...)") if d.bytes is not None
                  else Metric.missing("bytes", "the region declared no bytes", "user", "byte"))
        t = (
            Metric(d.gpu_ns, "ns", "cupti", "sum of the durations of the kernels inside the declared occurrences")
            if d.gpu_ns
            else Metric.missing(
                "region GPU time", "the trace has no GPU span for its declared occurrences", "cupti", "ns"
            )
        )
        regions.append(make_point(d.region, "region", flops, nbytes, t, True, ceilings))
    ranked = rank_session([k.recommendations for k in kernels])
    return SessionAnalysis(summary, kernels, timeline, ceilings, tuple(regions), declared, ranked)
