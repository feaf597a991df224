"""Live GPU samples summarised: mean and peak per field, throttling, and clock hygiene.

Pure functions over a Session's samples. A sample is "busy" when a kernel ran
in its window (the time since the previous sample of the device); a busy sample
taken while the clocks were held back is flagged, so a timing taken then is
not silently mixed in with the others.
"""
from __future__ import annotations

import bisect
import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from kernelscope.model import Launch, Sample, Session
from kernelscope.model.launch_table import TimedLaunch

# The one threshold for "clocks far below their maximum": an SM clock under
# this fraction of the device's maximum SM clock flags the sample.
CLOCK_LOW_FRACTION = 0.80


@dataclass(frozen=True)
class ThrottleReason:
    bit: int
    name: str
    holds_clocks_back: bool  # False only for "idle": low clocks with nothing to run are no measurement problem
    meaning: str


# NVML clocks-event (throttle) reason bits, as nvml.h defines them.
THROTTLE_REASONS: tuple[ThrottleReason, ...] = (
    ThrottleReason(0x001, "gpu_idle", False, "nothing is running, so the clocks drop"),
    ThrottleReason(0x002, "applications_clocks_setting", True, "clocks are held at the applications-clocks setting"),
    ThrottleReason(0x004, "sw_power_cap", True, "the driver lowers clocks to stay under the power limit"),
    ThrottleReason(0x008, "hw_slowdown", True, "hardware slowdown (temperature, power brake or power supply)"),
    ThrottleReason(0x010, "sync_boost", True, "clocks follow the slowest GPU of a sync-boost group"),
    ThrottleReason(0x020, "sw_thermal_slowdown", True, "the driver lowers clocks to stay under a temperature limit"),
    ThrottleReason(0x040, "hw_thermal_slowdown", True, "hardware lowers clocks because the GPU is too hot"),
    ThrottleReason(0x080, "hw_power_brake_slowdown", True, "an external power brake lowers the clocks"),
    ThrottleReason(0x100, "display_clock_setting", True, "clocks follow the display clock setting"),
)
_BY_BIT = {r.bit: r for r in THROTTLE_REASONS}

# Fields summarised, in display order; the second name is the sample field holding its ceiling.
SUMMARY_FIELDS: tuple[tuple[str, str | None], ...] = (
    ("gpu_utilization_pct", None),
    ("memory_utilization_pct", None),
    ("sm_activity_pct", None),
    ("sm_occupancy_pct", None),
    ("tensor_activity_pct", None),
    ("dram_bandwidth_util_pct", None),
    ("memory_used_bytes", "memory_total_bytes"),
    ("sm_clock_mhz", "sm_clock_max_mhz"),
    ("memory_clock_mhz", "memory_clock_max_mhz"),
    ("power_w", "power_limit_w"),
    ("temperature_c", None),
    ("pcie_tx_bytes_per_s", None),
    ("pcie_rx_bytes_per_s", None),
)


def decode_throttle_reasons(mask: int) -> tuple[str, ...]:
    """Bitmask -> reason names; bits nvml.h does not define here keep their value."""
    names, bit = [], 1
    while bit <= mask:
        if mask & bit:
            r = _BY_BIT.get(bit)
            names.append(r.name if r else f"unknown_0x{bit:x}")
        bit <<= 1
    return tuple(names)


def limiting_reasons(mask: int | None) -> tuple[str, ...]:
    """The reasons in the mask that hold the clocks back while work runs."""
    if not isinstance(mask, int):
        return ()
    idle = {r.name for r in THROTTLE_REASONS if not r.holds_clocks_back}
    return tuple(n for n in decode_throttle_reasons(mask) if n not in idle)


LOW_CLOCK_FLAG = f"SM clock below {CLOCK_LOW_FRACTION:.0%} of its maximum"


def low_clock(sample: Sample) -> bool:
    """Whether this sample's SM clock is far below the device's maximum SM clock."""
    now, top = _num(sample.value("sm_clock_mhz")), _num(sample.value("sm_clock_max_mhz"))
    return now is not None and top is not None and top > 0 and now < CLOCK_LOW_FRACTION * top


def sample_flags(sample: Sample) -> tuple[str, ...]:
    """Why a measurement taken at this sample should not be trusted as-is (empty: nothing seen)."""
    flags = []
    reasons = limiting_reasons(sample.value("throttle_reasons"))
    if reasons:
        flags.append("throttled: " + ", ".join(reasons))
    if low_clock(sample):
        flags.append(LOW_CLOCK_FLAG)
    return tuple(flags)


@dataclass(frozen=True)
class FieldStats:
    key: str
    unit: str
    source: str
    raw_name: str
    count: int  # samples with a value
    mean: float | None
    peak: float | None
    minimum: float | None
    limit: float | None  # the device's ceiling for this field when NVML reports one
    missing_reason: str | None  # why samples lack it (first reason seen)
    series: tuple[float | None, ...]


@dataclass(frozen=True)
class SampleWindow:
    """One sample placed against the kernel timeline."""

    index: int
    t_ns: int | None
    window_start_ns: int | None
    kernels: tuple[tuple[str, int], ...]  # (kernel name, ns it ran inside the window), longest first
    busy: bool
    flags: tuple[str, ...]


@dataclass(frozen=True)
class GpuStatsSummary:
    device_index: int
    samples: int  # summarised: those whose window overlaps the trace (all, without a trace)
    outside_trace: int  # kept in the session, not summarised: taken before the trace began or after it ended
    span_ns: int | None
    interval_ms_median: float | None
    fields: tuple[FieldStats, ...]
    throttle_counts: tuple[tuple[str, int, int], ...]  # (reason, samples with it, busy samples with it)
    windows: tuple[SampleWindow, ...]
    busy_samples: int
    flagged_samples: int
    on_timeline: bool  # samples have session-clock times (a trace gave the origin)
    trace_end_ns: int | None  # session clock: the end of the last traced event
    used: tuple[Sample, ...]  # the summarised samples, in time order

    def field(self, key: str) -> FieldStats | None:
        return next((f for f in self.fields if f.key == key), None)


def _num(v: object) -> float | None:
    """A number, or None (also for NaN, which older session files may hold from GPM)."""
    if not isinstance(v, (int, float)) or isinstance(v, bool) or not math.isfinite(v):
        return None
    return float(v)


def field_stats(samples: Sequence[Sample], key: str, limit_key: str | None) -> FieldStats | None:
    ms = [s.metrics.get(key) for s in samples]
    present = [m for m in ms if m is not None]
    if not present:
        return None
    series = tuple(None if m is None else _num(m.value) for m in ms)
    values = [v for v in series if v is not None]
    reason = next((m.missing_reason for m in present if m.is_missing), None)
    limits = [_num(s.value(limit_key)) for s in samples] if limit_key else []
    limit = next((v for v in reversed(limits) if v is not None), None)
    return FieldStats(
        key=key, unit=present[0].unit, source=present[0].source, raw_name=present[0].raw_name, count=len(values),
        mean=statistics.fmean(values) if values else None, peak=max(values) if values else None,
        minimum=min(values) if values else None, limit=limit, missing_reason=reason, series=series,
    )


def kernels_in_windows(
    launches: Sequence[Launch] | Sequence[TimedLaunch], windows: Sequence[tuple[int, int]]
) -> list[tuple[tuple[str, int], ...]]:
    """For each [start, end] window (session clock), the kernels that ran in it and for how long."""
    ordered = sorted((x for x in launches if x.start_ns is not None), key=lambda x: x.start_ns)  # untimed: nowhere
    starts = [x.start_ns for x in ordered]
    longest = max((x.duration_ns for x in ordered), default=0)
    out = []
    for lo, hi in windows:
        busy: dict[str, int] = {}
        for x in ordered[bisect.bisect_left(starts, lo - longest):bisect.bisect_right(starts, hi)]:
            overlap = min(hi, x.start_ns + x.duration_ns) - max(lo, x.start_ns)
            if overlap > 0 or (overlap == 0 and x.duration_ns == 0 and lo <= x.start_ns <= hi):
                busy[x.kernel] = busy.get(x.kernel, 0) + max(overlap, 0)
        out.append(tuple(sorted(busy.items(), key=lambda kv: (-kv[1], kv[0]))))
    return out


def device_samples(session: Session, device_index: int | None = None) -> tuple[int, list[Sample]]:
    """The device to summarise (the session's device by default) and its samples in time order."""
    if device_index is None:
        indexes = sorted({s.device_index for s in session.samples})
        own = session.device.index if session.device is not None else None
        device_index = own if own in indexes else (indexes[0] if indexes else 0)
    samples = sorted((s for s in session.samples if s.device_index == device_index), key=lambda s: s.wall_time_ns)
    return device_index, samples


def trace_end_ns(session: Session) -> int | None:
    t = session.launch_table()
    ends = [s + d for s, d in zip(t.start_ns, t.duration_ns) if s is not None]
    ends += [a.start_ns + a.duration_ns for a in session.activities]
    ends += [r.cpu_start_ns + r.cpu_duration_ns for r in session.regions]
    return max(ends) if ends else None


def within_trace(samples: Sequence[Sample], end_ns: int) -> list[Sample]:
    """Samples whose window (since the previous sample) overlaps [0, end_ns] on the session clock."""
    out, prev = [], None
    for s in samples:
        if s.t_ns is not None and s.t_ns >= 0 and (prev is None or prev < end_ns):
            out.append(s)
        prev = s.t_ns
    return out


def summarize_gpu_stats(session: Session, device_index: int | None = None) -> GpuStatsSummary | None:
    """None when the session holds no samples for the device."""
    device_index, every = device_samples(session, device_index)
    if not every:
        return None
    on_timeline = all(s.t_ns is not None for s in every)
    end = trace_end_ns(session) if on_timeline else None
    samples = (within_trace(every, end) or every) if end is not None else every
    times = [s.t_ns if on_timeline else s.wall_time_ns for s in samples]
    gaps = [b - a for a, b in zip(times, times[1:])]
    bounds = [(times[i - 1] if i else times[0], t) for i, t in enumerate(times)]
    launches = session.launch_table().timed(device_index)
    kernels = kernels_in_windows(launches, bounds) if on_timeline else [() for _ in samples]
    windows = []
    for i, s in enumerate(samples):
        util = _num(s.value("gpu_utilization_pct"))
        busy = bool(kernels[i]) if on_timeline and launches else bool(util)
        windows.append(SampleWindow(
            index=i, t_ns=s.t_ns, window_start_ns=bounds[i][0] if on_timeline else None, kernels=kernels[i],
            busy=busy, flags=sample_flags(s) if busy else (),
        ))
    counts: dict[str, list[int]] = {}
    for s, w in zip(samples, windows):
        mask = s.value("throttle_reasons")
        for name in decode_throttle_reasons(mask) if isinstance(mask, int) else ():
            c = counts.setdefault(name, [0, 0])
            c[0] += 1
            c[1] += int(w.busy)
    fields = tuple(f for f in (field_stats(samples, k, lim) for k, lim in SUMMARY_FIELDS) if f is not None)
    return GpuStatsSummary(
        device_index=device_index, samples=len(samples), outside_trace=len(every) - len(samples),
        span_ns=times[-1] - times[0] if len(times) > 1 else None,
        interval_ms_median=statistics.median(gaps) / 1e6 if gaps else None, fields=fields,
        throttle_counts=tuple((n, c[0], c[1]) for n, c in sorted(counts.items(), key=lambda kv: -kv[1][0])),
        windows=tuple(windows), busy_samples=sum(w.busy for w in windows),
        flagged_samples=sum(bool(w.flags) for w in windows), on_timeline=on_timeline, trace_end_ns=end,
        used=tuple(samples),
    )


@dataclass(frozen=True)
class ClockHygiene:
    """What the clocks did during one measurement; ``status`` is ok, flagged or unknown."""

    status: str
    samples: int
    sm_clock_min_mhz: float | None
    sm_clock_mean_mhz: float | None
    sm_clock_max_mhz: float | None  # the device's maximum, as NVML reports it
    throttle_reasons: tuple[str, ...]
    flags: tuple[str, ...]


def clock_hygiene(samples: Sequence[Sample], start_ns: int | None = None, end_ns: int | None = None) -> ClockHygiene:
    """Judge a measurement by the samples taken during it (session clock, inclusive).

    The GPU is taken to be busy throughout (a timed loop), so a low clock
    counts even without a throttle reason. Callers such as bench or calibrate
    pass the measurement's start and end; without bounds every sample counts.
    """
    inside = [s for s in samples if (start_ns is None or (s.t_ns is not None and s.t_ns >= start_ns))
              and (end_ns is None or (s.t_ns is not None and s.t_ns <= end_ns))]
    clocks = [v for v in (_num(s.value("sm_clock_mhz")) for s in inside) if v is not None]
    tops = [v for v in (_num(s.value("sm_clock_max_mhz")) for s in inside) if v is not None]
    reasons: dict[str, None] = {}
    flags: dict[str, None] = {}
    for s in inside:
        mask = s.value("throttle_reasons")
        reasons.update(dict.fromkeys(decode_throttle_reasons(mask) if isinstance(mask, int) else ()))
        flags.update(dict.fromkeys(sample_flags(s)))
    status = "unknown" if not inside else ("flagged" if flags else "ok")
    return ClockHygiene(
        status=status, samples=len(inside), sm_clock_min_mhz=min(clocks) if clocks else None,
        sm_clock_mean_mhz=statistics.fmean(clocks) if clocks else None, sm_clock_max_mhz=tops[-1] if tops else None,
        throttle_reasons=tuple(reasons), flags=tuple(flags),
    )
