"""Theoretical occupancy: how many blocks and warps fit on one SM, and what limits them.

Follows the CUDA Occupancy Calculator's rules: registers are allocated per warp
in units of 256 within each of the SM's four register-file partitions; shared
memory per block is the kernel's static + dynamic plus the runtime's reserved
1 KiB, rounded up to 128 bytes; warps, blocks, registers and shared memory each
allow some number of blocks, and the smallest wins. Checked against Nsight
Compute's launch__occupancy_limit_* and sm__maximum_warps_per_active_cycle_pct.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from kernelscope.analyze.arch import NOT_CHECKED, SMArch, arch_for
from kernelscope.model import Device

# Fixed order for naming the limiter when several factors bind equally.
LIMITER_ORDER = ("warps", "registers", "shared_memory", "blocks")


class OccupancyInputError(ValueError):
    """A configuration that cannot launch; one sentence for the user."""


@dataclass(frozen=True)
class OccupancyResult:
    arch: str
    threads_per_block: int
    warps_per_block: int
    registers_per_thread: int
    shared_memory_per_block_bytes: int
    shared_memory_allocated_per_block_bytes: int
    shared_memory_config_bytes: int
    blocks_limit: dict[str, int]  # blocks per SM each factor allows
    active_blocks_per_sm: int
    active_warps_per_sm: int
    max_warps_per_sm: int
    theoretical_occupancy_pct: float
    limiter: str
    limiters: tuple[str, ...]
    checked_against_ncu: bool = False  # the architecture's table was compared with Nsight Compute on that hardware
    limits_source: str = ""  # where the architecture's limits come from

    @property
    def caveat(self) -> str | None:
        """What a reader must be told about the limits used, or None when they were checked."""
        return None if self.checked_against_ncu else f"{self.arch} limits from the {self.limits_source}; {NOT_CHECKED}"

    def as_json(self) -> dict[str, object]:
        return {
            "theoretical_occupancy_pct": round(self.theoretical_occupancy_pct, 2),
            "active_blocks_per_sm": self.active_blocks_per_sm,
            "limiter": self.limiter,
            "limiters": list(self.limiters),
            "active_warps_per_sm": self.active_warps_per_sm,
            "max_warps_per_sm": self.max_warps_per_sm,
            "blocks_limit": dict(self.blocks_limit),
            "shared_memory_allocated_per_block_bytes": self.shared_memory_allocated_per_block_bytes,
            "shared_memory_config_bytes": self.shared_memory_config_bytes,
            "arch": self.arch,
            "checked_against_ncu": self.checked_against_ncu,
            "limits_source": self.limits_source,
        }


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def theoretical_occupancy(
    arch: str | tuple[int, int] | SMArch,
    threads_per_block: int,
    registers_per_thread: int,
    shared_memory_per_block_bytes: int = 0,
    shared_memory_config_bytes: int | None = None,
) -> OccupancyResult:
    """Occupancy of one launch configuration.

    ``shared_memory_per_block_bytes`` is the kernel's static + dynamic shared
    memory (what ncu calls launch__shared_mem_per_block_static + _dynamic).
    ``shared_memory_config_bytes`` is the SM's shared-memory carveout; by
    default the largest, which is what the driver can pick for this kernel.
    """
    a = arch if isinstance(arch, SMArch) else arch_for(arch)
    if threads_per_block < 1 or threads_per_block > a.max_threads_per_block:
        raise OccupancyInputError(
            f"a block of {threads_per_block} threads cannot launch on {a.arch} (1 to {a.max_threads_per_block})")
    if registers_per_thread < 0 or registers_per_thread > a.max_registers_per_thread:
        raise OccupancyInputError(
            f"{registers_per_thread} registers per thread is outside 0..{a.max_registers_per_thread} on {a.arch}")
    if shared_memory_per_block_bytes < 0 or shared_memory_per_block_bytes > a.max_shared_memory_per_block_bytes:
        raise OccupancyInputError(
            f"{shared_memory_per_block_bytes} bytes of shared memory per block exceeds the "
            f"{a.max_shared_memory_per_block_bytes}-byte limit on {a.arch}")
    config = a.max_shared_memory_per_sm_bytes if shared_memory_config_bytes is None else shared_memory_config_bytes
    if shared_memory_config_bytes is not None and config not in a.carveouts_bytes:
        # Only the sizes the hardware offers exist; anything else would be a made-up SM.
        kib = ", ".join(str(k) for k in a.shared_memory_carveouts_kib)
        raise OccupancyInputError(
            f"a shared-memory carveout of {config} bytes is not one {a.arch} offers; its carveouts are "
            f"{kib} KiB (1 KiB = 1024 bytes, e.g. {a.carveouts_bytes[-1]} for {a.shared_memory_carveouts_kib[-1]} KiB)")

    warps_per_block = -(-threads_per_block // a.warp_size)
    limits: dict[str, int] = {"warps": a.max_warps_per_sm // warps_per_block}
    if registers_per_thread == 0:
        limits["registers"] = a.max_blocks_per_sm
    else:
        regs_per_warp = _round_up(registers_per_thread * a.warp_size, a.register_allocation_unit)
        per_partition = (a.registers_per_sm // a.register_file_partitions) // regs_per_warp
        limits["registers"] = per_partition * a.register_file_partitions // warps_per_block
    smem_alloc = _round_up(shared_memory_per_block_bytes + a.reserved_shared_memory_per_block_bytes,
                           a.shared_memory_allocation_unit_bytes)
    limits["shared_memory"] = config // smem_alloc
    limits["blocks"] = a.max_blocks_per_sm

    active = min(limits.values())
    binding = tuple(k for k in LIMITER_ORDER if limits[k] == active)
    return OccupancyResult(
        arch=a.arch,
        threads_per_block=threads_per_block,
        warps_per_block=warps_per_block,
        registers_per_thread=registers_per_thread,
        shared_memory_per_block_bytes=shared_memory_per_block_bytes,
        shared_memory_allocated_per_block_bytes=smem_alloc,
        shared_memory_config_bytes=config,
        blocks_limit=limits,
        active_blocks_per_sm=active,
        active_warps_per_sm=active * warps_per_block,
        max_warps_per_sm=a.max_warps_per_sm,
        theoretical_occupancy_pct=100.0 * active * warps_per_block / a.max_warps_per_sm,
        limiter=binding[0],
        limiters=binding,
        checked_against_ncu=a.checked_against_ncu,
        limits_source=a.source,
    )


def arch_for_device(device: Device) -> SMArch:
    """The architecture table, with the limits the driver reported for this device in place."""
    a = arch_for(device.compute_capability)
    overrides: dict[str, int] = {}
    threads = device.value("max_threads_per_sm")
    if isinstance(threads, int) and threads > 0:
        overrides["max_warps_per_sm"] = threads // a.warp_size
    for field, key in (("max_blocks_per_sm", "max_blocks_per_sm"),
                       ("registers_per_sm", "max_registers_per_sm"),
                       ("max_shared_memory_per_sm_bytes", "max_shared_memory_per_sm_bytes"),
                       ("max_shared_memory_per_block_bytes", "max_shared_memory_per_block_optin_bytes"),
                       ("reserved_shared_memory_per_block_bytes", "reserved_shared_memory_per_block_bytes")):
        v = device.value(key)
        if isinstance(v, int) and v > 0:
            overrides[field] = v
    return dataclasses.replace(a, **overrides)
