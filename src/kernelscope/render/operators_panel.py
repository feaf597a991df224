"""The program's operators by kernel time: the aten op behind the kernels, its input shapes, the user's Python line,
and the FLOP/s and bytes/s it achieved (analyze/operators.py)."""
from __future__ import annotations

from rich.box import HEAVY_HEAD
from rich.console import Console, ConsoleOptions, RenderResult
from rich.text import Text

from kernelscope.analyze.operators import ModelFlops, OperatorRow, OperatorsReport
from kernelscope.model import Metric
from kernelscope.render.fit import Column, fit_tables
from kernelscope.render.fmt import duration, si


def _rate(rate: Metric, pct: Metric) -> str:
    if rate.is_missing:
        return "N/A"
    text = si(float(rate.value), rate.unit)
    return text if pct.is_missing else f"{text} ({float(pct.value):.0f}%)"


def achieved_text(r: OperatorRow) -> str:
    """The rate that bounds the op: FLOP/s for a matmul, convolution or attention, else bytes/s."""
    compute = r.formula is not None and r.formula.split(":")[0] in ("matmul", "linear", "convolution", "attention")
    return _rate(r.flops_per_s, r.pct_of_compute_ceiling) if compute else _rate(r.bytes_per_s,
                                                                               r.pct_of_bandwidth_ceiling)


def model_flops_text(m: ModelFlops) -> str:
    """One line: the model's FLOPs per step, their rate and the utilisation of the measured ceiling."""
    if m.flops_per_s.is_missing:
        return f"Model FLOPs: N/A ({m.flops_per_s.missing_reason})."
    step = "N/A" if m.flops_per_step.is_missing else si(float(m.flops_per_step.value), "FLOP")
    util = (f"N/A ({m.utilisation_pct.missing_reason})" if m.utilisation_pct.is_missing
            else f"{float(m.utilisation_pct.value):.1f}%")
    return (f"Model FLOPs per step {step} (ops with a formula: {m.counted_launches:,} of {m.launches:,} launches in "
            f"the window), {si(float(m.flops_per_s.value), 'FLOP/s')} over the window; model FLOP utilisation {util}.")


class OperatorsTable:
    def __init__(self, report: OperatorsReport, limit: int = 15) -> None:
        self.report = report
        self.limit = limit

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        rows = []
        for i, r in enumerate(self.report.rows[: self.limit], 1):
            rows.append((str(i), r.label, r.shapes or "-", r.python_line or "-", str(r.calls), duration(r.kernel_ns),
                         achieved_text(r)))
        cols = [Column("#"), Column("Operator", "left", wrap=True, min_width=14),
                Column("Inputs", "left", wrap=True, min_width=12, droppable=True),
                Column("Python line", "left", wrap=True, min_width=12), Column("Calls"), Column("Kernels"),
                Column("Achieved (% of ceiling)", "left", droppable=True)]
        yield from fit_tables(options.max_width, cols, rows, keys=2, box=HEAVY_HEAD, expand=False,
                              title="Operators by kernel time (aten op, inputs, the user's line)", title_justify="left")
        notes = []
        m = self.report.model
        if m is not None:
            notes.append(model_flops_text(m))
        if self.report.missing:
            notes.append(f"The trace did not record {' or '.join(self.report.missing)}: those columns are empty.")
        why = {m.missing_reason for r in self.report.rows[: self.limit]
               for m in (r.pct_of_compute_ceiling, r.pct_of_bandwidth_ceiling) if m.is_missing}
        if why:
            notes.append("% of ceiling N/A: " + "; ".join(sorted(w for w in why if w)) + ".")
        for n in notes:
            yield Text.from_markup(n, style="dim")
        if len(self.report.rows) > self.limit:
            yield f"… and {len(self.report.rows) - self.limit} more operators (show --json)"
