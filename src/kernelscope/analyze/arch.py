"""Per-architecture SM facts for the occupancy calculator: a table, not if-chains.

Values from NVIDIA's CUDA C++ Programming Guide (compute capability tables) and
the CUDA Occupancy Calculator; checked against Nsight Compute's occupancy
figures on an H100 (tests/data/ncu_occupancy_*.csv).
"""
from __future__ import annotations

from dataclasses import dataclass

KIB = 1024


@dataclass(frozen=True)
class SMArch:
    arch: str
    max_warps_per_sm: int
    max_blocks_per_sm: int
    max_threads_per_block: int
    registers_per_sm: int
    max_registers_per_thread: int
    register_allocation_unit: int  # registers, allocated per warp
    register_file_partitions: int  # registers are allocated per SM sub-partition
    max_shared_memory_per_sm_bytes: int  # largest carveout
    max_shared_memory_per_block_bytes: int  # opt-in limit
    shared_memory_allocation_unit_bytes: int
    reserved_shared_memory_per_block_bytes: int  # runtime's per-block reservation
    shared_memory_carveouts_kib: tuple[int, ...]  # configurable per-SM shared memory sizes
    warp_size: int = 32


ARCHS: dict[str, SMArch] = {a.arch: a for a in (
    SMArch("sm_70", 64, 32, 1024, 65536, 255, 256, 4, 96 * KIB, 96 * KIB, 256, 0, (0, 8, 16, 32, 64, 96)),
    SMArch("sm_75", 32, 16, 1024, 65536, 255, 256, 4, 64 * KIB, 64 * KIB, 256, 0, (32, 64)),
    SMArch("sm_80", 64, 32, 1024, 65536, 255, 256, 4, 164 * KIB, 163 * KIB, 128, 1 * KIB,
           (0, 8, 16, 32, 64, 100, 132, 164)),
    SMArch("sm_86", 48, 16, 1024, 65536, 255, 256, 4, 100 * KIB, 99 * KIB, 128, 1 * KIB,
           (0, 8, 16, 32, 64, 100)),
    SMArch("sm_87", 48, 16, 1024, 65536, 255, 256, 4, 164 * KIB, 163 * KIB, 128, 1 * KIB,
           (0, 8, 16, 32, 64, 100, 132, 164)),
    SMArch("sm_89", 48, 24, 1024, 65536, 255, 256, 4, 100 * KIB, 99 * KIB, 128, 1 * KIB,
           (0, 8, 16, 32, 64, 100)),
    SMArch("sm_90", 64, 32, 1024, 65536, 255, 256, 4, 228 * KIB, 227 * KIB, 128, 1 * KIB,
           (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)),
)}


class UnknownArchError(ValueError):
    pass


def arch_for(arch: str | tuple[int, int]) -> SMArch:
    """Look up ``"sm_90"``, ``"90"``, ``"9.0"`` or ``(9, 0)``."""
    if isinstance(arch, tuple):
        key = f"sm_{arch[0]}{arch[1]}"
    else:
        s = arch.strip().lower().replace("sm_", "").replace("sm", "").replace(".", "").rstrip("a")
        key = f"sm_{s}"
    try:
        return ARCHS[key]
    except KeyError:
        raise UnknownArchError(
            f"no occupancy table for {key}; known architectures: {', '.join(sorted(ARCHS))}") from None
