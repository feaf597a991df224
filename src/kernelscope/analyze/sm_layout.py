"""Block -> SM layout: where a launch's blocks ran and how evenly the SMs were kept busy.

Two views. Without instrumentation, ``computed_layout`` works out waves and the
tail from the launch (grid), the occupancy calculator (resident blocks per SM)
and the device's SM count: every figure is a derived Metric naming its formula,
labelled "computed from the launch, not measured". With block records
(``Launch.block_records``), ``measured_layout`` groups the recorded blocks by
SM, measures waves, residency and idle time per SM, and checks the records
(every block once, times within the launch); a failed check is data, never an
exception.
"""
from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from dataclasses import dataclass

from kernelscope.analyze.kernel_table import KernelSummary, launch_config
from kernelscope.analyze.occupancy import OccupancyResult
from kernelscope.model import Launch, Metric, Session
from kernelscope.model.names import short_kernel_name
from kernelscope.model.device import MAX_SM_COUNT
from kernelscope.model import collectors as collector

COMPUTED_LABEL = "computed from the launch, not measured"
CONCURRENT_FORMULA = "resident blocks per SM (occupancy calculator) x SM count"
WAVES_FORMULA = "grid blocks / concurrent blocks"
WAVE_COUNT_FORMULA = "ceil(grid blocks / concurrent blocks)"
TAIL_FORMULA = "grid blocks - (waves - 1) x concurrent blocks"
TAIL_IDLE_SMS_FORMULA = "SM count - min(blocks in the last wave, SM count)"
SLOT_USE_FORMULA = "100 x grid blocks / (waves x concurrent blocks)"
OVERHEAD_FORMULA = "100 x (median instrumented duration / median plain duration - 1), same kernel, grid and block"
SPREAD_FORMULA = "100 x (max - min) / median of the plain launches' durations"


@dataclass(frozen=True)
class ComputedLayout:
    """Waves and tail of one launch configuration, modelled from the launch alone."""

    blocks: int
    sm_count: int | None
    active_blocks_per_sm: int | None
    concurrent_blocks: Metric
    waves: Metric  # fractional: grid blocks / concurrent blocks
    wave_count: Metric  # whole waves, the last possibly partial
    last_wave_blocks: Metric
    last_wave_idle_slots: Metric
    last_wave_idle_sms: Metric  # a lower bound; equal when the scheduler spreads blocks one per SM first
    slot_use_pct: Metric  # share of block slots x waves that hold a block, if every block took as long
    label: str = COMPUTED_LABEL


def _derived(value: float | int, unit: str, name: str, formula: str) -> Metric:
    return Metric(value, unit, "derived", name, formula=formula)


def computed_layout(blocks: int, occupancy: OccupancyResult | None, occupancy_missing_reason: str | None,
                    sm_count: int | None) -> ComputedLayout:
    """``blocks`` from the grid; ``occupancy`` from analyze.occupancy; ``sm_count`` as the driver reported it."""
    names = ("concurrent blocks", "waves", "waves (whole)", "blocks in the last wave",
             "idle block slots in the last wave", "idle SMs in the last wave", "block slots used")
    units = ("block", "wave", "wave", "block", "block", "SM", "%")
    reason = None
    if occupancy is None:
        reason = f"no resident-blocks-per-SM figure: {occupancy_missing_reason or 'occupancy not calculated'}"
    elif occupancy.active_blocks_per_sm < 1:
        reason = "the occupancy calculator fits no block of this configuration on an SM"
    elif not sm_count:
        reason = "the device's SM count was not recorded"
    elif blocks < 1:
        reason = "the launch has no blocks"
    active = None if occupancy is None else occupancy.active_blocks_per_sm
    if reason is not None:
        missing = [Metric.missing(n, reason, "derived", u) for n, u in zip(names, units)]
        return ComputedLayout(blocks, sm_count, active, *missing)
    assert occupancy is not None and sm_count
    slots = active * sm_count  # type: ignore[operator]
    count = -(-blocks // slots)
    last = blocks - (count - 1) * slots
    return ComputedLayout(
        blocks, sm_count, active,
        concurrent_blocks=_derived(slots, "block", names[0], CONCURRENT_FORMULA),
        waves=_derived(blocks / slots, "wave", names[1], WAVES_FORMULA),
        wave_count=_derived(count, "wave", names[2], WAVE_COUNT_FORMULA),
        last_wave_blocks=_derived(last, "block", names[3], TAIL_FORMULA),
        last_wave_idle_slots=_derived(slots - last, "block", names[4], "concurrent blocks - blocks in the last wave"),
        last_wave_idle_sms=_derived(sm_count - min(last, sm_count), "SM", names[5], TAIL_IDLE_SMS_FORMULA),
        slot_use_pct=_derived(100.0 * blocks / (count * slots), "%", names[6], SLOT_USE_FORMULA),
    )


@dataclass(frozen=True)
class SMTimeline:
    """One SM's blocks, in start order, times relative to the launch's first recorded block start."""

    smid: int
    block_ids: tuple[int, ...]
    start_ns: tuple[int, ...]
    end_ns: tuple[int, ...]
    waves: int  # longest chain of blocks that each started after the previous one ended
    max_resident_blocks: int  # most blocks running at once
    busy_ns: int  # time with at least one block running
    head_idle_ns: int  # launch's first start -> this SM's first start
    gap_idle_ns: int  # idle between this SM's first start and last end
    tail_idle_ns: int  # this SM's last end -> launch's last end


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


@dataclass(frozen=True)
class MeasuredLayout:
    expected_blocks: int
    recorded_blocks: int
    sm_count: int | None
    sms: tuple[SMTimeline, ...]  # SMs that ran at least one valid block, by SM id
    idle_sm_count: int | None  # SM count - SMs that ran a block; None: SM count unknown
    idle_sm_ids: tuple[int, ...] | None  # named only when every recorded SM id is below the SM count
    span_ns: int | None  # last recorded end - first recorded start; None: no valid record
    launch_duration_ns: int  # the trace pass's (CUPTI) duration of the same launch
    waves: int  # most waves on any SM
    timer_step_ns: int | None  # smallest step between distinct recorded times: the observed timer granularity
    idle_ns: int  # SM-time inside the span with no block, summed over all SMs (whole span for idle SMs)
    tail_idle_ns: int  # the part of idle_ns after each SM's last block
    checks: tuple[Check, ...]
    problems: tuple[str, ...]  # what the reader found wrong with the buffer
    overhead: Metric
    overhead_noise: Metric  # the plain launches' own spread: an overhead smaller than it is not a measured slowdown


def _ids_text(ids: list[int], limit: int = 8, total: int | None = None) -> str:
    total = len(ids) if total is None else total
    head = ", ".join(str(i) for i in ids[:limit])
    return head + (f" and {total - limit:,} more" if total > limit else "")


def _first_missing(seen: Counter, expected: int, limit: int = 8) -> list[int]:
    """The first ``limit`` block ids in 0..expected-1 with no record, found without walking the whole grid."""
    out: list[int] = []
    b = 0
    while b < expected and len(out) < limit:
        if b not in seen:
            out.append(b)
        b += 1
    return out


def _sm_timeline(smid: int, rows: list[tuple[int, int, int]], t0: int, t_last: int) -> SMTimeline:
    rows = sorted(rows, key=lambda r: (r[1], r[2]))  # (block id, start, end), start order
    by_end = sorted(range(len(rows)), key=lambda i: rows[i][2])
    ends = [rows[i][2] for i in by_end]
    wave = [0] * len(rows)
    best, k = 0, 0
    for i, (_, start, _) in enumerate(rows):  # blocks ending by this start already have their wave
        while k < len(by_end) and ends[k] <= start:
            best = max(best, wave[by_end[k]])
            k += 1
        wave[i] = best + 1
    events = sorted([(r[1], 1) for r in rows] + [(r[2], -1) for r in rows], key=lambda e: (e[0], e[1]))
    live = peak = 0
    for _, step in events:
        live += step
        peak = max(peak, live)
    busy, cur_s, cur_e = 0, rows[0][1], rows[0][2]
    for _, s, e in rows[1:]:
        if s > cur_e:
            busy += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    busy += cur_e - cur_s
    first, last = rows[0][1], max(r[2] for r in rows)
    return SMTimeline(smid, tuple(r[0] for r in rows), tuple(r[1] - t0 for r in rows), tuple(r[2] - t0 for r in rows),
                      max(wave), peak, busy, first - t0, (last - first) - busy, t_last - last)


def _timer_step(recorded: list[int]) -> int | None:
    times = sorted(set(recorded))
    steps = [b - a for a, b in zip(times, times[1:]) if b > a]
    return min(steps) if steps else None


def measured_layout(launch: Launch, sm_count: int | None, overhead: Metric | None = None,
                    overhead_noise: Metric | None = None) -> MeasuredLayout:
    rec = launch.block_records
    if rec is None:
        raise ValueError("this launch has no block records; use computed_layout")
    expected = rec.expected_blocks
    checks: list[Check] = []
    if rec.grid != launch.grid:
        checks.append(Check("recorder grid is the launch grid", False,
                            f"the buffer was sized for grid {rec.grid}, the trace pass saw {launch.grid}"))
    seen = Counter(rec.block_id)
    outside = sorted(b for b in seen if not 0 <= b < expected)
    n_missing = expected - (len(seen) - len(outside))  # counted, not listed: a grid may have 2**62 blocks
    missing = _first_missing(seen, expected)
    twice = sorted(b for b, n in seen.items() if n > 1)
    checks.append(Check("every block recorded", not n_missing,
                        f"{expected - n_missing:,} of {expected:,} blocks" +
                        (f"; missing: {_ids_text(missing, total=n_missing)}" if n_missing else "")))
    checks.append(Check("each block recorded once", not twice,
                        "no duplicates" if not twice else f"recorded more than once: {_ids_text(twice)}"))
    if outside:
        checks.append(Check("block ids within the grid", False, f"outside 0..{expected - 1}: {_ids_text(outside)}"))
    bad = [b for b, s, e in zip(rec.block_id, rec.start_ns, rec.end_ns) if not 0 < s <= e]
    checks.append(Check("end after start", not bad, "every record" if not bad
                        else f"a zero time, or an end before the start (left out of timelines): {_ids_text(bad)}"))
    if rec.nsmid is not None:  # %smid need not be contiguous: %nsmid, not the SM count, bounds it
        high = sorted({s for s in rec.smid if not 0 <= s < rec.nsmid})
        checks.append(Check("SM ids below %nsmid", not high,
                            f"all below {rec.nsmid}" if not high else f"outside 0..{rec.nsmid - 1}: {_ids_text(high)}"))

    valid = [(b, sm, s, e) for b, sm, s, e in zip(rec.block_id, rec.smid, rec.start_ns, rec.end_ns) if 0 < s <= e]
    step = _timer_step([t for v in valid for t in v[2:]])
    tol = step or 0
    span = None
    sms: list[SMTimeline] = []
    if valid:
        t0, t1 = min(v[2] for v in valid), max(v[3] for v in valid)
        span = t1 - t0
        ok = span <= launch.duration_ns + tol
        checks.append(Check("records within the launch's duration", ok,
                            f"records span {span:,} ns; the trace pass timed the launch at {launch.duration_ns:,} ns "
                            f"(tolerance {tol:,} ns: the observed timer step)"))
        if rec.clock_offset_ns is not None and launch.start_ns is not None:
            lo, hi = launch.start_ns - tol, launch.start_ns + launch.duration_ns + tol
            out = [b for b, _, s, e in valid if s + rec.clock_offset_ns < lo or e + rec.clock_offset_ns > hi]
            checks.append(Check("records inside the launch's time span", not out,
                                "all inside" if not out else f"outside the launch: {_ids_text(out)}"))
        by_sm: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
        for b, sm, s, e in valid:
            by_sm[sm].append((b, s, e))
        sms = [_sm_timeline(sm, rows, t0, t1) for sm, rows in sorted(by_sm.items())]
    else:
        checks.append(Check("records within the launch's duration", False, "no record with a valid start and end"))
    used = {t.smid for t in sms}
    idle_count = None if not sm_count else max(0, sm_count - len(used))
    idle_ids = None
    if sm_count and sm_count <= MAX_SM_COUNT and all(0 <= u < sm_count for u in used):
        idle_ids = tuple(i for i in range(sm_count) if i not in used)
    idle = sum(t.head_idle_ns + t.gap_idle_ns + t.tail_idle_ns for t in sms) + (idle_count or 0) * (span or 0)
    return MeasuredLayout(
        expected_blocks=expected, recorded_blocks=len(rec), sm_count=sm_count, sms=tuple(sms), idle_sm_count=idle_count,
        idle_sm_ids=idle_ids,
        span_ns=span, launch_duration_ns=launch.duration_ns, waves=max((t.waves for t in sms), default=0),
        timer_step_ns=step, idle_ns=idle, tail_idle_ns=sum(t.tail_idle_ns for t in sms),
        checks=tuple(checks), problems=tuple(rec.problems),
        overhead=overhead if overhead is not None else Metric.missing(
            "instrumentation overhead", "not computed for this launch", "derived", "%"),
        overhead_noise=overhead_noise if overhead_noise is not None else Metric.missing(
            "plain launches' spread", "not computed for this launch", "derived", "%"),
    )


def instrumentation_overhead(session: Session, launch: Launch) -> Metric:
    """How much slower the instrumented launches of this kernel ran than its plain ones, in percent."""
    instrumented, plain = _same_config_durations(session, launch)
    name = f"instrumented vs plain duration ({len(instrumented)} vs {len(plain)} launches)"
    status = session.collectors.get(collector.INSTRUMENT)
    unattached = [] if status is None else status.details.get("unattached") or []
    if not isinstance(unattached, list):  # free-form details from a file: anything at all
        unattached = []
    if any(isinstance(u, dict) and u.get("kernel") in (launch.kernel, short_kernel_name(launch.kernel))
           for u in unattached):
        return Metric.missing(name, "some instrumented launches of this kernel could not be matched to the trace, "
                                    "so plain and instrumented launches cannot be told apart", "derived", "%")
    if not instrumented or not plain:
        return Metric.missing(name, "the session has no plain launch of this kernel with the same grid and block "
                                    "to compare with", "derived", "%")
    ratio = statistics.median(instrumented) / statistics.median(plain)
    return Metric(100.0 * (ratio - 1.0), "%", "derived", name, formula=OVERHEAD_FORMULA)


def plain_duration_spread(session: Session, launch: Launch) -> Metric:
    """How much the plain launches of this kernel (same grid and block) vary among themselves, in percent."""
    plain = _same_config_durations(session, launch)[1]
    name = f"plain launches' spread ({len(plain)} launches)"
    if len(plain) < 2:
        return Metric.missing(name, "fewer than two plain launches of this kernel with the same grid and block",
                              "derived", "%")
    return Metric(100.0 * (max(plain) - min(plain)) / statistics.median(plain), "%", "derived", name,
                  formula=SPREAD_FORMULA)


def _same_config_durations(session: Session, launch: Launch) -> tuple[list[int], list[int]]:
    """Durations of the instrumented and of the plain launches with ``launch``'s kernel, grid and block."""
    t = session.launch_table()
    same = {
        i for i, s in enumerate(t.shapes) if (s.kernel, s.grid, s.block) == (launch.kernel, launch.grid, launch.block)
    }
    instrumented, plain = [], []
    for i, (sid, d) in enumerate(zip(t.shape, t.duration_ns)):
        if sid in same:
            det = t.details.get(i)
            (instrumented if det is not None and det.block_records is not None else plain).append(d)
    return instrumented, plain


def instrumented_launches(session: Session, kernel: str) -> list[Launch]:
    return session.detailed_launches(kernel, "block_records")



@dataclass(frozen=True)
class ProtonSMs:
    """Where no block recorder ran but phase scopes did: the SMs of the blocks one launch's scopes recorded."""

    blocks_recorded: int
    grid_blocks: int
    distinct_sms: int
    recorder: str = "Proton"  # who recorded the scopes: Proton, or kernelscope.cuh


@dataclass(frozen=True)
class SMLayoutData:
    """What panel 2 draws for one kernel: the measured layout of its last instrumented launch, or (none
    instrumented) the waves and tail computed from its configuration with the most time."""

    instrumented_launches: int  # launches with block records; the last is measured
    measured: MeasuredLayout | None
    theoretical_blocks_per_sm: int | None  # occupancy calculator, the measured launch's own configuration
    computed: ComputedLayout | None  # only when nothing was measured
    configs: int  # launch configurations of the kernel
    proton_sms: ProtonSMs | None  # only when nothing was measured


def sm_layout_data(session: Session, k: KernelSummary, sm_count: int | None) -> SMLayoutData:
    recorded = instrumented_launches(session, k.name)
    if recorded:
        x = recorded[-1]  # after any warm-up
        # the instrumented launch's own configuration: its registers and shared memory may differ from the
        # plain launches' (another compiled variant)
        theoretical = next((cs.occupancy.active_blocks_per_sm for cs in k.configs
                            if cs.config == launch_config(x) and cs.occupancy), None)
        m = measured_layout(x, sm_count, instrumentation_overhead(session, x), plain_duration_spread(session, x))
        return SMLayoutData(len(recorded), m, theoretical, None, len(k.configs), None)
    c = k.configs[0]
    layout = computed_layout(c.config.blocks, c.occupancy, c.occupancy_missing_reason, sm_count)
    scoped = [x for x in session.detailed_launches(k.name, "scopes")
              if x.scopes.warps and all(w.smid is not None for w in x.scopes.warps)]  # type: ignore[union-attr]
    proton = None
    if scoped:
        last = scoped[-1]
        ws = last.scopes.warps  # type: ignore[union-attr]
        source = last.scopes.source  # type: ignore[union-attr]
        proton = ProtonSMs(len({w.block_id for w in ws}), last.grid[0] * last.grid[1] * last.grid[2],
                           len({w.smid for w in ws}), "Proton" if source == "proton" else source)
    return SMLayoutData(0, None, None, layout, len(k.configs), proton)
