"""Per-architecture SM facts for the occupancy calculator: a table, not if-chains.

Warps, blocks, registers and shared memory per SM and per block, and the
shared-memory carveout sizes, are those of NVIDIA's CUDA C++ Programming Guide,
"Compute Capabilities" appendix (Tables 30-32: device and SM information, memory
information, shared memory capacity per compute capability). The register
allocation unit (256 registers per warp, in 4 register-file partitions), the
128-byte shared-memory allocation unit and the 1 KiB the runtime reserves per
block come from the CUDA Occupancy Calculator for Volta to Hopper; newer rows
carry them over. Only sm_90 has been checked against Nsight Compute's occupancy
figures (on an H100: tests/data/ncu_occupancy_*.csv); every other row says so
(``checked_against_ncu=False``) and the output repeats it.
"""
from __future__ import annotations

from dataclasses import dataclass

KIB = 1024
PROGRAMMING_GUIDE = "CUDA C++ Programming Guide, compute capability tables"
NOT_CHECKED = "not yet checked against Nsight Compute on this hardware"


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
    checked_against_ncu: bool = False  # True only where Nsight Compute's figures were compared on that hardware
    source: str = PROGRAMMING_GUIDE

    @property
    def carveouts_bytes(self) -> tuple[int, ...]:
        return tuple(k * KIB for k in self.shared_memory_carveouts_kib)


_HOPPER_CARVEOUTS = (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)
_SMALL_CARVEOUTS = (0, 8, 16, 32, 64, 100)

ARCHS: dict[str, SMArch] = {a.arch: a for a in (
    SMArch("sm_70", 64, 32, 1024, 65536, 255, 256, 4, 96 * KIB, 96 * KIB, 256, 0, (0, 8, 16, 32, 64, 96)),
    SMArch("sm_75", 32, 16, 1024, 65536, 255, 256, 4, 64 * KIB, 64 * KIB, 256, 0, (32, 64)),
    SMArch("sm_80", 64, 32, 1024, 65536, 255, 256, 4, 164 * KIB, 163 * KIB, 128, 1 * KIB,
           (0, 8, 16, 32, 64, 100, 132, 164)),
    SMArch("sm_86", 48, 16, 1024, 65536, 255, 256, 4, 100 * KIB, 99 * KIB, 128, 1 * KIB, _SMALL_CARVEOUTS),
    SMArch("sm_87", 48, 16, 1024, 65536, 255, 256, 4, 164 * KIB, 163 * KIB, 128, 1 * KIB,
           (0, 8, 16, 32, 64, 100, 132, 164)),
    SMArch("sm_89", 48, 24, 1024, 65536, 255, 256, 4, 100 * KIB, 99 * KIB, 128, 1 * KIB, _SMALL_CARVEOUTS),
    SMArch("sm_90", 64, 32, 1024, 65536, 255, 256, 4, 228 * KIB, 227 * KIB, 128, 1 * KIB, _HOPPER_CARVEOUTS,
           checked_against_ncu=True, source=f"{PROGRAMMING_GUIDE}; checked against Nsight Compute on an H100"),
    # Blackwell: 10.0 (B200), 10.3 (B300) and 11.0 (Thor, called 10.1 / sm_101 before CUDA 13) have
    # 228 KiB carveouts; 11.0 and 12.x (RTX 50, RTX PRO, 12.1 GB10) have 48 warps and 24 blocks per SM.
    SMArch("sm_100", 64, 32, 1024, 65536, 255, 256, 4, 228 * KIB, 227 * KIB, 128, 1 * KIB, _HOPPER_CARVEOUTS),
    SMArch("sm_103", 64, 32, 1024, 65536, 255, 256, 4, 228 * KIB, 227 * KIB, 128, 1 * KIB, _HOPPER_CARVEOUTS),
    SMArch("sm_110", 48, 24, 1024, 65536, 255, 256, 4, 228 * KIB, 227 * KIB, 128, 1 * KIB, _HOPPER_CARVEOUTS),
    SMArch("sm_120", 48, 24, 1024, 65536, 255, 256, 4, 100 * KIB, 99 * KIB, 128, 1 * KIB, _SMALL_CARVEOUTS),
    SMArch("sm_121", 48, 24, 1024, 65536, 255, 256, 4, 100 * KIB, 99 * KIB, 128, 1 * KIB, _SMALL_CARVEOUTS),
)}

# Names a compute capability had before NVIDIA renamed it (CUDA 13.0 renamed Thor's sm_101 to sm_110).
ALIASES = {"sm_101": "sm_110"}


class UnknownArchError(ValueError):
    pass


def arch_for(arch: str | tuple[int, int]) -> SMArch:
    """Look up ``"sm_90"``, ``"90"``, ``"9.0"``, ``"sm_100a"`` or ``(9, 0)``."""
    if isinstance(arch, tuple):
        key = f"sm_{arch[0]}{arch[1]}"
    else:
        s = arch.strip().lower().replace("sm_", "").replace("sm", "").replace(".", "").rstrip("af")
        key = f"sm_{s}"
    key = ALIASES.get(key, key)
    try:
        return ARCHS[key]
    except KeyError:
        raise UnknownArchError(
            f"no occupancy table for {key}; known architectures: {', '.join(sorted(ARCHS))}") from None
