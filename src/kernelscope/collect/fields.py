"""One table: raw collector names -> model names, units, types, provenance.

Collectors read through these tables instead of scattering string keys, so a
renamed field in a new collector version is fixed in one place.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Field:
    raw_name: str
    model_name: str
    unit: str
    cast: Callable[[object], object]
    source: str
    formula: str | None = None  # set when the collector derives the value itself


# Per-kernel fields in a PyTorch profiler (Kineto) trace, from CUPTI kernel records.
KINETO_KERNEL_FIELDS: tuple[Field, ...] = (
    Field("registers per thread", "registers_per_thread", "register/thread", int, "cupti"),
    # CUPTI's static + dynamic shared memory, as one number in the Kineto trace.
    Field("shared memory", "shared_memory_per_block_bytes", "byte/block", int, "cupti"),
    Field("queued", "queued_ns", "ns", int, "cupti"),
    Field("context", "context_id", "", int, "cupti"),
    # Kineto computes these from the launch; kept for completeness, never shown
    # as measurements (its occupancy estimate fails to 0 for large shared memory).
    Field("blocks per SM", "kineto_blocks_per_sm", "block/SM", float, "derived",
          "PyTorch profiler: grid blocks / SM count"),
    Field("warps per SM", "kineto_warps_per_sm", "warp/SM", float, "derived",
          "PyTorch profiler: blocks per SM x warps per block"),
    Field("est. achieved occupancy %", "kineto_estimated_occupancy_pct", "%", float, "derived",
          "PyTorch profiler estimate: min(grid blocks per SM, cudaOcc active blocks) x threads per block / max threads per SM"),
)

# Values the trace pass cannot separate; recorded as missing with this reason.
KINETO_MISSING_FIELDS: tuple[tuple[str, str, str, str], ...] = (
    ("shared_memory_static_bytes", "static shared memory", "byte/block",
     "the PyTorch profiler reports static + dynamic shared memory combined; the counter pass (ncu) separates them"),
    ("shared_memory_dynamic_bytes", "dynamic shared memory", "byte/block",
     "the PyTorch profiler reports static + dynamic shared memory combined; the counter pass (ncu) separates them"),
    ("achieved_occupancy_pct", "sm__warps_active.avg.pct_of_peak_sustained_active", "%",
     "achieved occupancy is a hardware counter: it needs the counter pass (ncu)"),
)

# CUDA driver device attributes (CUdevice_attribute enum values) -> model names.
DRIVER_ATTRIBUTES: tuple[tuple[str, int, str, str], ...] = (
    ("sm_count", 16, "SM", "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT"),
    ("warp_size", 10, "thread", "CU_DEVICE_ATTRIBUTE_WARP_SIZE"),
    ("max_threads_per_block", 1, "thread", "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK"),
    ("max_threads_per_sm", 39, "thread", "CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR"),
    ("max_blocks_per_sm", 106, "block", "CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR"),
    ("max_registers_per_sm", 82, "register", "CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR"),
    ("max_registers_per_block", 12, "register", "CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK"),
    ("max_shared_memory_per_sm_bytes", 81, "byte", "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR"),
    ("max_shared_memory_per_block_bytes", 8, "byte", "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK"),
    ("max_shared_memory_per_block_optin_bytes", 97, "byte", "CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN"),
    ("reserved_shared_memory_per_block_bytes", 111, "byte", "CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK"),
    ("l2_cache_bytes", 38, "byte", "CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE"),
    ("sm_clock_max_khz", 13, "kHz", "CU_DEVICE_ATTRIBUTE_CLOCK_RATE"),
    ("memory_clock_max_khz", 36, "kHz", "CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE"),
    ("memory_bus_width_bits", 37, "bit", "CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH"),
    ("ecc_enabled", 32, "", "CU_DEVICE_ATTRIBUTE_ECC_ENABLED"),
    ("pci_bus_id", 33, "", "CU_DEVICE_ATTRIBUTE_PCI_BUS_ID"),
)
CC_MAJOR_ATTRIBUTE = 75
CC_MINOR_ATTRIBUTE = 76

# Device properties embedded in a Kineto trace ("deviceProperties"), a fallback
# when the driver cannot be queried (e.g. parsing a trace file on another machine).
KINETO_DEVICE_PROPERTIES: tuple[tuple[str, str, str], ...] = (
    ("numSms", "sm_count", "SM"),
    ("warpSize", "warp_size", "thread"),
    ("maxThreadsPerBlock", "max_threads_per_block", "thread"),
    ("maxThreadsPerMultiprocessor", "max_threads_per_sm", "thread"),
    ("regsPerMultiprocessor", "max_registers_per_sm", "register"),
    ("regsPerBlock", "max_registers_per_block", "register"),
    ("sharedMemPerMultiprocessor", "max_shared_memory_per_sm_bytes", "byte"),
    ("sharedMemPerBlock", "max_shared_memory_per_block_bytes", "byte"),
    ("sharedMemPerBlockOptin", "max_shared_memory_per_block_optin_bytes", "byte"),
    ("totalGlobalMem", "total_memory_bytes", "byte"),
)
