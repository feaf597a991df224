"""The program's operators by kernel time: each aten op configuration (op, shapes, Python line; the nn.Module
instances of one layer type merged) with its launches, kernel time, FLOPs and bytes by its formula
(analyze/op_cost.py), and the rates it achieved against the device's measured ceilings, or N/A with the reason.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from kernelscope.analyze.op_cost import op_cost
from kernelscope.analyze.roofline import Ceilings
from kernelscope.model import Metric, Session
from kernelscope.model.operators import Operator

FLOPS_FORMULA = "op FLOPs per call (formula) x calls / kernel time of its launches"
BYTES_FORMULA = "op bytes per call (formula) x calls / kernel time of its launches"
TENSOR_DTYPES = ("c10::Half", "c10::BFloat16", "c10::Float8_e4m3fn", "c10::Float8_e5m2")
MATMUL_LIKE = ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::matmul", "aten::linear",
               "aten::convolution", "aten::_convolution", "aten::cudnn_convolution")


@dataclass(frozen=True)
class OperatorRow:
    name: str  # the aten op that launched the kernels
    outer: str | None  # the op around it (aten::linear around aten::addmm)
    shapes: str  # its inputs, "f16[4,2048,1024], ..."; "" when the trace has no shapes
    python_line: str | None  # the user's frame, file:line function
    modules: tuple[str, ...]  # nn.Module instances it ran in
    calls: int
    launches: int
    kernel_ns: int
    kernels: tuple[str, ...]  # kernel names, most time first
    formula: str | None  # the FLOPs / bytes formula, None: no formula for this op or no shapes
    flops: float | None  # all calls
    bytes: float | None
    flops_per_s: Metric
    bytes_per_s: Metric
    pct_of_compute_ceiling: Metric
    pct_of_bandwidth_ceiling: Metric

    @property
    def label(self) -> str:
        return self.name if self.outer is None else f"{self.name} ({self.outer})"


@dataclass(frozen=True)
class OperatorsReport:
    rows: tuple[OperatorRow, ...]  # most kernel time first
    missing: tuple[str, ...] = ()  # what the trace did not record (shapes, stacks)
    missing_reason: str | None = None  # no operators at all
    model: "ModelFlops | None" = None  # FLOPs per step of the verdict's window (set by build_report)


def _key(op: Operator) -> tuple:
    return (op.name, op.outer, op.input_dims, op.input_types, op.python_frame)


def _rate(value: float | None, ns: int, unit: str, raw: str, formula: str, why: str | None) -> Metric:
    if value is None or ns <= 0:
        return Metric.missing(raw, why or "no kernel time", "derived", unit)
    return Metric(value / (ns * 1e-9), unit, "derived", raw, None, formula)


def _pct(rate: Metric, roof: float | None, label: str, reason: str | None) -> Metric:
    raw = f"% of {label}"
    if rate.is_missing:
        return Metric.missing(raw, rate.missing_reason or "no rate", "derived", "%")
    if roof is None or roof <= 0:
        return Metric.missing(raw, reason or "no measured ceiling", "derived", "%")
    return Metric(100.0 * float(rate.value) / roof, "%", "derived", raw, None, f"achieved rate / {label}")


def operators_report(session: Session, ceilings: Ceilings) -> OperatorsReport:
    """The session's operators by kernel time (whole session), or the reason there are none."""
    ops = session.operators
    if ops is None:
        return OperatorsReport((), (), "the session has no operators: import a trace recorded with CPU activities, "
                                       "record_shapes=True and with_stack=True")
    t = session.launch_table()
    groups: dict[tuple, list[int]] = defaultdict(list)
    for k, op in enumerate(ops.ops):
        groups[_key(op)].append(k)
    group_of = {k: g for g, ks in groups.items() for k in ks}
    ns: dict[tuple, int] = defaultdict(int)
    n: dict[tuple, int] = defaultdict(int)
    kernels: dict[tuple, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    names = [s.kernel for s in t.shapes]
    for sid, dur, corr in zip(t.shape, t.duration_ns, t.correlation_id):
        k = ops.launch_op.get(corr) if corr is not None else None
        if k is None:
            continue
        g = group_of[k]
        ns[g] += dur
        n[g] += 1
        kernels[g][names[sid]] += dur
    rows = [_row(ops.ops[ks[0]], [ops.ops[k] for k in ks], ns[g], n[g], kernels[g], ceilings)
            for g, ks in groups.items() if n[g]]
    rows.sort(key=lambda r: -r.kernel_ns)
    return OperatorsReport(tuple(rows), tuple(ops.missing()))


def _tensor_op(op: Operator) -> bool:
    """A matmul or convolution in a tensor-core dtype: measured against the matmul ceiling, not FP32 FMA."""
    return op.name in MATMUL_LIKE and any(t in TENSOR_DTYPES for t in op.input_types)


def _row(op: Operator, same: list[Operator], kernel_ns: int, launches: int, kernels: dict[str, int],
         ceilings: Ceilings) -> OperatorRow:
    calls = sum(o.calls for o in same)
    cost = op_cost(op)
    why = ("the trace has no input shapes" if not op.input_dims else
           f"no FLOPs / bytes formula for {op.name}" if cost is None else None)
    flops = None if cost is None or cost.flops is None else cost.flops * calls
    nbytes = None if cost is None or cost.bytes is None else cost.bytes * calls
    flops_s = _rate(flops or None, kernel_ns, "FLOP/s", "operator FLOP/s", FLOPS_FORMULA,
                    why or (f"{op.name} does no arithmetic the formula counts" if cost is not None else None))
    bytes_s = _rate(nbytes, kernel_ns, "byte/s", "operator byte/s", BYTES_FORMULA, why)
    tensor = _tensor_op(op)
    roof = ceilings.compute_roof(tensor) if ceilings.missing_reason is None else None
    bw = ceilings.memory_bandwidth
    return OperatorRow(
        op.name, op.outer, op.shapes_text, op.python_line, tuple(sorted({o.module for o in same if o.module})),
        calls, launches, kernel_ns, tuple(sorted(kernels, key=lambda k: -kernels[k])),
        None if cost is None else cost.formula, flops, nbytes, flops_s, bytes_s,
        _pct(flops_s, roof[1] if roof else None, roof[0] if roof else "the compute ceiling",
             ceilings.missing_reason or "no measured compute ceiling of this kind"),
        _pct(bytes_s, None if bw.is_missing else float(bw.value), "the measured memory bandwidth",
             ceilings.missing_reason or bw.missing_reason))


MODEL_FLOPS_FORMULA = ("sum over the window's launches of their op's FLOPs per call (formula) x calls / launches "
                       "of that op configuration")


@dataclass(frozen=True)
class ModelFlops:
    """The FLOPs the program's operators do per step (those with a formula), their rate over the window, and that
    rate against the measured compute ceiling (model FLOP utilisation), each N/A with the reason."""

    flops_per_step: Metric
    flops_per_s: Metric
    utilisation_pct: Metric
    counted_launches: int  # launches of the window whose op has a FLOPs formula
    launches: int  # launches of the window with an operator


def model_flops(session: Session, window: tuple[int, int] | None, steps: int, ceilings: Ceilings) -> ModelFlops:
    """Model FLOPs of the window [start, end) ns of a one-process session (``steps`` whole steps in it)."""
    def missing(reason: str) -> ModelFlops:
        return ModelFlops(Metric.missing("model FLOPs per step", reason, "derived", "FLOP"),
                          Metric.missing("model FLOP/s", reason, "derived", "FLOP/s"),
                          Metric.missing("model FLOP utilisation", reason, "derived", "%"), 0, 0)

    ops = session.operators
    if ops is None or window is None:
        return missing("the session has no operators" if ops is None else "no window of steps")
    if not ops.shapes:
        return missing("the trace has no input shapes (record_shapes=True)")
    t = session.launch_table()
    per_launch: dict[int, float | None] = {}
    launches_of: dict[int, int] = {}
    for corr in t.correlation_id:
        k = ops.launch_op.get(corr) if corr is not None else None
        if k is not None:
            launches_of[k] = launches_of.get(k, 0) + 1
    for k, n in launches_of.items():
        cost = op_cost(ops.ops[k])
        per_launch[k] = None if cost is None or not cost.flops else cost.flops * ops.ops[k].calls / n
    lo, hi = window
    total, counted, seen, tensor = 0.0, 0, 0, False
    for start, corr in zip(t.start_ns, t.correlation_id):
        k = ops.launch_op.get(corr) if corr is not None else None
        if k is None or start is None or not lo <= start < hi:
            continue
        seen += 1
        f = per_launch.get(k)
        if f:
            total += f
            counted += 1
            tensor = tensor or _tensor_op(ops.ops[k])
    if not counted:
        return missing("no launch of the window has an op with a FLOPs formula")
    wall = hi - lo
    rate = Metric(total / (wall * 1e-9), "FLOP/s", "derived", "model FLOP/s", None,
                  f"model FLOPs of the window / its wall time ({MODEL_FLOPS_FORMULA})")
    per_step = (Metric(total / steps, "FLOP", "derived", "model FLOPs per step", None,
                       f"model FLOPs of the window / its steps ({MODEL_FLOPS_FORMULA})") if steps else
                Metric.missing("model FLOPs per step", "the window has no whole steps", "derived", "FLOP"))
    roof = ceilings.compute_roof(tensor) if ceilings.missing_reason is None else None
    util = (Metric(100.0 * float(rate.value) / roof[1], "%", "derived", "model FLOP utilisation", None,
                   f"model FLOP/s / {roof[0]}") if roof else
            Metric.missing("model FLOP utilisation", ceilings.missing_reason or "no measured compute ceiling",
                           "derived", "%"))
    return ModelFlops(per_step, rate, util, counted, seen)
