"""Panel 2, Block -> SM layout: which SM ran which block and when, measured where the
kernel was instrumented; waves and tail computed from the launch otherwise, and
labelled as such."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from kernelscope.analyze.sm_layout import (
    COMPUTED_LABEL, CONCURRENT_FORMULA, SLOT_USE_FORMULA, TAIL_FORMULA, TAIL_IDLE_SMS_FORMULA, WAVES_FORMULA,
    OVERHEAD_FORMULA, SPREAD_FORMULA, ComputedLayout, MeasuredLayout, SMLayoutData, SMTimeline,
)
from kernelscope.model import Metric
from kernelscope.render.fmt import bar, duration, plural, waves as waves_text
from kernelscope.render.fit import fitted_panel

SHADES = " ▁▂▃▄▅▆▇█"


def _v(m: Metric, fmt: str = "{:,}") -> str:
    return f"N/A: {m.missing_reason}" if m.is_missing else fmt.format(m.value)


def _computed_view(c: ComputedLayout, width: int) -> list:
    if c.waves.is_missing:
        return [Text(f"{plural(c.blocks, 'block')}. Waves and tail: N/A: {c.waves.missing_reason}")]
    slots = int(c.concurrent_blocks.value)  # type: ignore[arg-type]
    count = int(c.wave_count.value)  # type: ignore[arg-type]
    last = int(c.last_wave_blocks.value)  # type: ignore[arg-type]
    waves = float(c.waves.value)  # type: ignore[arg-type]
    parts: list = [Text(f"{plural(c.blocks, 'block')} / ({c.active_blocks_per_sm} resident per SM × {c.sm_count} SMs = "
                        f"{slots:,} at once) = {waves_text(waves)} waves → {plural(count, 'wave')}")]
    bar_width = max(10, min(50, width - 40))
    shown = list(range(count)) if count <= 6 else [0, 1, -1, count - 2, count - 1]
    for i in shown:
        if i < 0:
            parts.append(Text(f"  … {count - 4} more full waves", style="dim"))
            continue
        n = last if i == count - 1 else slots
        parts.append(Text(f"  wave {i + 1:>3} {bar(100.0 * n / slots, bar_width)} {n:,} of {slots:,} slots"))
    parts.append(Text(tail_text(c)))
    parts.append(Text(f"Block slots used: {_v(c.slot_use_pct, '{:.1f}%')} if every block takes as long"))
    parts.append(Text(f"derived: concurrent = {CONCURRENT_FORMULA}; waves = {WAVES_FORMULA}, rounded up for "
                      f"whole waves; last wave = {TAIL_FORMULA}; idle SMs >= {TAIL_IDLE_SMS_FORMULA}; "
                      f"slots used = {SLOT_USE_FORMULA}",
                      style="dim"))
    return parts


def tail_text(c: ComputedLayout) -> str:
    """The last wave in words: its blocks, idle slots and the SMs left without a block (or that it has a block
    for every SM)."""
    last = int(c.last_wave_blocks.value)  # type: ignore[arg-type]
    idle_slots = c.last_wave_idle_slots
    slots = _v(idle_slots) + " slots" if idle_slots.is_missing else plural(int(idle_slots.value), "slot")  # type: ignore[arg-type]
    out = f"Last (tail) wave: {plural(last, 'block')}, {slots} idle, "
    sms = c.last_wave_idle_sms
    if not sms.is_missing and sms.value == 0:
        return out + f"enough for each of the {c.sm_count} SMs to get a block"
    return out + (f"at least {_v(sms)} of {c.sm_count} SMs without a block (exactly that many if the scheduler "
                  "spreads blocks one per SM first)")


def concurrency_strip(t: SMTimeline, span: int, width: int) -> str:
    """One character per time column: the most blocks running at once on this SM within it (· none, + ten or more)."""
    out = []
    for col in range(width):
        lo, hi = span * col // width, max(span * (col + 1) // width, span * col // width + 1)
        events = sorted([(max(s, lo), 1) for s, e in zip(t.start_ns, t.end_ns) if s < hi and e > lo]
                        + [(min(e, hi), -1) for s, e in zip(t.start_ns, t.end_ns) if s < hi and e > lo])
        live = n = 0
        for _, step in events:  # at equal times an end (-1) sorts before a start: a handover is not overlap
            live += step
            n = max(n, live)
        out.append("·" if n == 0 else (str(n) if n < 10 else "+"))
    return "".join(out)


MEASURED_NOTE = ("instrument: each block's %smid and %globaltimer at its start and end (block recorder); derived: "
                 "waves = longest chain of blocks on one SM each starting after the previous ended; idle = span - "
                 "time with a block running, per SM; overhead = ")


def _sm_grid(m: MeasuredLayout, width: int) -> list:
    """One cell per SM id: blocks it ran, shaded against the busiest SM; · for none."""
    counts = {s.smid: len(s.block_ids) for s in m.sms}
    most = max(counts.values())
    n = max(m.sm_count or 0, max(counts) + 1)
    per_row = max(8, min(64, width - 16))
    lines: list = [Text(f"Blocks per SM (█ = {most}, · none), by %smid:")]
    for lo in range(0, n, per_row):
        hi = min(n, lo + per_row)
        cells = "".join("·" if counts.get(i, 0) == 0 else SHADES[max(1, round(8 * counts[i] / most))]
                        for i in range(lo, hi))
        lines.append(Text(f"  {lo:>4}-{hi - 1:<4} {cells}"))
    return lines


def idle_sms_text(m: MeasuredLayout) -> str:
    """The SMs that ran no block of the launch: how many and which, or that every SM ran one."""
    if m.idle_sm_count is None:
        return "the SM count was not recorded"
    if m.idle_sm_count == 0:
        return "every SM ran a block"
    idle = f"{m.idle_sm_count} of {m.sm_count} ran no block"
    if m.idle_sm_ids:
        idle += ": " + ", ".join(str(i) for i in m.idle_sm_ids[:12]) + (" …" if len(m.idle_sm_ids) > 12 else "")
    return idle


def _measured_view(m: MeasuredLayout, theoretical: int | None, width: int, max_strips: int) -> list:
    t = Table(show_header=False, box=None, padding=(0, 1), expand=True)
    t.add_column("", style="bold", no_wrap=True, min_width=18)
    t.add_column("Value", overflow="fold")
    t.add_row("Blocks recorded", f"{plural(m.recorded_blocks, 'row')} for {plural(m.expected_blocks, 'block')}")
    idle = idle_sms_text(m)
    t.add_row("SMs used", f"{len(m.sms)}; {idle}")
    peak = max((s.max_resident_blocks for s in m.sms), default=0)
    calc = "N/A" if theoretical is None else str(theoretical)
    t.add_row("Waves (measured)", f"up to {m.waves} on one SM; up to {plural(peak, 'block')} resident at once on "
              f"one SM (occupancy calculator: {calc})")
    span = "N/A: no valid record" if m.span_ns is None else duration(m.span_ns)
    step = "N/A" if m.timer_step_ns is None else duration(m.timer_step_ns)
    t.add_row("Time span", f"records {span}; trace pass {duration(m.launch_duration_ns)} (timer step {step})")
    if m.span_ns:
        t.add_row("SM idle time", sm_idle_text(m))
    t.add_row("Overhead", overhead_text(m))
    parts: list = [t]
    checks = Table.grid(padding=(0, 1))  # a grid, so that a long detail wraps under its own text
    checks.add_column(no_wrap=True)
    checks.add_column(overflow="fold")
    for c in m.checks:
        checks.add_row(f"  {'✓' if c.ok else '✗'}", Text(f"{c.name}: {c.detail}", style="" if c.ok else "bold"))
    if m.checks:
        parts.append(checks)
    for p in m.problems:
        parts.append(Text(f"  ✗ buffer: {p}", style="bold"))
    if m.sms and m.span_ns:
        parts += _sm_grid(m, width)
        strip_w = max(10, width - 40)
        by_idle = sorted(m.sms, key=lambda s: (-(s.head_idle_ns + s.gap_idle_ns + s.tail_idle_ns), s.smid))
        chosen = sorted(by_idle[:max_strips], key=lambda s: s.smid)
        what = "every SM" if len(chosen) == len(m.sms) else f"the {len(chosen)} SMs with the most idle time"
        parts.append(Text(f"Blocks running over the span ({what}; · idle, digits = blocks at once):"))
        for s in chosen:
            parts.append(Text(f"  SM {s.smid:>4} {concurrency_strip(s, m.span_ns, strip_w)} {len(s.block_ids)} blk, "
                              f"tail idle {duration(s.tail_idle_ns)}"))
    parts.append(Text(MEASURED_NOTE + OVERHEAD_FORMULA + "; spread = " + SPREAD_FORMULA, style="dim"))
    return parts



def sm_idle_text(m) -> str:
    """Idle SM-time over the measured span (SMs with blocks and SMs without), and after each SM's last block."""
    sm_total = (len(m.sms) + (m.idle_sm_count or 0)) * m.span_ns
    return (f"{duration(m.idle_ns)} of {duration(sm_total)} SM-time ({100.0 * m.idle_ns / sm_total:.1f}%); "
            f"after each SM's last block {duration(m.tail_idle_ns)}")


def overhead_text(m) -> str:
    """The instrumentation's cost in kernel time, against the spread of the plain launches."""
    o, noise = m.overhead, m.overhead_noise
    if o.is_missing:
        return f"N/A: {o.missing_reason}"
    over = f"{o.value:+.1f}% kernel time, {o.raw_name}, durations measured by the trace pass (CUPTI)"
    if not noise.is_missing:
        within = abs(o.value) <= noise.value  # type: ignore[operator]
        over += (f"; the plain launches alone spread {noise.value:.1f}%: "
                 + ("within that, so no slowdown is measured" if within else "more than that spread"))
    return over

class SMLayoutPanel:
    """Draws ``analyze.sm_layout.SMLayoutData`` (computed by analyze.report.build_report)."""

    def __init__(self, layout: SMLayoutData, label: str, max_strips: int = 16) -> None:
        self.layout, self.label, self.max_strips = layout, label, max_strips

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        d = self.layout
        width = options.max_width - 4
        if d.measured is not None:
            parts = _measured_view(d.measured, d.theoretical_blocks_per_sm, width, self.max_strips)
            if d.instrumented_launches > 1:
                parts.insert(0, Text(f"{d.instrumented_launches} instrumented launches; showing the last", style="dim"))
            title = f"Block → SM layout · {self.label} · measured"
        else:
            assert d.computed is not None
            parts = _computed_view(d.computed, width)
            if d.configs > 1:
                parts.insert(0, Text(f"Configuration 1 of {d.configs} (most time)", style="dim"))
            parts.append(Text("Not measured: no launch of this kernel was instrumented with the block recorder.",
                              style="dim"))
            if (p := d.proton_sms) is not None:
                parts.append(Text(f"{p.recorder} scopes of one launch recorded the SM of {p.blocks_recorded:,} "
                                  f"of its {p.grid_blocks:,} blocks: {p.distinct_sms:,} distinct SMs "
                                  "(instrument: %smid per block)", style="dim"))
            title = f"Block → SM layout · {self.label} · {COMPUTED_LABEL}"
        yield fitted_panel(parts, title, options.max_width)
