"""Two sessions compared kernel by kernel: time, throughput, key counters, bound.

Kernels are matched by their full name (and by launch configuration where a
kernel ran with several in both sessions: their times differ by design). The change in time is of the median
duration; it is called noise when it is within the run-to-run spread of the
two sessions (the larger of the two spreads: IQR from four launches, max - min
below; thresholds.SPREAD_IQR_MIN_LAUNCHES; a session with one launch adds no
spread). With a single launch in each session there is no spread to judge by,
and the change is reported as measured with that caveat. Sessions from different GPUs, drivers or clocks are flagged.
The sessions compared as programs (step time, breakdown, findings gone and their gains) are analyze/program_diff.py.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Iterable

from kernelscope.analyze.analysis import DurationStats, SessionAnalysis, duration_stats
from kernelscope.analyze.program_diff import ProgramDiff
from kernelscope.model import Metric, Session

NOISE_FORMULA = "|median B - median A| <= max(spread A, spread B)"
FASTER, SLOWER, NOISE, SAME, ONLY_A, ONLY_B = "faster", "slower", "noise", "same", "only in A", "only in B"
# Within the spread, and the spread is larger than the kernel's median itself: its launches vary too much for any
# change to be told (an NCCL kernel's time holds its wait for the other ranks). Not called noise: +584% is no noise.
UNSTEADY = "unsteady"
UNSTEADY_FORMULA = "within the spread, and spread > max(median A, median B)"

# Counters compared for kernels the counter pass measured in both sessions (label, model name).
COMPARED_COUNTERS = (("DRAM bytes", "dram_bytes"), ("SM %", "sm_throughput_pct"), ("memory %", "memory_throughput_pct"),
                     ("DRAM %", "dram_throughput_pct"), ("tensor %", "tensor_pipe_pct"),
                     ("achieved occupancy %", "achieved_occupancy_pct"), ("registers/thread", "registers_per_thread"))


def change_pct(a: float | None, b: float | None) -> float | None:
    """(b - a) / a x 100; None when either is missing or a is zero."""
    if a is None or b is None or a == 0:
        return None
    return (b - a) / a * 100.0


@dataclass(frozen=True)
class CounterChange:
    label: str
    a: Metric | None
    b: Metric | None
    change_pct: float | None  # relative change, (b - a) / a x 100; None for a percentage (see change_pp)
    change_pp: float | None = None  # a percentage's change in percentage points, b - a (18.9% -> 19.4%: +0.5 pp)


@dataclass(frozen=True)
class KernelDiff:
    name: str
    short_name: str
    a: DurationStats | None
    b: DurationStats | None
    change_pct: float | None  # of the median duration; + is slower
    spread_ns: float | None  # the larger spread of the two sessions
    spread_basis: str
    verdict: str  # faster | slower | noise | same | only in A | only in B
    single_launch: bool  # a verdict without a spread to judge it by
    bound_a: str | None
    bound_b: str | None
    throughput: tuple[CounterChange, ...]  # FLOP/s, DRAM bytes/s
    counters: tuple[CounterChange, ...]
    config: str | None = None  # "grid / block" when the kernel is compared per launch configuration


@dataclass(frozen=True)
class DeviceNote:
    same_gpu: bool
    warning: str | None  # one sentence when the sessions ran on different GPUs, drivers or clocks


@dataclass(frozen=True)
class SessionDiff:
    kernels: tuple[KernelDiff, ...]  # by median time in A (B for new kernels), largest first
    device: DeviceNote
    total_a_ns: int
    total_b_ns: int
    total_change_pct: float | None
    program: ProgramDiff | None = None  # the two as programs (analyze/program_diff.py); None: not compared

    def slower_than(self, pct: float) -> tuple[KernelDiff, ...]:
        """Kernels slower by more than ``pct`` % and beyond the run-to-run spread."""
        return tuple(k for k in self.kernels if k.verdict == SLOWER and k.change_pct is not None
                     and k.change_pct > pct)


def _device_identity(s: Session) -> tuple[str | None, str | None, object]:
    d = s.device
    if d is None:
        return None, None, None
    return d.name, d.value("driver_version"), d.value("sm_clock_max_mhz") or d.value("sm_clock_max_khz")


def device_note(a: Session, b: Session) -> DeviceNote:
    (na, da, ca), (nb, db, cb) = _device_identity(a), _device_identity(b)
    if na is None or nb is None:
        return DeviceNote(False, "one session recorded no device, so it cannot be told whether both ran on the same "
                          "GPU")
    if na != nb:
        return DeviceNote(False, f"the sessions ran on different GPUs (A: {na}, B: {nb}); times and counters are not "
                          "comparable as a regression")
    diffs = [f"{what} {x} vs {y}" for what, x, y in (("driver", da, db), ("SM clock max", ca, cb))
             if x is not None and y is not None and x != y]
    if diffs:
        return DeviceNote(True, f"same GPU model, but {'; '.join(diffs)}: differences may come from that")
    return DeviceNote(True, None)


def _verdict(a: DurationStats, b: DurationStats) -> tuple[str, float | None, str, bool]:
    spreads = [s for s in (a.spread_ns, b.spread_ns) if s is not None]
    single = not spreads  # one launch in each: nothing to judge the change by
    spread = max(spreads) if spreads else None
    basis = " / ".join(dict.fromkeys(x.spread_basis for x in (a, b) if x.spread_ns is not None)) or \
        "one launch each: no spread"
    delta = b.median_ns - a.median_ns
    if delta == 0:
        return SAME, spread, basis, single
    if spread is not None and abs(delta) <= spread:
        return (UNSTEADY if spread > max(a.median_ns, b.median_ns) else NOISE), spread, basis, single
    return (SLOWER if delta > 0 else FASTER), spread, basis, single


def _metric_change(label: str, a: Metric | None, b: Metric | None) -> CounterChange:
    va = None if a is None or a.is_missing or not isinstance(a.value, (int, float)) else float(a.value)
    vb = None if b is None or b.is_missing or not isinstance(b.value, (int, float)) else float(b.value)
    if (a is not None and a.unit == "%") or (b is not None and b.unit == "%"):  # a relative change of a percentage
        return CounterChange(label, a, b, None, None if va is None or vb is None else vb - va)  # misleads: points
    return CounterChange(label, a, b, change_pct(va, vb))


Durations = tuple[list[int], list[int]]  # of the launches with a start time (trace pass), of every launch


def _groups(s: Session) -> dict[str, dict[tuple, Durations]]:
    """Kernel -> (grid, block) -> durations, in the order launches first ran; column-wise, per shape."""
    t = s.launch_table()
    every, traced = t.durations_by_shape()
    firsts = sorted((f, sid) for sid in range(len(t.shapes)) if (f := t.first_launch(sid)) is not None)
    out: dict[str, dict[tuple, Durations]] = {}
    for _, sid in firsts:
        sh = t.shapes[sid]
        tr, ev = out.setdefault(sh.kernel, {}).setdefault((sh.grid, sh.block), ([], []))
        tr += traced[sid]
        ev += every[sid]
    return out


def _merged(groups: Iterable[Durations]) -> Durations:
    tr: list[int] = []
    ev: list[int] = []
    for t, e in groups:
        tr += t
        ev += e
    return tr, ev


def _stats(durations: Durations) -> DurationStats:
    traced, every = durations
    if traced:
        return duration_stats(traced, "trace pass")
    return duration_stats(every, "counter pass (ncu replay, serialised)")


def _config_text(cfg: tuple) -> str:
    grid, block = cfg
    return f"{'x'.join(map(str, grid))} / {'x'.join(map(str, block))}"


def diff_sessions(a: SessionAnalysis, b: SessionAnalysis, session_a: Session, session_b: Session) -> SessionDiff:
    """Kernels matched by name; a kernel launched with several configurations in both sessions is compared
    per configuration (grid, block), since their times differ by design."""
    by_a = {k.kernel.name: k for k in a.kernels}
    by_b = {k.kernel.name: k for k in b.kernels}
    ga, gb = _groups(session_a), _groups(session_b)
    out = []
    for name in list(ga) + [n for n in gb if n not in ga]:
        ka, kb = by_a.get(name), by_b.get(name)
        short = (ka or kb).kernel.short_name
        ca, cb = ga.get(name, {}), gb.get(name, {})
        if len(ca) <= 1 and len(cb) <= 1:
            pairs = [(None, _merged(ca.values()), _merged(cb.values()))]
        else:
            pairs = [
                (cfg, ca.get(cfg, ([], [])), cb.get(cfg, ([], []))) for cfg in list(ca) + [c for c in cb if c not in ca]
            ]
        for cfg, la, lb in pairs:
            sa, sb = (_stats(la) if la[1] else None), (_stats(lb) if lb[1] else None)
            config = None if cfg is None else _config_text(cfg)
            if sa is None or sb is None:
                out.append(
                    KernelDiff(
                        name,
                        short,
                        sa,
                        sb,
                        None,
                        None,
                        "",
                        ONLY_A if sb is None else ONLY_B,
                        False,
                        ka.bound.bound if ka and la[1] else None,
                        kb.bound.bound if kb and lb[1] else None,
                        (),
                        (),
                        config,
                    )
                )
                continue
            verdict, spread, basis, single = _verdict(sa, sb)
            thr: tuple[CounterChange, ...] = ()
            counters: tuple[CounterChange, ...] = ()
            if cfg is None or (ka and ka.counter_launch and (ka.counter_launch.grid, ka.counter_launch.block) == cfg):
                thr = tuple(_metric_change(lab, ma, mb)
                            for (lab, ma), (_, mb) in zip(ka.throughput[:2], kb.throughput[:2]))
                if ka.counter_launch is not None and kb.counter_launch is not None:
                    counters = tuple(_metric_change(lab, ka.counter_launch.metrics.get(key),
                                                    kb.counter_launch.metrics.get(key))
                                     for lab, key in COMPARED_COUNTERS)
            out.append(KernelDiff(name, short, sa, sb, change_pct(sa.median_ns, sb.median_ns), spread, basis, verdict,
                                  single, ka.bound.bound, kb.bound.bound, thr, counters, config))
    out.sort(key=lambda k: -((k.a or k.b).median_ns * (k.a or k.b).launches))
    ta = sum(session_a.launch_table().duration_ns)
    tb = sum(session_b.launch_table().duration_ns)
    return SessionDiff(tuple(out), device_note(session_a, session_b), ta, tb, change_pct(ta, tb))


def only_kernels(d: SessionDiff, pattern: str) -> SessionDiff:
    """The kernels whose full or short name matches ``pattern`` (a regex; re.error if it is not one)."""
    rx = re.compile(pattern)
    kept = tuple(k for k in d.kernels if rx.search(k.name) or rx.search(k.short_name))
    return replace(d, kernels=kept)
