"""Kernels by total time, their launch configurations and occupancy: pure data out."""
from __future__ import annotations

import dataclasses
import re
import statistics
from dataclasses import dataclass

from kernelscope.analyze.arch import SMArch, UnknownArchError
from kernelscope.model.names import distinct_short_names, short_kernel_name
from kernelscope.analyze.occupancy import OccupancyInputError, OccupancyResult, arch_for_device, theoretical_occupancy
from kernelscope.model import Launch, Metric, Session
from kernelscope.model.launch_table import LaunchShape, LaunchTable
from kernelscope.model.launch_table import collector_paused

WAVES_FORMULA = "grid blocks / (active blocks per SM x SM count)"


@dataclass(frozen=True)
class LaunchConfig:
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    registers_per_thread: int | None
    shared_memory_per_block_bytes: int | None

    @property
    def blocks(self) -> int:
        return self.grid[0] * self.grid[1] * self.grid[2]

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


@dataclass(frozen=True)
class ConfigSummary:
    config: LaunchConfig
    launches: int
    total_ns: int
    occupancy: OccupancyResult | None
    occupancy_missing_reason: str | None
    waves_per_sm: float | None
    metrics: dict[str, Metric]  # the first launch's metrics, with provenance
    grid_source: str  # which collector gave grid and block (dims_source)
    block_source: str


@dataclass(frozen=True)
class KernelSummary:
    name: str
    short_name: str
    launches: int
    total_ns: int
    mean_ns: float
    median_ns: float
    min_ns: int
    max_ns: int
    share_of_kernel_time: float  # 0..1
    configs: tuple[ConfigSummary, ...]  # most time first
    regions: tuple[str, ...]
    label: str = ""  # what panels call it: the short name, with what tells it apart when two share one

    def __post_init__(self) -> None:
        if not self.label:
            object.__setattr__(self, "label", self.short_name)


@dataclass(frozen=True)
class SessionSummary:
    kernels: tuple[KernelSummary, ...]  # most total time first
    total_kernel_ns: int
    launch_count: int
    sm_count: int | None


def launch_config(x: Launch) -> LaunchConfig:
    """What groups launches into one configuration: grid, block, registers per thread, shared memory per block."""
    regs, smem = x.value("registers_per_thread"), x.value("shared_memory_per_block_bytes")
    return LaunchConfig(
        x.grid, x.block, regs if isinstance(regs, int) else None, smem if isinstance(smem, int) else None
    )


NCU_GRID = "ncu: launch__grid_dim_x/y/z"
NCU_BLOCK = "ncu: launch__block_dim_x/y/z"


def dims_source(x: Launch) -> tuple[str, str]:
    """Where a launch's grid and block came from, for its Source column: the collector that made the launch.

    A trace-pass launch carries CUPTI's kernel record fields (metrics with source "cupti"), and its
    grid and block are that record's "grid" and "block"; a launch built from an Nsight Compute
    result alone (`kernelscope import`, or a result no trace launch matched) has ncu's launch__
    counters and no start time. When a session has neither mark the source is not recorded.
    """
    if any(m.source == "cupti" for m in x.metrics.values()):
        return "cupti: grid", "cupti: block"
    if x.start_ns is None and "launch__grid_dim_x" in x.counters:
        return NCU_GRID, NCU_BLOCK
    return "source not recorded", "source not recorded"


def _group_dims_source(group: list[Launch]) -> tuple[str, str]:
    """Every collector that gave this configuration's launches (a counter-only launch can join trace ones)."""
    sources = list(dict.fromkeys(dims_source(x) for x in group))
    return " + ".join(g for g, _ in sources), " + ".join(b for _, b in sources)


def _shape_config(s: LaunchShape) -> LaunchConfig:
    regs, smem = s.value("registers_per_thread"), s.value("shared_memory_per_block_bytes")
    return LaunchConfig(
        s.grid, s.block, regs if isinstance(regs, int) else None, smem if isinstance(smem, int) else None
    )


def _launch_config_at(table: LaunchTable, i: int) -> LaunchConfig:
    s = table.shapes[table.shape[i]]
    regs, smem = table.value(i, "registers_per_thread"), table.value(i, "shared_memory_per_block_bytes")
    return LaunchConfig(
        s.grid, s.block, regs if isinstance(regs, int) else None, smem if isinstance(smem, int) else None
    )


def _shapes_dims_source(table: LaunchTable, group: list[int]) -> tuple[str, str]:
    """_group_dims_source of the launches of these shapes, in launch order: one answer per shape, except for
    launches with counter results or without a start time (an ncu-only launch names ncu)."""
    firsts: list[tuple[int, tuple[str, str]]] = []
    unstarted = None in table.start_ns  # once: a scan of every launch per shape would be quadratic
    for sid in group:
        s = table.shapes[sid]
        cupti = any(m.source == "cupti" for m in s.metrics.values()) or any(t[1] == "cupti" for t in s.varying.values())
        plain = ("cupti: grid", "cupti: block") if cupti else ("source not recorded", "source not recorded")
        # a launch with a start time has the shape's source (its metrics are the shape's, whatever details it
        # has, e.g. an NCCL kernel's collective): only launches without one (ncu's alone) may name another
        special = [i for i, (x, st) in enumerate(zip(table.shape, table.start_ns)) if x == sid and st is None] \
            if unstarted else []
        if not special:
            firsts.append((table.first_launch(sid) or 0, plain))
            continue
        special_set = set(special)
        first_plain = next((i for i, x in enumerate(table.shape) if x == sid and i not in special_set), None)
        if first_plain is not None:
            firsts.append((first_plain, plain))
        firsts += [(i, dims_source(table.launch(i))) for i in sorted(special_set)]
    sources = list(dict.fromkeys(src for _, src in sorted(firsts)))
    return " + ".join(g for g, _ in sources), " + ".join(b for _, b in sources)


def _occupancy(
    cfg: LaunchConfig, arch: SMArch | None, arch_reason: str | None
) -> tuple[OccupancyResult | None, str | None]:
    if arch is None:
        return None, arch_reason
    if cfg.registers_per_thread is None or cfg.shared_memory_per_block_bytes is None:
        return None, "registers or shared memory per block were not recorded for this launch"
    try:
        return theoretical_occupancy(arch, cfg.threads_per_block, cfg.registers_per_thread,
                                     cfg.shared_memory_per_block_bytes), None
    except OccupancyInputError as e:
        return None, str(e)


@collector_paused()
def summarize(session: Session) -> SessionSummary:
    arch: SMArch | None = None
    arch_reason: str | None = None
    sm_count: int | None = None
    if session.device is None:
        arch_reason = "no device was recorded, so the SM limits are unknown"
    else:
        try:
            arch = arch_for_device(session.device)
        except UnknownArchError as e:
            arch_reason = str(e)
        v = session.device.value("sm_count")
        sm_count = v if isinstance(v, int) else None

    # Column-wise (model.LaunchTable): launches are grouped by shape in one pass; Launch objects are built only
    # for each configuration's first launch and the few with counter results.
    table = session.launch_table()
    shapes = table.shapes
    every, _ = table.durations_by_shape()
    first = {sid: table.first_launch(sid) for sid in range(len(shapes))}
    used = sorted((f, sid) for sid, f in first.items() if f is not None)  # shapes in the order they first ran
    per_launch_config = any(n in s.varying for s in shapes for n in ("registers_per_thread",
                                                                      "shared_memory_per_block_bytes"))
    by_name: dict[str, dict[LaunchConfig, list[int]]] = {}  # kernel -> configuration -> launch indices or shapes
    if per_launch_config:  # registers or shared memory that differ between launches of one shape: per launch
        for i, sid in enumerate(table.shape):
            by_name.setdefault(shapes[sid].kernel, {}).setdefault(_launch_config_at(table, i), []).append(i)
    else:
        for _, sid in used:
            by_name.setdefault(shapes[sid].kernel, {}).setdefault(_shape_config(shapes[sid]), []).append(sid)
    total_all = sum(table.duration_ns)
    sorted_durations = table.durations_by_kernel()  # the median's sort, shared with the analysis
    dur = table.duration_ns
    kernels = []
    for name, groups in by_name.items():
        configs = []
        durations: list[int] = []
        for cfg, group in groups.items():
            occ, reason = _occupancy(cfg, arch, arch_reason)
            waves = None
            if occ is not None and sm_count and occ.active_blocks_per_sm > 0:
                waves = cfg.blocks / (occ.active_blocks_per_sm * sm_count)
            if per_launch_config:
                first_i, cfg_durs = group[0], [dur[i] for i in group]
                dims = _group_dims_source([table.launch(i) for i in group])
            else:
                first_i = min(first[sid] for sid in group)  # type: ignore[type-var]
                cfg_durs = [d for sid in group for d in every[sid]]
                dims = _shapes_dims_source(table, group)
            durations += cfg_durs
            configs.append(ConfigSummary(cfg, len(cfg_durs), sum(cfg_durs), occ, reason, waves,
                                         dict(table.launch(first_i).metrics), *dims))
        configs.sort(key=lambda c: -c.total_ns)
        regions = sorted({r for sid in table.shapes_of(name) for r in shapes[sid].regions})
        total = sum(durations)
        kernels.append(KernelSummary(
            name=name, short_name=short_kernel_name(name), launches=len(durations), total_ns=total,
            mean_ns=total / len(durations), median_ns=float(statistics.median(sorted_durations[name][1])),
            min_ns=min(durations), max_ns=max(durations),
            share_of_kernel_time=(total / total_all) if total_all else 0.0,
            configs=tuple(configs), regions=tuple(regions),
        ))
    kernels.sort(key=lambda k: (-k.total_ns, k.name))
    labels = distinct_short_names(k.name for k in kernels)  # in time order: "#1" is the one with most time
    kernels = [dataclasses.replace(k, label=labels[k.name]) for k in kernels]
    return SessionSummary(tuple(kernels), total_all, len(table), sm_count)


def select_kernels(summary: SessionSummary, pattern: str | None, top: int) -> tuple[KernelSummary, ...]:
    """Kernels whose full or short name matches ``pattern`` (a regex), else the top few by time."""
    if pattern is None:
        return summary.kernels[:top]
    rx = re.compile(pattern)
    return tuple(k for k in summary.kernels if rx.search(k.name) or rx.search(k.short_name) or rx.search(k.label))
