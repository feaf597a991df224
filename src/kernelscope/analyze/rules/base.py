"""What a kernel rule sees and what it returns.

A kernel rule (analyze/rule.Rule, scope "kernel") is a small function over one kernel's data (RuleContext),
registered with the ``rule`` decorator. It returns a Finding (analyze/rule.py) when it fires, with the metric values
that triggered it as evidence and its estimated gain in ``kernel_gain_pct`` (% of this kernel's time, by the rule's
named formula); NotEvaluated with the reason when the data it needs is missing;
or None when it looked and found nothing.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Union

from kernelscope.analyze import thresholds as th
from kernelscope.analyze.arch import SMArch
from kernelscope.analyze.bound import Bound
from kernelscope.analyze.roofline import Ceilings
from kernelscope.analyze.kernel_table import KernelSummary
from kernelscope.analyze.libraries import Library
from kernelscope.analyze.rule import KERNEL, KERNEL_TIME, REGISTRY, Finding, NotEvaluated, Rule, register
from kernelscope.model import Launch, Metric

SOURCE = "kernelscope"


@dataclass(frozen=True)
class RuleContext:
    kernel: KernelSummary
    launch: Launch | None  # the kernel's first counter-pass launch
    bound: Bound
    arch: SMArch | None  # with the device's own limits in place
    sm_count: int | None
    ceilings: Ceilings
    gaps_before_ns: tuple[int, ...] = ()  # GPU-idle gaps before the kernel's launches (timeline, all kinds)
    median_duration_ns: float | None = None  # of the kernel's launches (trace pass, else counter pass)
    # host time blocked in synchronize calls before each launch, aligned with gaps_before_ns (analyze/host_syncs.py);
    # None: the session recorded no synchronize calls
    sync_waits_ns: tuple[int, ...] | None = None
    library: Library | None = None  # the library the kernel belongs to (analyze/libraries.py), None: the user's own


Outcome = Union[Finding, NotEvaluated, None]

RULES: list[Rule] = REGISTRY[KERNEL]  # the kernel rules, in registration order


def rule(rule_id: str, title: str, gain_formula: str, *, inputs: str = "", symptom: int = 0,
         needs: tuple[str, ...] = ()) -> Callable[[Callable[[RuleContext], Outcome]], Rule]:
    """Register a kernel rule function in the one registry (analyze/rule.py says what each argument declares)."""
    def wrap(fn: Callable[[RuleContext], Outcome]) -> Rule:
        return register(Rule(rule_id, title, KERNEL, inputs, gain_formula, fn, needs, symptom))
    return wrap


def finding(r: Rule, section: str, message: str, gain_pct: float | None,
            evidence: list[tuple[str, Any]], severity: str = "optimization", title: str | None = None) -> Finding:
    """The rule's finding; ``title``: a more specific one than the rule's (the stall it names)."""
    gain = None if gain_pct is None else round(max(0.0, min(100.0, gain_pct)), 2)
    return Finding(r.rule_id, KERNEL_TIME, title or r.title, message, None, r.gain_formula,
                   tuple((str(k), _plain(v)) for k, v in evidence), message, scope=KERNEL, source=SOURCE,
                   kernel_gain_pct=gain, estimate_type="global" if gain is not None else None, section=section,
                   severity=severity, rule_title=r.title)


def _plain(v: Any) -> Any:
    if isinstance(v, float):
        return round(v, 4)
    return v


# Sessions recorded before these model names were in the importer's field table (collect/ncu/fields.py) hold
# only the raw counters they are read from: (raw names, summed).
RAW_BEFORE_MODEL_NAME: dict[str, tuple[str, ...]] = {
    "threads_per_instruction": ("smsp__thread_inst_executed_per_inst_executed.ratio",),
    "threads_per_instruction_pred_on": ("smsp__thread_inst_executed_pred_on_per_inst_executed.ratio",),
    "local_sectors": ("l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum"),
    "local_spill_requests": ("derived__local_spilling_requests",),
    "fma_pipe_instructions": ("sm__inst_executed_pipe_fma.sum",),
}


def value(x: Launch | None, key: str) -> tuple[float, str] | None:
    """(value, raw name) of a model metric of the launch, None when absent or not a number. The importer
    resolved it through its field table (the raw name, or the derivation's parts, with the formula on the
    Metric); a missing one carries the reason (``lacks``)."""
    if x is None:
        return None
    m: Metric | None = x.metrics.get(key)
    if m is None and key in RAW_BEFORE_MODEL_NAME:
        names = RAW_BEFORE_MODEL_NAME[key]
        parts = [raw(x, n) for n in names]
        if any(v is None for v in parts):
            return None
        return float(sum(v for v in parts if v is not None)), " + ".join(names)
    if m is None or m.is_missing or isinstance(m.value, bool) or not isinstance(m.value, (int, float)):
        return None
    return float(m.value), m.raw_name


def lacks(x: Launch | None, *keys: str) -> str:
    """Why the launch has no number for these model metrics, one clause each: the reason the importer recorded
    (what the report lacks and the ncu option that adds it), else that the session has no such value."""
    if x is None:
        return NO_COUNTERS
    why = []
    for key in keys:
        if value(x, key) is not None:
            continue
        m = x.metrics.get(key)
        reason = m.missing_reason if m is not None and m.missing_reason else "not recorded in this session"
        why.append(f"{key}: {reason}")
    return "; ".join(why)


def raw(x: Launch | None, raw_name: str) -> float | None:
    """A raw ncu counter of the launch, None when absent."""
    if x is None:
        return None
    m = x.counters.get(raw_name)
    if m is None or m.is_missing or isinstance(m.value, bool) or not isinstance(m.value, (int, float)):
        return None
    return float(m.value)


def headroom_pct(x: Launch | None, ceilings: Ceilings | None = None) -> tuple[float, list[tuple[str, Any]]] | None:
    """100 - the busiest unit's % of peak (SM, memory): how far the kernel is from a ceiling. With measured
    ceilings, DRAM bytes/s against the measured copy bandwidth counts too (ncu's DRAM peak is the
    datasheet's, which no copy reaches: a kernel at 90% of it can be at 100% of what the GPU delivers)."""
    sm, mem = value(x, "sm_throughput_pct"), value(x, "memory_throughput_pct")
    if sm is None or mem is None:
        return None
    busiest, evidence = max(sm[0], mem[0]), [(sm[1], sm[0]), (mem[1], mem[0])]
    nbytes, dur = value(x, "dram_bytes"), value(x, "duration_ns")
    if ceilings is not None and not ceilings.memory_bandwidth.is_missing and nbytes and dur and dur[0] > 0:
        pct = 100.0 * nbytes[0] / (dur[0] * 1e-9) / float(ceilings.memory_bandwidth.value)
        if pct > busiest:
            busiest = pct
            evidence += [("DRAM bytes/s % of the measured copy bandwidth (derived)", pct)]
    return max(0.0, 100.0 - busiest), evidence


def busiest_unit_pct(x: Launch | None) -> tuple[float, list[tuple[str, Any]]] | None:
    """The busiest of SM, memory and tensor pipe, % of peak (ncu's speed of light)."""
    got = [v for k in ("sm_throughput_pct", "memory_throughput_pct", "tensor_pipe_pct") if (v := value(x, k))]
    if not got:
        return None
    top = max(got)
    return top[0], [(top[1], top[0])]


def mma_per_warp(x: Launch | None) -> tuple[float, list[tuple[str, Any]]] | None:
    """MMA instructions per launched warp (hmma counts wgmma too on Hopper: the largest kind is taken)."""
    counts = [v for k in MMA_KINDS if (v := value(x, k)) is not None]
    if x is None or not counts:
        return None
    warps = x.blocks * -(-x.threads_per_block // 32)
    if warps <= 0:
        return None
    mma = max(counts)
    return mma[0] / warps, [(mma[1], mma[0]), ("warps launched (grid blocks x warps per block)", warps)]


def is_matmul(x: Launch | None) -> bool | None:
    """Whether the kernel does its math with MMA instructions (None: not measured).

    Per warp, not per instruction: the H100 recordings show 1 to 3 tensor-pipe instructions per
    warp on plain elementwise Triton kernels (3.5% of their few instructions; gh100 has a
    sm__inst_executed_pipe_tensor_op_hmma_type_hfma2 counter, so some HFMA2 count as hmma), and
    128 to 8,192 per warp on GEMMs and attention."""
    per = mma_per_warp(x)
    if per is None:
        return None
    return per[0] >= th.MATMUL_MIN_MMA_PER_WARP


# hmma counts wgmma too on Hopper (analyze.counters.TensorView.hmma_includes_gmma), so take the largest.
MMA_KINDS = ("mma_hmma_instructions", "mma_gmma_instructions", "mma_imma_instructions", "mma_dmma_instructions")

NO_COUNTERS = "no counter pass for this kernel (kernelscope run --counters)"
