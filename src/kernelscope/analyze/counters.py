"""Views of the counter pass for the panels: pure data from a launch's metrics.

Every value is the collector's Metric (ncu, with its raw name) or derived here
by a named formula; a value the report lacks stays missing with its reason.
"""
from __future__ import annotations

from dataclasses import dataclass

from kernelscope.analyze.warp_state import WarpStateView, warp_state
from kernelscope.model import Launch, Metric, Session

SECTOR_BYTES = 32  # an L1TEX/L2 sector is 32 bytes on every architecture kernelscope knows


def counter_launches(session: Session, kernel: str) -> list[Launch]:
    """Launches of ``kernel`` that the counter pass measured, in run order."""
    return session.detailed_launches(kernel, "counters")


def _m(launch: Launch, name: str) -> Metric:
    m = launch.metrics.get(name)
    return m if m is not None else Metric.missing(name, "the counter pass did not run for this launch", "ncu")


def _derived(value: float, unit: str, formula: str, *inputs: Metric) -> Metric:
    return Metric(value=value, unit=unit, source="derived", formula=formula,
                  raw_name=" , ".join(m.raw_name for m in inputs))


def _missing_from(name: str, unit: str, *inputs: Metric) -> Metric:
    why = next((m.missing_reason for m in inputs if m.is_missing), "an input is zero")
    return Metric.missing(name, f"needs {', '.join(m.raw_name for m in inputs)}: {why}", "derived", unit)


@dataclass(frozen=True)
class Level:
    name: str
    throughput_pct: Metric
    bytes: Metric | None
    hit_rate_pct: Metric | None


@dataclass(frozen=True)
class MemoryHierarchyView:
    levels: tuple[Level, ...]
    dram_read_bytes: Metric
    dram_write_bytes: Metric
    shared_memory_static_bytes: Metric
    shared_memory_dynamic_bytes: Metric
    registers_per_thread: Metric


def memory_hierarchy(x: Launch) -> MemoryHierarchyView:
    return MemoryHierarchyView(
        levels=(
            Level("DRAM", _m(x, "dram_throughput_pct"), _m(x, "dram_bytes"), None),
            Level("L2", _m(x, "l2_throughput_pct"), _m(x, "l2_bytes"), _m(x, "l2_hit_rate_pct")),
            Level("L1/TEX", _m(x, "l1_throughput_pct"), _m(x, "l1_bytes"), _m(x, "l1_hit_rate_pct")),
            Level("Shared", _m(x, "shared_throughput_pct"), _m(x, "shared_bytes"), None),
        ),
        dram_read_bytes=_m(x, "dram_bytes_read"), dram_write_bytes=_m(x, "dram_bytes_write"),
        shared_memory_static_bytes=_m(x, "shared_memory_static_bytes"),
        shared_memory_dynamic_bytes=_m(x, "shared_memory_dynamic_bytes"),
        registers_per_thread=_m(x, "registers_per_thread"),
    )


@dataclass(frozen=True)
class AccessRow:
    kind: str  # "load" | "store"
    requests: Metric
    sectors: Metric
    sectors_per_request: Metric
    bytes_used_per_sector: Metric
    efficiency_pct: Metric  # useful bytes / bytes moved in sectors
    wasted_bytes: Metric


@dataclass(frozen=True)
class SharedRow:
    kind: str
    instructions: Metric
    wavefronts: Metric
    bank_conflicts: Metric
    wavefronts_per_instruction: Metric
    # (wavefronts - bank conflicts) / instructions: what the accesses need without the replays; above
    # WIDEST_ACCESS_WAVEFRONTS the instructions move more than a warp's widest per-thread access each
    unconflicted_per_instruction: Metric | None = None


WIDEST_ACCESS_WAVEFRONTS = 4  # a warp's 16-byte-per-thread access: 32 x 16 B = 512 B, 4 wavefronts of 128 B


@dataclass(frozen=True)
class TransactionsView:
    global_access: tuple[AccessRow, ...]
    shared_access: tuple[SharedRow, ...]


def _access(x: Launch, kind: str) -> AccessRow:
    sectors, per_sector = _m(x, f"global_{kind}_sectors"), _m(x, f"global_{kind}_bytes_per_sector")
    if (
        not per_sector.is_missing
        and float(per_sector.value) == 0
        and not sectors.is_missing
        and float(sectors.value) > 0
    ):
        # Sectors moved but no LDG/STG counted: asynchronous copies (cp.async / LDGSTS, TMA),
        # which ncu's SASS bytes-per-sector counter does not see. Not an efficiency of 0.
        why = ("the sectors were moved by asynchronous copies (cp.async/LDGSTS or TMA), which "
               f"{per_sector.raw_name} does not count")
        per_sector = Metric.missing(per_sector.raw_name, why, "ncu", per_sector.unit)
    if not sectors.is_missing and float(sectors.value) == 0:
        why = f"no global {kind}s went through L1TEX ({sectors.raw_name} = 0; TMA bulk copies are not counted here)"
        per_sector = Metric.missing(per_sector.raw_name, why, "ncu", per_sector.unit)
    if not per_sector.is_missing:
        eff = _derived(100.0 * float(per_sector.value) / SECTOR_BYTES, "%",
                       f"bytes used per sector / {SECTOR_BYTES} bytes per sector x 100", per_sector)
    else:
        eff = _missing_from("global coalescing efficiency", "%", per_sector)
    if not sectors.is_missing and not per_sector.is_missing:
        waste = _derived(float(sectors.value) * (SECTOR_BYTES - float(per_sector.value)), "byte",
                         f"sectors x ({SECTOR_BYTES} - bytes used per sector)", sectors, per_sector)
    else:
        waste = _missing_from("wasted bytes", "byte", sectors, per_sector)
    return AccessRow(kind, _m(x, f"global_{kind}_requests"), sectors, _m(x, f"global_{kind}_sectors_per_request"),
                     per_sector, eff, waste)


def _shared(x: Launch, kind: str) -> SharedRow:
    inst, waves = _m(x, f"shared_{kind}_instructions"), _m(x, f"shared_{kind}_wavefronts")
    if not inst.is_missing and not waves.is_missing and inst.value:
        ratio = _derived(float(waves.value) / float(inst.value), "wavefront/inst",
                         "shared wavefronts / shared instructions (1 = no conflicts for 32-bit accesses)", waves, inst)
    else:
        ratio = _missing_from("wavefronts per instruction", "wavefront/inst", waves, inst)
    conflicts = _m(x, f"shared_{kind}_bank_conflicts")
    plain = None
    if not ratio.is_missing and not conflicts.is_missing:
        plain = _derived((float(waves.value) - float(conflicts.value)) / float(inst.value), "wavefront/inst",
                         "(shared wavefronts - bank conflicts) / shared instructions", waves, conflicts, inst)
    return SharedRow(kind, inst, waves, conflicts, ratio, plain)


def transactions(x: Launch) -> TransactionsView:
    return TransactionsView((_access(x, "load"), _access(x, "store")), (_shared(x, "load"), _shared(x, "store")))


MMA_KINDS = (("hmma", "HMMA (mma.sync fp16/bf16/tf32)"), ("gmma", "GMMA (wgmma, Hopper)"),
             ("imma", "IMMA (integer)"), ("dmma", "DMMA (fp64)"))


@dataclass(frozen=True)
class TensorView:
    tensor_pipe_pct: Metric
    mma_instructions: tuple[tuple[str, Metric, Metric], ...]  # (kind label, count, per second)
    duration_ns: Metric
    hmma_includes_gmma: bool  # equal non-zero counts: ncu counts wgmma on the HMMA pipe too


def tensor_cores(x: Launch) -> TensorView:
    dur = _m(x, "duration_ns")
    rows = []
    for kind, label in MMA_KINDS:
        n = _m(x, f"mma_{kind}_instructions")
        if not n.is_missing and not dur.is_missing and dur.value:
            rate = _derived(float(n.value) / (float(dur.value) * 1e-9), "inst/s",
                            "MMA instructions / kernel duration", n, dur)
        else:
            rate = _missing_from(f"{kind} rate", "inst/s", n, dur)
        rows.append((label, n, rate))
    h, g = _m(x, "mma_hmma_instructions"), _m(x, "mma_gmma_instructions")
    same = not h.is_missing and not g.is_missing and float(g.value) > 0 and float(h.value) == float(g.value)
    return TensorView(_m(x, "tensor_pipe_pct"), tuple(rows), dur, same)


@dataclass(frozen=True)
class CounterViews:
    """The counter-fed panels of one kernel, from the first launch the counter pass measured."""

    launch: Launch
    profiled: int  # launches of the kernel the counter pass measured
    memory: MemoryHierarchyView
    transactions: TransactionsView
    tensor: TensorView
    warp_state: WarpStateView


def counter_views(launches: list[Launch] | tuple[Launch, ...]) -> CounterViews | None:
    """None when the counter pass measured no launch of the kernel."""
    if not launches:
        return None
    x = launches[0]
    return CounterViews(x, len(launches), memory_hierarchy(x), transactions(x), tensor_cores(x), warp_state(x))
