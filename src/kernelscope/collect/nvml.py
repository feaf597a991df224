"""A one-off NVML snapshot at session start: driver, clocks, power, temperature.

NVML is optional (nvidia-ml-py). Each field that NVML refuses becomes a missing
Metric with NVML's own error text, and the rest goes on (nvitop's NA idea).
"""
from __future__ import annotations

from typing import Any, Callable

from kernelscope.model import Metric


def _na(raw: str, unit: str, fn: Callable[[], Any], scale: float = 1.0) -> Metric:
    try:
        v = fn()
    except Exception as e:  # NVMLError subclasses; any failure is "not available"
        return Metric.missing(raw, f"NVML: {e}", "nvml", unit)
    if isinstance(v, bytes):
        v = v.decode()
    if scale != 1.0 and isinstance(v, (int, float)):
        v = v * scale
    return Metric(value=v, unit=unit, source="nvml", raw_name=raw)


def snapshot(pci_bus_id: str | None, index: int) -> tuple[dict[str, Metric], str | None]:
    """Return (metrics, reason-if-unavailable) for the device at this PCI bus id.

    The bus id, not the CUDA ordinal, picks the NVML device: CUDA_VISIBLE_DEVICES
    renumbers CUDA devices but not NVML's.
    """
    try:
        import pynvml
    except ImportError:
        return {}, "nvidia-ml-py is not installed (pip install 'kernelscope[nvml]')"
    try:
        pynvml.nvmlInit()
    except Exception as e:
        return {}, f"NVML could not start: {e}"
    try:
        if pci_bus_id:
            h = pynvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
        else:
            h = pynvml.nvmlDeviceGetHandleByIndex(index)
        n = pynvml
        return {
            "driver_version": _na("nvmlSystemGetDriverVersion", "", n.nvmlSystemGetDriverVersion),
            "sm_clock_mhz": _na("nvmlDeviceGetClockInfo(SM)", "MHz", lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),
            "sm_clock_max_mhz": _na("nvmlDeviceGetMaxClockInfo(SM)", "MHz", lambda: n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM)),
            "memory_clock_mhz": _na("nvmlDeviceGetClockInfo(MEM)", "MHz", lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM)),
            "memory_clock_max_mhz": _na("nvmlDeviceGetMaxClockInfo(MEM)", "MHz", lambda: n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_MEM)),
            "power_limit_w": _na("nvmlDeviceGetEnforcedPowerLimit", "W", lambda: n.nvmlDeviceGetEnforcedPowerLimit(h), 1e-3),
            "temperature_c": _na("nvmlDeviceGetTemperature(GPU)", "C", lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),
            "throttle_reasons": _na("nvmlDeviceGetCurrentClocksEventReasons", "bitmask", lambda: n.nvmlDeviceGetCurrentClocksEventReasons(h)),
        }, None
    except Exception as e:
        return {}, f"NVML could not read device {index}: {e}"
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass
