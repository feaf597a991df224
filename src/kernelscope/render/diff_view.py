"""`kernelscope diff`: two sessions as programs (step time, breakdown, findings gone with their estimated and
measured gains), then kernel by kernel, changes in %, noise called out; `diff --json` the same as JSON."""
from __future__ import annotations

from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.panel import Panel
from rich.table import Table

from kernelscope.analyze.diff import FASTER, NOISE, NOISE_FORMULA, SLOWER, UNSTEADY, UNSTEADY_FORMULA, SessionDiff
from kernelscope.analyze.program_diff import (ERROR_FORMULA, GONE, MEASURED_GAIN_FORMULA, NEW, PER_STEP_FORMULA,
                                              REMAINS, REPLAYED, STEP_TIME_FORMULA, ProgramDiff, StepTime)
from kernelscope.analyze.thresholds import FINDING_GONE_BELOW_PCT
from kernelscope.model.names import distinct_short_names
from kernelscope.render.fit import Column, fit_tables
from kernelscope.render.fmt import duration, plural
from kernelscope.render.kernel_analysis import number, rate_cell

_VERDICT_STYLE = {FASTER: "green", SLOWER: "red", NOISE: "dim", UNSTEADY: "yellow"}
_BOUND = {"memory-bound": "memory", "compute-bound": "compute", "latency-bound": "latency",
          "occupancy-limited": "occupancy", "launch-bound": "launch", "unknown": "unknown"}


def _name(k, label: str) -> str:
    """The kernel's label (its short name, told apart from others of the same short name), with the launch
    configuration when the kernel is compared per configuration; never shortened: it wraps."""
    cfg = f" [{k.config.replace('x1x1', '').replace('x1 ', ' ')}]" if k.config else ""
    return label + cfg


def pct(v: float | None) -> str:
    return "N/A" if v is None else f"{v:+.1f}%"


class DiffView:
    def __init__(self, diff: SessionDiff, name_a: str, name_b: str, fail_pct: float | None = None) -> None:
        self.diff, self.name_a, self.name_b, self.fail_pct = diff, name_a, name_b, fail_pct

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        d = self.diff
        head = Table.grid(padding=(0, 2))
        head.add_column(style="bold", no_wrap=True)
        head.add_column(overflow="fold")
        head.add_row("A", self.name_a)
        head.add_row("B", self.name_b)
        if d.device.warning:
            head.add_row("[bold yellow]Warning[/]", f"[yellow]{d.device.warning}[/]")
        if d.program is not None and d.program.missing_reason:
            head.add_row("Program", f"not compared: {d.program.missing_reason}")
        elif d.program is not None:
            head.add_row("Step time", _step_row(d.program))
        head.add_row("Kernel time", f"{duration(d.total_a_ns)} → {duration(d.total_b_ns)} ({pct(d.total_change_pct)}; "
                     "all launches, so a different number of launches changes it too)")
        labels = distinct_short_names(k.name for k in d.kernels)
        cols = [Column("Kernel", "left", wrap=True, min_width=20)] + [Column(name) for name in (
            "Launches", "Median A", "Median B", "Change", "Spread")] + [Column("Verdict", "left"),
                                                                         Column("Bound A → B", "left")]
        rows = []
        split = any(k.config for k in d.kernels)
        for k in d.kernels:
            la = k.a.launches if k.a else 0
            lb = k.b.launches if k.b else 0
            verdict = k.verdict + ("*" if k.single_launch else "")
            style = _VERDICT_STYLE.get(k.verdict)
            ba, bb = _BOUND.get(k.bound_a or "", k.bound_a or "—"), _BOUND.get(k.bound_b or "", k.bound_b or "—")
            bound = "" if k.bound_a is None and k.bound_b is None else (ba if ba == bb else f"{ba} → {bb}")
            rows.append((_name(k, labels[k.name]), f"{la} / {lb}", duration(k.a.median_ns) if k.a else "—",
                         duration(k.b.median_ns) if k.b else "—", pct(k.change_pct),
                         "—" if k.spread_ns is None else duration(k.spread_ns),
                         f"[{style}]{verdict}[/]" if style else verdict, bound))
        # the panel's border and padding take 4 cells; columns that do not fit go to a second table
        tables = fit_tables(options.max_width - 4, cols, rows)
        program = _program_parts(d.program, options.max_width - 4) if d.program is not None else []
        parts: list = [head, *program, *tables]
        def both(c) -> bool:
            return c.a is not None and not c.a.is_missing and c.b is not None and not c.b.is_missing

        detail = [k for k in d.kernels if any(both(c) for c in k.throughput + k.counters)]
        for k in detail:
            c = Table(box=None, padding=(0, 1), show_header=True, title=labels[k.name], title_justify="left")
            for col in ("", "A", "B", "Change"):
                c.add_column(col, justify="right" if col else "left", no_wrap=True)
            for ch in k.throughput + k.counters:
                if (ch.a is None or ch.a.is_missing) and (ch.b is None or ch.b.is_missing):
                    continue
                c.add_row(ch.label, _cell(ch.a), _cell(ch.b),
                          pct(ch.change_pct) if ch.change_pp is None else f"{ch.change_pp:+.1f} pp")
            parts.append(c)
        note = (f"[dim]Change = (median B - median A) / median A; noise when {NOISE_FORMULA} (spread: IQR from 4 "
                "launches, max - min below). Counters are those of the first launch the counter pass measured; a "
                "percentage changes in percentage points (pp = B - A).[/]")
        parts.append(note)
        if any(k.verdict == UNSTEADY for k in d.kernels):
            parts.append(f"[dim]unsteady: {UNSTEADY_FORMULA}: the launches vary more than the kernel takes, so no "
                         "change can be told from them (a collective's time holds its wait for the other ranks).[/]")
        if any(k.single_launch for k in d.kernels):
            parts.append("[dim]* one launch in each session: no spread to judge the change by.[/]")
        if split:
            parts.append("[dim]A kernel launched with several grid / block configurations in both sessions is "
                         "compared per configuration, shown as \\[grid / block].[/]")
        if self.fail_pct is not None:
            slow = d.slower_than(self.fail_pct)
            names = ", ".join(labels[k.name] for k in slow[:5]) + (
                f" and {len(slow) - 5} more" if len(slow) > 5 else ""
            )
            parts.append(f"[bold red]{plural(len(slow), 'kernel')} slower by more than {self.fail_pct:g}% beyond the "
                         f"spread: {names}[/]" if slow else
                         f"No kernel is slower by more than {self.fail_pct:g}% beyond the spread.")
        yield Panel(Group(*parts), title="kernelscope diff", title_align="left")


_STATUS_STYLE = {GONE: "green", REMAINS: "yellow", NEW: "red"}


def _step_row(p: ProgramDiff) -> str:
    a, b = p.step_a, p.step_b
    times = f"{duration(a.step_ns)} → {duration(b.step_ns)} per step"
    if p.measured_gain_pct is None:
        return f"{times}; no measured gain: {p.measured_missing}"
    return (f"{times} (median of {a.steps} / {b.steps} steps; measured gain {p.measured_gain_pct:.1f}% = "
            f"{MEASURED_GAIN_FORMULA})")


def _share(v: float | None) -> str:
    return "N/A" if v is None else f"{v * 100:.1f}%"


def _program_parts(p: ProgramDiff, width: int) -> list:
    """The program comparison: where a step goes in A and B, then A's findings with their estimated and measured
    gains (B's new findings after them)."""
    if p.missing_reason:  # said in the head
        return []
    parts: list = []
    cols = [Column("Where the time goes", "left", wrap=True, min_width=16), Column("A per step"),
            Column("B per step"), Column("A % wall"), Column("B % wall")]
    rows = [(c.category, duration(c.per_step_a_ns), duration(c.per_step_b_ns), _share(c.share_a), _share(c.share_b))
            for c in p.breakdown]
    parts += fit_tables(width, cols, rows)
    if p.findings:
        cols = [Column("Finding", "left", wrap=True, min_width=20), Column("In B", "left"), Column("Estimated"),
                Column("Estimated by", "left"), Column("Measured"), Column("Error"), Column("Gain left in B")]
        rows = []
        for f in p.findings:
            style = _STATUS_STYLE[f.status]
            rows.append((f.name, f"[{style}]{f.status}[/]",
                         "—" if f.estimated_gain_pct is None else f"{f.estimated_gain_pct:.1f}%",
                         f.estimate_basis or "—",
                         "—" if f.measured_gain_pct is None else f"{f.measured_gain_pct:.1f}%",
                         "—" if f.error_pp is None else f"{f.error_pp:+.1f} pp",
                         "—" if f.gain_b_pct is None else f"{f.gain_b_pct:.1f}%"))
        parts += fit_tables(width, cols, rows)
    gone = p.gone
    if len(gone) > 1:
        parts.append(f"[dim]{len(gone)} findings went away together ({', '.join(f.name for f in gone)}): the measured "
                     "gain is theirs together, since one step time cannot tell their shares apart (so no error is "
                     "given).[/]")
    parts.append(f"[dim]Step time: {STEP_TIME_FORMULA}. Per step: {PER_STEP_FORMULA}. Estimated: A's verdict's "
                 f"gain, % of A's wall time ({REPLAYED}: the replay of its fix, analyze/replay.py). Gone: not in "
                 f"B, or left with under {FINDING_GONE_BELOW_PCT:g}% of B's wall time. Measured: "
                 f"{MEASURED_GAIN_FORMULA}; error: {ERROR_FORMULA}.[/]")
    return parts


def _cell(m) -> str:
    if m is None or m.is_missing:
        return "N/A"
    if m.unit in ("%",) or m.unit.endswith("/s"):
        return rate_cell(m, False)
    return number(m.value)


# -- `diff --json`: the comparison as plain JSON
def diff_json(d: SessionDiff, a: str, b: str, fail_pct: float | None) -> dict:
    def stats(s):
        return None if s is None else {"launches": s.launches, "median_ns": s.median_ns, "min_ns": s.min_ns,
                                       "max_ns": s.max_ns, "q1_ns": s.q1_ns, "q3_ns": s.q3_ns, "source": s.source}

    def change(c):
        def val(m):
            return None if m is None or m.is_missing else m.value
        return {"label": c.label, "a": val(c.a), "b": val(c.b), "change_pct": c.change_pct, "change_pp": c.change_pp}

    return {
        "schema": "kernelscope-diff/1", "a": a, "b": b, "device_warning": d.device.warning,
        "program": None if d.program is None else program_json(d.program),
        "total_a_ns": d.total_a_ns, "total_b_ns": d.total_b_ns, "total_change_pct": d.total_change_pct,
        "fail_if_slower_pct": fail_pct,
        "slower": [k.name for k in d.slower_than(fail_pct)] if fail_pct is not None else None,
        "kernels": [{"name": k.name, "short_name": k.short_name, "a": stats(k.a), "b": stats(k.b),
                     "change_pct": k.change_pct, "spread_ns": k.spread_ns, "spread_basis": k.spread_basis,
                     "verdict": k.verdict, "single_launch": k.single_launch, "bound_a": k.bound_a,
                     "bound_b": k.bound_b, "throughput": [change(c) for c in k.throughput],
                     "counters": [change(c) for c in k.counters]} for k in d.kernels],
    }


def program_json(p: ProgramDiff) -> dict:
    def step(t: StepTime) -> dict:
        return {"step_ns": t.step_ns, "steps": t.steps, "basis": t.basis}

    return {
        "missing_reason": p.missing_reason, "step_a": step(p.step_a), "step_b": step(p.step_b),
        "step_time_formula": STEP_TIME_FORMULA, "measured_gain_pct": p.measured_gain_pct,
        "measured_gain_formula": MEASURED_GAIN_FORMULA, "measured_missing": p.measured_missing,
        "gone_below_pct": FINDING_GONE_BELOW_PCT, "per_step_formula": PER_STEP_FORMULA,
        "breakdown": [{"category": c.category, "share_a": c.share_a, "share_b": c.share_b,
                       "per_step_a_ns": c.per_step_a_ns, "per_step_b_ns": c.per_step_b_ns} for c in p.breakdown],
        "findings": [{"rule": f.rule, "title": f.title, "kernel": f.kernel, "status": f.status,
                      "estimated_gain_pct": f.estimated_gain_pct, "estimate_basis": f.estimate_basis,
                      "gain_b_pct": f.gain_b_pct, "measured_gain_pct": f.measured_gain_pct, "error_pp": f.error_pp,
                      "together_with": list(f.together_with)} for f in p.findings],
    }
