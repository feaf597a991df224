"""Roofline: arithmetic intensity and achieved rate per kernel and per declared region,
against the device's measured ceilings.

FLOPs come from the SASS FLOP counters when the report has them, from the
tensor-path math-op counters for tensor-core work (an MMA instruction count
alone does not say the MMA shape), or from work the user declared with
kernelscope.region(name, flops=, bytes=). Bytes are DRAM
bytes from the counter pass, or declared. Ceilings come only from
`kernelscope calibrate` (measured on this device); without them every roof is
N/A with the reason, never a datasheet number.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from kernelscope.model import Launch, Metric, MetricMap, Session
from kernelscope.model.launch import DeclaredWork

NO_CALIBRATION = "no measured ceilings for this GPU: run kernelscope calibrate on it"

# Calibration metric names (collect/calibrate/ceilings.py writes them) -> label on the roofline.
COMPUTE_CEILINGS = (("matmul_fp16_flop_per_s", "fp16 matmul (cuBLAS)"),
                    ("matmul_bf16_flop_per_s", "bf16 matmul (cuBLAS)"), ("fma_fp32_flop_per_s", "fp32 FMA"))
BANDWIDTH_CEILING = "copy_bandwidth_bytes_per_s"

# SASS thread-instruction counters: FLOPs = add + mul + 2 x fma, per precision.
_SASS = "smsp__sass_thread_inst_executed_op_{}_pred_on.sum"
SASS_FLOP_OPS = (("fadd", 1), ("fmul", 1), ("ffma", 2), ("hadd", 1), ("hmul", 1), ("hfma", 2),
                 ("dadd", 1), ("dmul", 1), ("dfma", 2))
SASS_FLOPS_FORMULA = "sum over f/h/d precisions of (add + mul + 2 x fma) thread instructions (SASS counters)"
# Tensor-path math ops (2 per multiply-add, counted on the tiles the kernel computes, padding included), one
# counter per source precision; the counter pass asks for them where the chip has them (collect/ncu/fields.TENSOR_OPS).
TENSOR_OPS_COUNTERS: tuple[str, ...] = (
    "sm__ops_path_tensor_src_fp16.sum", "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
    "sm__ops_path_tensor_src_tf32_dst_fp32.sum", "sm__ops_path_tensor_src_fp8.sum", "sm__ops_path_tensor_src_fp64.sum",
)
TENSOR_FLOPS_FORMULA = "sum over source precisions of sm__ops_path_tensor_src_* (tensor-path math ops)"


@dataclass(frozen=True)
class Ceilings:
    """Measured ceilings of one device, or none (``missing_reason``)."""

    memory_bandwidth: Metric  # byte/s
    compute: tuple[tuple[str, Metric], ...]  # (label, FLOP/s), largest first
    source: str  # where they came from (calibration file, date)
    missing_reason: str | None = None

    @classmethod
    def none(cls, reason: str = NO_CALIBRATION) -> "Ceilings":
        return cls(Metric.missing(BANDWIDTH_CEILING, reason, "derived", "byte/s"), (), "", reason)

    @classmethod
    def from_metrics(cls, metrics: MetricMap, source: str) -> "Ceilings":
        bw = metrics.get(BANDWIDTH_CEILING) or Metric.missing(BANDWIDTH_CEILING, "not in the calibration", "derived",
                                                              "byte/s")
        comp = [(label, metrics[k]) for k, label in COMPUTE_CEILINGS if k in metrics and not metrics[k].is_missing]
        comp.sort(key=lambda t: -float(t[1].value))
        return cls(bw, tuple(comp), source, None)

    def compute_roof(self, tensor: bool) -> tuple[str, float] | None:
        """The compute ceiling for a kernel: the best matmul rate with tensor work, fp32 FMA without."""
        fits = [(label, float(m.value)) for label, m in self.compute if ("matmul" in label) == tensor]
        return max(fits, key=lambda t: t[1]) if fits else None


def tensor_flops(x: Launch) -> tuple[float, list[str]] | None:
    """Tensor-path FLOPs of one counter-pass launch and the counters that counted some; None when no
    tensor-path op counter was collected."""
    have = [(n, m) for n in TENSOR_OPS_COUNTERS if (m := x.counters.get(n)) is not None and not m.is_missing
            and isinstance(m.value, (int, float))]
    if not have:
        return None
    return sum(float(m.value) for _, m in have), [n for n, m in have if float(m.value) > 0]


def counter_flops(x: Launch) -> Metric:
    """FLOPs of one counter-pass launch from the SASS and tensor-path counters, or missing with why."""
    name = "sm__sass_flops (kernelscope)"
    mma = sum(float(m.value) for k, m in x.metrics.items()
              if k.startswith("mma_") and k.endswith("_instructions") and not m.is_missing)
    tensor = tensor_flops(x) if mma > 0 else None
    if tensor is not None and tensor[0] > 0:
        sass = [x.counters.get(_SASS.format(op)) for op, _ in SASS_FLOP_OPS]
        if all(m is not None and not m.is_missing for m in sass[:3]):
            extra = sum(float(m.value) * w for m, (_, w) in zip(sass, SASS_FLOP_OPS)
                        if m is not None and not m.is_missing)
            return Metric(tensor[0] + extra, "FLOP", "derived", ", ".join(tensor[1]) + " + SASS FLOP counters",
                          formula=TENSOR_FLOPS_FORMULA + " + " + SASS_FLOPS_FORMULA)
        return Metric(tensor[0], "FLOP", "derived", ", ".join(tensor[1]),
                      formula=TENSOR_FLOPS_FORMULA + " (tensor path only: the SASS FLOP counters of the FMA pipes "
                      "were not collected)")
    if mma > 0 and tensor is None:
        return Metric.missing(name, "tensor-core FLOPs cannot be counted from MMA instruction counts without the MMA "
                              "shape; declare them with kernelscope.region(name, flops=...)", "derived", "FLOP")
    parts = [(x.counters.get(_SASS.format(op)), weight) for op, weight in SASS_FLOP_OPS]
    if not x.counters or any(m is None or m.is_missing for m, _ in parts[:3]):
        why = ("the counter pass did not run for this launch" if not x.counters else
               "the counter pass does not collect the SASS FLOP counters (smsp__sass_thread_inst_executed_op_*; "
               "they cost extra replay passes); declare FLOPs with kernelscope.region(name, flops=...)")
        return Metric.missing(name, why, "derived", "FLOP")
    total = sum(float(m.value) * w for m, w in parts if m is not None and not m.is_missing)
    return Metric(total, "FLOP", "derived", ", ".join(_SASS.format(op) for op, _ in SASS_FLOP_OPS[:3]) + ", ...",
                  formula=SASS_FLOPS_FORMULA)


@dataclass(frozen=True)
class DeclaredTotals:
    region: str
    occurrences: int  # declared entries
    flops: float | None  # sum over the entries that declared it
    bytes: float | None
    units: dict[str, float]
    gpu_ns: int | None  # GPU busy time: kernel durations inside the declared occurrences (None: no span recorded)
    kernels: tuple[str, ...]  # distinct kernels launched inside the declared occurrences
    per_launch_kernel: str | None  # the one kernel, launched once per occurrence, the work belongs to


def _occurrence_windows(session: Session, name: str) -> list[tuple[int, int] | None]:
    spans = sorted((r for r in session.regions if r.name == name), key=lambda r: r.cpu_start_ns)
    return [(r.gpu_start_ns, r.gpu_start_ns + r.gpu_duration_ns)
            if r.gpu_start_ns is not None and r.gpu_duration_ns is not None else None for r in spans]


def declared_totals(session: Session) -> dict[str, DeclaredTotals]:
    """Declared work per region name, with the GPU time and kernels of the declared occurrences."""
    by_name: dict[str, list[DeclaredWork]] = defaultdict(list)
    for w in session.declared_work:
        by_name[w.region].append(w)
    out: dict[str, DeclaredTotals] = {}
    for name, works in by_name.items():
        windows = _occurrence_windows(session, name)
        gpu_ns, kernels, per_occ = 0, [], []
        spans_ok = True
        for w in works:
            win = windows[w.occurrence] if w.occurrence < len(windows) else None
            if win is None:
                spans_ok = False
                continue
            table = session.launch_table()  # columns: no Launch object per launch
            ours = [name in sh.regions for sh in table.shapes]
            launches = [(table.shapes[sid].kernel, d) for sid, st, d in zip(table.shape, table.start_ns,
                                                                            table.duration_ns)
                        if st is not None and ours[sid] and win[0] <= st < win[1]]
            # busy time, not the span: a first call's JIT compile leaves the GPU idle inside the region
            gpu_ns += sum(d for _, d in launches)
            inside = [k for k, _ in launches]
            kernels.extend(inside)
            per_occ.append(inside)
        flops = [w.flops for w in works if w.flops is not None]
        nbytes = [w.bytes for w in works if w.bytes is not None]
        units: dict[str, float] = defaultdict(float)
        for w in works:
            for k, v in w.units.items():
                units[k] += v
        one = None
        if spans_ok and per_occ and all(len(k) == 1 for k in per_occ) and len({k[0] for k in per_occ}) == 1:
            one = per_occ[0][0]
        out[name] = DeclaredTotals(name, len(works), sum(flops) if flops else None, sum(nbytes) if nbytes else None,
                                   dict(units), gpu_ns if spans_ok else None, tuple(dict.fromkeys(kernels)), one)
    return out


@dataclass(frozen=True)
class RooflinePoint:
    label: str
    kind: str  # "kernel" | "region"
    flops: Metric  # per launch (kernel) or in total (region)
    bytes: Metric
    time_ns: Metric
    intensity: Metric  # FLOP/byte
    flop_rate: Metric  # FLOP/s
    byte_rate: Metric  # byte/s
    tensor: bool  # uses the tensor cores (decides which compute roof applies)
    roof: Metric = field(default_factory=lambda: Metric.missing("roof", NO_CALIBRATION, "derived", "FLOP/s"))
    pct_of_roof: Metric = field(default_factory=lambda: Metric.missing("% of roof", NO_CALIBRATION, "derived", "%"))
    side: str = ""  # "memory" | "compute" | "" when no ceilings


def _ratio(name: str, unit: str, formula: str, num: Metric, den: Metric, scale: float = 1.0) -> Metric:
    if num.is_missing or den.is_missing or not den.value:
        why = next((m.missing_reason for m in (num, den) if m.is_missing), f"{den.raw_name} is zero")
        return Metric.missing(name, why, "derived", unit)
    return Metric(float(num.value) / (float(den.value) * scale), unit, "derived", name, formula=formula)


def make_point(label: str, kind: str, flops: Metric, nbytes: Metric, time_ns: Metric, tensor: bool,
               ceilings: Ceilings) -> RooflinePoint:
    intensity = _ratio("arithmetic intensity", "FLOP/byte", "FLOPs / DRAM bytes", flops, nbytes)
    flop_rate = _ratio("FLOP rate", "FLOP/s", "FLOPs / time", flops, time_ns, 1e-9)
    byte_rate = _ratio("DRAM byte rate", "byte/s", "bytes / time", nbytes, time_ns, 1e-9)
    p = RooflinePoint(label, kind, flops, nbytes, time_ns, intensity, flop_rate, byte_rate, tensor)
    if ceilings.missing_reason is not None or intensity.is_missing or ceilings.memory_bandwidth.is_missing:
        why = ceilings.missing_reason or intensity.missing_reason or ceilings.memory_bandwidth.missing_reason
        return RooflinePoint(**{**p.__dict__, "roof": Metric.missing("roof", str(why), "derived", "FLOP/s"),
                                "pct_of_roof": Metric.missing("% of roof", str(why), "derived", "%")})
    compute = ceilings.compute_roof(tensor)
    if compute is None:
        why = f"the calibration has no {'matmul' if tensor else 'fp32 FMA'} ceiling"
        return RooflinePoint(**{**p.__dict__, "roof": Metric.missing("roof", why, "derived", "FLOP/s"),
                                "pct_of_roof": Metric.missing("% of roof", why, "derived", "%")})
    mem_roof = float(intensity.value) * float(ceilings.memory_bandwidth.value)
    roof_value, side = (mem_roof, "memory") if mem_roof < compute[1] else (compute[1], "compute")
    roof = Metric(roof_value, "FLOP/s", "derived", "roof",
                  formula=f"min(intensity x measured copy bandwidth, measured {compute[0]} rate)")
    pct = _ratio("% of roof", "%", "FLOP rate / roof x 100", flop_rate, roof, 0.01)
    return RooflinePoint(**{**p.__dict__, "roof": roof, "pct_of_roof": pct, "side": side})
