"""A one-off NVML snapshot for the session's device: driver, clocks, power, temperature.

NVML is optional (nvidia-ml-py). Each field that NVML refuses becomes a missing
Metric with NVML's own error text, and the rest goes on (see nvml_api).
"""
from __future__ import annotations

from kernelscope.collect.nvml import api as nvml_api
from kernelscope.collect.nvml.api import Nvml, NvmlUnavailable
from kernelscope.model import Metric

# Keys the session header and device attributes use (a subset of a sampler reading).
_SNAPSHOT_KEYS = ("sm_clock_mhz", "memory_clock_mhz", "temperature_c", "throttle_reasons",
                  "sm_clock_max_mhz", "memory_clock_max_mhz", "power_limit_w")


def snapshot(pci_bus_id: str | None, index: int, nvml: Nvml | None = None) -> tuple[dict[str, Metric], str | None]:
    """Return (metrics, reason-if-unavailable) for the device at this PCI bus id."""
    try:
        n = nvml_api.load(nvml)
        nvml_api.start(n)
    except NvmlUnavailable as e:
        return {}, str(e)
    try:
        h, err = nvml_api.call(n, lambda: nvml_api.handle_for(n, pci_bus_id, index))
        if err is not None:
            return {}, f"NVML could not find device {index}: {err}"
        reading = nvml_api.snapshot(n, h, pcie=False)
        out = {"driver_version": nvml_api.read(n, "nvmlSystemGetDriverVersion", "", n.nvmlSystemGetDriverVersion)}
        out.update({k: reading[k] for k in _SNAPSHOT_KEYS})
        return out, None
    finally:
        nvml_api.stop(n)
