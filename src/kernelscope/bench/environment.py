"""What a benchmark ran on: device, driver, software versions, clocks and temperature.

Every field is a dict with a "value" (driver and NVML fields are Metric dicts
with unit, source and raw name) or, when it could not be read, value None and
the "missing_reason": a results file never claims a value nobody measured. NVML (clocks, temperature, throttle
reasons) is read at
the start and at the end of the run, so a file shows whether the GPU heated
up or clocked down while it was measured.
"""
from __future__ import annotations

import datetime as _dt
import platform
import sys
from typing import Any

from kernelscope import __version__
from kernelscope.model import Metric

def field(value: Any, missing_reason: str | None = None) -> dict[str, Any]:
    """A plain environment field: {"value": v}, or value None with the reason it is missing."""
    return {"value": value} if missing_reason is None else {"value": None, "missing_reason": missing_reason}


def software() -> dict[str, Any]:
    """Versions of Python, torch, CUDA (torch's build), cuDNN and Triton; missing ones say why."""
    out: dict[str, Any] = {"python": field(sys.version.split()[0]), "platform": field(platform.platform()),
                           "kernelscope": field(__version__)}
    try:
        import torch
    except ImportError:
        for k in ("torch", "cuda_runtime", "cudnn"):
            out[k] = field(None, "torch is not installed")
    else:
        out["torch"] = field(torch.__version__)
        out["cuda_runtime"] = field(torch.version.cuda, None if torch.version.cuda else "this torch build has no CUDA")
        cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
        out["cudnn"] = field(cudnn, None if cudnn else "cuDNN is not available to torch")
    try:
        import triton
    except ImportError:
        out["triton"] = field(None, "triton is not installed")
    else:
        out["triton"] = field(triton.__version__)
    return out


def device(ordinal: int = 0) -> tuple[dict[str, Any], str | None]:
    """(device fields, PCI bus id) from the CUDA driver; a missing 'name' with the reason if there is none."""
    from kernelscope.collect.driver import DriverUnavailable, query_device

    try:
        d = query_device(ordinal)
    except DriverUnavailable as e:
        return {"name": Metric.missing("cuDeviceGetName", str(e), "device-spec").to_dict()}, None
    fields: dict[str, Any] = {
        "name": Metric(d.name, "", "device-spec", "cuDeviceGetName").to_dict(),
        "compute_capability": Metric(f"{d.compute_capability[0]}.{d.compute_capability[1]}", "", "device-spec",
                                     "CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR/MINOR").to_dict(),
    }
    for key in ("sm_count", "l2_cache_bytes", "total_memory_bytes", "cuda_driver_api_version"):
        if key in d.attributes:
            fields[key] = d.attributes[key].to_dict()
    bus = d.attributes.get("pci_bus_id_string")
    return fields, (bus.value if bus is not None and not bus.is_missing else None)


def nvml_state(pci_bus_id: str | None, ordinal: int = 0) -> dict[str, Any]:
    """One NVML snapshot of clocks, temperature, power limit and throttle reasons (missing ones say why).

    Without NVML the dict is just {"missing_reason": why} (plus the missing driver version).
    """
    from kernelscope.collect.nvml.snapshot import snapshot

    metrics, reason = snapshot(pci_bus_id, ordinal)
    if reason is not None:  # one reason for all fields rather than the same sentence eight times
        return {"missing_reason": reason,
                "driver_version": Metric.missing("nvmlSystemGetDriverVersion", reason, "nvml").to_dict()}
    return {k: m.to_dict() for k, m in metrics.items()}


def clocks_now(pci_bus_id: str | None, ordinal: int = 0) -> dict[str, Any]:
    """SM clock, temperature and throttle state right now (NVML), as row fields.

    ``clock_flags_after`` lists why the measurement just taken should not be
    trusted as-is (throttle reasons, clock far below its maximum), by the same
    rules as the session's GPU-stats panel; empty means nothing was seen. Values
    NVML cannot give are None with the reason.
    """
    import time

    from kernelscope.analyze.gpu_stats import sample_flags
    from kernelscope.collect.nvml.snapshot import snapshot
    from kernelscope.model import Sample

    metrics, reason = snapshot(pci_bus_id, ordinal)
    out: dict[str, Any] = {}
    for key in ("sm_clock_mhz", "temperature_c"):
        m = metrics.get(key)
        out[f"{key}_after"] = None if m is None else m.value
        if m is None or m.is_missing:
            out[f"{key}_after_missing_reason"] = reason if m is None else m.missing_reason
    if reason is None:
        out["clock_flags_after"] = list(sample_flags(Sample(time.time_ns(), ordinal, metrics)))
    else:
        out["clock_flags_after_missing_reason"] = reason
    return out


def environment_at_start(ordinal: int = 0) -> dict[str, Any]:
    dev, bus = device(ordinal)
    nvml = nvml_state(bus, ordinal)
    return {
        "date_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "device": dev,
        "driver_version": nvml.pop("driver_version"),
        "software": software(),
        "nvml_start": nvml,
        "pci_bus_id": bus,
    }


def add_environment_at_end(env: dict[str, Any], ordinal: int = 0) -> None:
    """Add the end-of-run NVML snapshot (clocks and temperature after the work)."""
    nvml = nvml_state(env.get("pci_bus_id"), ordinal)
    nvml.pop("driver_version", None)
    env["nvml_end"] = nvml
    env["date_utc_end"] = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def device_name(env: dict[str, Any]) -> str:
    """The device's name from an environment dict, or a phrase saying it is unknown."""
    name = env.get("device", {}).get("name", {})
    return name.get("value") or "unknown device"
