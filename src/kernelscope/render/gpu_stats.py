"""Panel 9, GPU stats: the sampled series over the run, a summary, and the samples
placed against the kernel timeline (which kernels ran while each was taken)."""
from __future__ import annotations

from typing import Sequence

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from kernelscope.analyze.gpu_stats import CLOCK_LOW_FRACTION, FieldStats, GpuStatsSummary
from kernelscope.model.names import distinct_short_names, short_kernel_name
from kernelscope.model import Launch, Session
from kernelscope.model.launch_table import TimedLaunch
from kernelscope.render.fmt import plural, size_bytes
from kernelscope.model import collectors as collector

BLOCKS = " ▁▂▃▄▅▆▇█"  # index 0: nothing; 1..8: one to eight eighths

LABELS = {
    "gpu_utilization_pct": "GPU utilization", "memory_utilization_pct": "memory busy", "sm_activity_pct": "SM activity",
    "sm_occupancy_pct": "SM occupancy", "tensor_activity_pct": "tensor activity",
    "dram_bandwidth_util_pct": "DRAM bandwidth", "memory_used_bytes": "memory used", "sm_clock_mhz": "SM clock",
    "memory_clock_mhz": "memory clock", "power_w": "power", "temperature_c": "temperature",
    "pcie_tx_bytes_per_s": "PCIe TX", "pcie_rx_bytes_per_s": "PCIe RX",
}
LABEL_WIDTH, SCALE_WIDTH = 15, 16  # columns of the timeline strip around the series
STRIP_FIELDS = ("gpu_utilization_pct", "sm_activity_pct", "tensor_activity_pct", "dram_bandwidth_util_pct",
                "sm_clock_mhz", "power_w", "temperature_c", "memory_used_bytes")


def throttle_text(reason: str, count: int, samples: int, busy: int) -> str:
    """'HW slowdown in 2 of 4 samples (1 while kernels ran)'."""
    return f"{reason} in {count} of {plural(samples, 'sample')} ({busy} while kernels ran)"


def outside_text(k: int) -> str:
    """The samples taken outside the trace, which the summary leaves out."""
    return (f"{plural(k, 'more sample')}, taken before the trace began or after it ended, {'are' if k > 1 else 'is'} "
            "kept in the session but not summarised")


def clocks_text(s: GpuStatsSummary) -> str:
    """The line on the clocks of the samples taken while kernels ran: how many were throttled or slow, or that
    none was ('' without such samples)."""
    if s.flagged_samples:
        return (f"! {s.flagged_samples} of {plural(s.busy_samples, 'sample')} taken while kernels ran "
                f"{'was' if s.flagged_samples == 1 else 'were'} throttled or had the SM clock below "
                f"{CLOCK_LOW_FRACTION:.0%} of its maximum: kernel times from those windows may be slow")
    if s.busy_samples:
        return (f"Clocks: no throttling and no SM clock below {CLOCK_LOW_FRACTION:.0%} of its maximum in "
                f"{'the ' if s.busy_samples > 1 else ''}{plural(s.busy_samples, 'sample')} taken while kernels ran")
    return ""


def value_text(v: float | None, unit: str) -> str:
    if v is None:
        return "N/A"
    if unit == "B":
        return size_bytes(v)
    if unit == "B/s":
        return size_bytes(v) + "/s"
    if unit == "C":
        return f"{v:.0f} °C"
    return f"{v:.0f} {unit}".rstrip()


def sparkline(values: Sequence[float | None], lo: float, hi: float) -> str:
    """One character per value; None is '·'; values are clipped to [lo, hi]."""
    span = hi - lo
    out = []
    for v in values:
        if v is None:
            out.append("·")
        else:
            frac = 0.0 if span <= 0 else min(1.0, max(0.0, (v - lo) / span))
            out.append(BLOCKS[1 + round(frac * 7)])
    return "".join(out)


def bucket(times: Sequence[int], values: Sequence[float | None], t0: int, t1: int, width: int) -> list[float | None]:
    """``width`` equal columns over [t0, t1]. A column shows the mean of the samples in it, else the
    next sample's value: a sample covers the time since the previous one. NaN: after the last sample."""
    sums, counts, seen = [0.0] * width, [0] * width, [False] * width
    span = max(1, t1 - t0)
    for t, v in zip(times, values):
        col = min(width - 1, max(0, (t - t0) * width // span))
        seen[col] = True
        if v is not None:
            sums[col] += v
            counts[col] += 1
    out: list[float | None] = [float("nan")] * width
    nxt: float | None = float("nan")
    for i in range(width - 1, -1, -1):
        if seen[i]:
            nxt = sums[i] / counts[i] if counts[i] else None
        out[i] = nxt
    return out


def kernel_busy(launches: Sequence[Launch] | Sequence[TimedLaunch], t0: int, t1: int, width: int) -> list[float]:
    """Fraction of each column's time with at least one kernel running (overlaps merged)."""
    span = max(1, t1 - t0)
    edges = [t0 + span * i // width for i in range(width + 1)]
    busy = [0] * width
    merged: list[list[int]] = []
    for x in sorted((x for x in launches if x.start_ns is not None), key=lambda x: x.start_ns):  # untimed: nowhere
        s, e = x.start_ns, x.start_ns + x.duration_ns
        if merged and s <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], e)
        else:
            merged.append([s, e])
    for s, e in merged:
        first = max(0, (s - t0) * width // span)
        last = min(width - 1, (e - t0) * width // span)
        for c in range(first, last + 1):
            busy[c] += max(0, min(e, edges[c + 1]) - max(s, edges[c]))
    return [b / max(1, edges[i + 1] - edges[i]) for i, b in enumerate(busy)]


def field_scale(f: FieldStats) -> tuple[float, float]:
    """The range a field's strip is drawn against: 0-100 for a share, 0 to its limit where it has one, else the
    samples' own minimum to peak."""
    if f.unit == "%":
        return 0.0, 100.0
    if f.limit:
        return 0.0, f.limit
    lo, hi = (f.minimum or 0.0), (f.peak or 0.0)
    return (lo, hi) if hi > lo else (0.0, hi or 1.0)


def stats_title(s: GpuStatsSummary) -> str:
    """The panel's title: the samples it summarises (those inside the trace; the others are counted in a note)
    and their measured spacing, which is not the sampler's set interval (sampler_text): the sampler also reads
    once as the workload ends."""
    apart = f", median {s.interval_ms_median:.0f} ms apart" if s.interval_ms_median is not None else ""
    over = f", over {s.span_ns / 1e9:.2f} s" if s.span_ns else ""
    return f"GPU stats · device {s.device_index} · {plural(s.samples, 'sample')}{apart}{over}"  # 80 columns hold it


def sampler_text(d: dict) -> str:
    """What the sampler says of itself (its collector details): every reading it took, of every device, inside
    the trace or not, and what they cost."""
    n = d.get("samples")
    readings = plural(n, "reading") if isinstance(n, int) and not isinstance(n, bool) else "N/A readings"

    def num(key: str, spec: str) -> str:  # free-form details from a file: a number, or N/A
        v = d.get(key, 0)
        return format(v, spec) if isinstance(v, (int, float)) and not isinstance(v, bool) else "N/A"

    return (f"Sampler (measured): {readings} in all (set to one every {num('interval_ms', 'g')} ms, and one as "
            f"the workload ended), {num('sampler_thread_cpu_ms', '.1f')} ms of sampler-thread CPU in all; wall time "
            f"per reading {num('read_ms_mean', '.2f')} ms mean, {num('read_ms_max', '.2f')} ms max (waits for the "
            f"Python GIL included); GPM: {d.get('gpm', 'N/A')}")


class GpuStatsPanel:
    def __init__(self, session: Session, summary: GpuStatsSummary, max_rows: int = 12) -> None:
        self.session, self.summary, self.max_rows = session, summary, max_rows

    def _title(self) -> str:
        return stats_title(self.summary)

    def _cost(self) -> list[Text]:
        out = []
        if self.summary.outside_trace:
            out.append(Text(outside_text(self.summary.outside_trace), style="dim"))
        st = self.session.collectors.get(collector.SAMPLER)
        d = st.details if st else {}
        if "read_ms_mean" in d:
            out.append(Text.from_markup(sampler_text(d), style="dim"))  # d's strings are markup-escaped
        return out

    def _summary_table(self, wide: bool) -> tuple[Table, list[Text]]:
        """Narrow terminals drop the ceiling column (the strip's scales show it) and name only the collector."""
        names = ("Field", "Mean", "Min", "Peak", "Ceiling", "Samples", "Source") if wide else \
            ("Field", "Mean", "Min", "Peak", "Samples", "Source")
        t = Table(box=None, header_style="bold", padding=(0, 1), show_edge=False)
        for name in names:
            t.add_column(name, justify="left" if name in ("Field", "Source") else "right", no_wrap=name != "Source",
                         overflow="fold")
        partly: dict[str, list[str]] = {}  # reason -> fields that lack a value in some samples
        never: dict[str, list[str]] = {}  # reason -> fields with no value in any sample
        n = self.summary.samples
        for f in self.summary.fields:
            label = LABELS.get(f.key, f.key)
            src = f"{f.source}: {f.raw_name}" if wide else f.source
            if f.count == 0:  # the reason goes under the table: in a number column it would squeeze the others
                never.setdefault(f.missing_reason or "no reason recorded", []).append(label)
                cells = [Text("N/A", style="dim"), "", ""]
            else:
                if f.count < n and f.missing_reason:
                    partly.setdefault(f.missing_reason, []).append(label)
                cells = [value_text(f.mean, f.unit), value_text(f.minimum, f.unit), value_text(f.peak, f.unit)]
            if wide:
                cells.append(value_text(f.limit, f.unit) if f.limit is not None and f.count else "")
            t.add_row(label, *cells, f"{f.count}/{n}", src)
        notes = [Text.from_markup(f"N/A in every sample ({', '.join(fields)}): {reason}", style="dim")
                 for reason, fields in never.items()]
        notes += [Text.from_markup(f"N/A in some samples ({', '.join(fields)}): {reason}", style="dim")
                  for reason, fields in partly.items()]
        notes += self._memory_total_note() if wide else []  # narrow: no ceiling column to explain
        return t, notes

    def _memory_total_note(self) -> list[Text]:
        """NVML's total (the memory-used ceiling) and CUDA's (the header) differ by what the driver reserves."""
        used = self.summary.field("memory_used_bytes")
        cuda_total = self.session.device.value("total_memory_bytes") if self.session.device else None
        if used is None or used.limit is None or not isinstance(cuda_total, (int, float)) or cuda_total == used.limit:
            return []
        return [Text(f"memory used: the ceiling is NVML's total ({value_text(used.limit, used.unit)}, with what the "
                     f"driver reserves); the header's {value_text(cuda_total, used.unit)} is CUDA's (cuDeviceTotalMem)",
                     style="dim")]

    def _throttle_lines(self) -> list[Text]:
        s = self.summary
        out = []
        if s.throttle_counts:
            parts = [throttle_text(n, c, s.samples, b) for n, c, b in s.throttle_counts]
            out.append(Text("Clock event reasons: " + "; ".join(parts)))
        elif s.field("sm_clock_mhz") is not None:
            out.append(Text("Clock event reasons: none reported"))
        if s.flagged_samples:
            out.append(Text(clocks_text(s) + " (marked ! below)", style="bold yellow"))
        elif s.busy_samples:
            out.append(Text(clocks_text(s)))
        return out

    def _strip(self, width: int) -> Table:
        s = self.summary
        t = Table.grid(padding=(0, 1))
        t.add_column(no_wrap=True, style="bold", width=LABEL_WIDTH)
        t.add_column(no_wrap=True, width=width)
        t.add_column(no_wrap=True, style="dim", width=SCALE_WIDTH, overflow="ellipsis")
        samples = s.used
        times = [x.t_ns if s.on_timeline else x.wall_time_ns for x in samples]
        t0, t1 = (min(0, times[0]) if s.on_timeline else times[0]), max(times[-1], s.trace_end_ns or times[-1])
        if s.on_timeline:
            launches = self.session.launch_table().timed(s.device_index)
            busy = kernel_busy(launches, t0, t1, width)
            t.add_row(
                "kernels", sparkline([b if b > 0 else None for b in busy], 0, 1).replace("·", " "), "busy 0–100 %"
            )
        for key in STRIP_FIELDS:
            f = s.field(key)
            if f is None:
                continue
            if f.count == 0:
                why = Text.from_markup(f"N/A: {f.missing_reason}", style="dim")
                why.no_wrap = False  # the reason wraps in the strip's no-wrap column, never cut
                t.add_row(LABELS[key], why, "")
                continue
            lo, hi = field_scale(f)
            cols = bucket(times, f.series, t0, t1, width)
            line = "".join(" " if v is not None and v != v else sparkline([v], lo, hi) for v in cols)
            t.add_row(LABELS[key], line, f"{value_text(lo, f.unit)}–{value_text(hi, f.unit)}")
        flags = bucket(times, [1.0 if w.flags else 0.0 for w in s.windows], t0, t1, width)
        t.add_row("flagged", "".join("!" if v and v == v else " " for v in flags), "! = see above")
        left = f"{t0 / 1e9:.3f} s"
        right = f"{t1 / 1e9:.3f} s"
        t.add_row("", f"{left}{right:>{max(1, width - len(left))}}",
                  "session clock" if s.on_timeline else "since 1st sample")
        return t

    def _samples_lines(self) -> list:
        s = self.summary
        samples = s.used
        n = len(samples)
        if n > self.max_rows:
            flagged = [w.index for w in s.windows if w.flags][: self.max_rows // 2]
            rest = self.max_rows - len(flagged)
            even = [round(i * (n - 1) / max(1, rest - 1)) for i in range(rest)]
            picks = sorted(set(flagged) | set(even))
        else:
            picks = list(range(n))
        # the readings keep their columns; the kernel names wrap under their own column, never cut
        t = Table.grid(padding=(0, 1))
        t.add_column(no_wrap=True)
        t.add_column(overflow="fold")
        t.add_row(Text(f"{'t':>9} {'GPU':>5} {'SM MHz':>6} {'power':>6} {'temp':>6}  ", style="bold"),
                  Text("kernels that ran since the previous sample", style="bold"))
        labels = distinct_short_names(sh.kernel for sh in self.session.launch_table().shapes)
        for i in picks:
            x, w = samples[i], s.windows[i]
            when = f"{x.t_ns / 1e9:.3f} s" if x.t_ns is not None else "N/A"
            names = [labels.get(k) or short_kernel_name(k) for k, _ in w.kernels]
            ks = ", ".join(names[:3]) + (f" +{len(names) - 3} more" if len(names) > 3 else "") if names else "(none)"
            line = (f"{when:>9} {value_text(as_number(x.value('gpu_utilization_pct')), '%'):>5} "
                    f"{value_text(as_number(x.value('sm_clock_mhz')), ''):>6} "
                    f"{value_text(as_number(x.value('power_w')), 'W'):>6} "
                    f"{value_text(as_number(x.value('temperature_c')), 'C'):>6} {'!' if w.flags else ' '}")
            style = "yellow" if w.flags else ""
            t.add_row(Text(line, style=style), Text.from_markup(ks, style=style))
        out: list = [t]
        if len(picks) < n:
            out.append(
                Text(f"{len(picks)} of {n} samples shown: flagged ones first, the rest evenly spaced", style="dim")
            )
        return out

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        inner = max(40, options.max_width - 4)  # panel border and padding
        table, notes = self._summary_table(wide=inner >= 110)
        parts: list = [table, *notes, Text(""), *self._throttle_lines()]
        parts += self._cost()
        strip = max(10, inner - LABEL_WIDTH - SCALE_WIDTH - 2)
        parts += [Text(""), Text("Against the kernel timeline", style="bold"), self._strip(strip), Text("")]
        parts += self._samples_lines()
        yield Panel(Group(*parts), title=self._title(), title_align="left")


def as_number(v: object) -> float | None:
    """A sample's reading as a float, or None when it is not a number (absent, text, true/false or NaN)."""
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v else None
