"""Device attributes straight from the CUDA driver (libcuda, through ctypes).

The driver is the authority on what the device is; no torch needed. Every call
goes through one wrapper that turns a driver error into a missing Metric.
"""
from __future__ import annotations

import ctypes
import importlib.util
from typing import Any

from kernelscope.collect.fields import CC_MAJOR_ATTRIBUTE, CC_MINOR_ATTRIBUTE, DRIVER_ATTRIBUTES
from kernelscope.model import Device, Metric, attribute


class DriverUnavailable(RuntimeError):
    """No CUDA driver or no device; the message is one sentence for the user."""


def _load() -> Any:
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    raise DriverUnavailable("no NVIDIA CUDA driver (libcuda) was found on this machine")


def _check(lib: Any, rc: int, what: str) -> None:
    if rc != 0:
        msg = ctypes.c_char_p()
        lib.cuGetErrorString(rc, ctypes.byref(msg))
        text = msg.value.decode() if msg.value else f"error {rc}"
        raise DriverUnavailable(f"the CUDA driver failed {what}: {text}")


def device_count() -> int:
    lib = _load()
    _check(lib, lib.cuInit(0), "to initialise")
    n = ctypes.c_int()
    _check(lib, lib.cuDeviceGetCount(ctypes.byref(n)), "to count devices")
    return n.value


def query_device(ordinal: int = 0) -> Device:
    """Read name, compute capability and the attributes kernelscope uses."""
    lib = _load()
    _check(lib, lib.cuInit(0), "to initialise")
    dev = ctypes.c_int()
    _check(lib, lib.cuDeviceGet(ctypes.byref(dev), ordinal), f"to open device {ordinal}")

    def attr(enum: int) -> int | None:
        v = ctypes.c_int()
        return v.value if lib.cuDeviceGetAttribute(ctypes.byref(v), enum, dev) == 0 else None

    name = ctypes.create_string_buffer(256)
    _check(lib, lib.cuDeviceGetName(name, 256, dev), "to name the device")
    major, minor = attr(CC_MAJOR_ATTRIBUTE), attr(CC_MINOR_ATTRIBUTE)
    attrs: dict[str, Metric] = {}
    for model, enum, unit, raw in DRIVER_ATTRIBUTES:
        v = attr(enum)
        attrs[model] = attribute(v, unit, raw) if v is not None else Metric.missing(
            raw, "the driver did not report this attribute", "device-spec", unit)
    total = ctypes.c_size_t()
    if lib.cuDeviceTotalMem_v2(ctypes.byref(total), dev) == 0:
        attrs["total_memory_bytes"] = attribute(total.value, "byte", "cuDeviceTotalMem")
    bus = ctypes.create_string_buffer(64)
    if lib.cuDeviceGetPCIBusId(bus, 64, dev) == 0:
        attrs["pci_bus_id_string"] = attribute(bus.value.decode(), "", "cuDeviceGetPCIBusId")
    ver = ctypes.c_int()
    if lib.cuDriverGetVersion(ctypes.byref(ver)) == 0:
        attrs["cuda_driver_api_version"] = attribute(ver.value, "", "cuDriverGetVersion")
    return Device(index=ordinal, name=name.value.decode(errors="replace"),
                  compute_capability=(major or 0, minor or 0), attributes=attrs)


def driver_gpu() -> tuple[bool, str]:
    """The first question of :func:`gpu_available`, answered by the driver alone (no torch): (True, "") when the
    CUDA driver sees a device, else (False, why not). Commands ask it before asking for libraries, so a machine
    without a GPU is told so rather than asked to install Triton."""
    try:
        if device_count() == 0:
            return False, "the CUDA driver reports no devices"
    except DriverUnavailable as e:
        return False, str(e)
    return True, ""


TORCH_CUDA = "pip install torch (the CUDA build for this GPU: https://pytorch.org/get-started/locally/)"
TORCH_CPU = "pip install torch --index-url https://download.pytorch.org/whl/cpu (the CPU build: there is no GPU here)"


def torch_install() -> str:
    """How to install torch on this machine: the CUDA build where the driver sees a GPU, else the CPU build
    (plain `pip install torch` on Linux pulls a multi-GB CUDA build that nothing here could use)."""
    return TORCH_CUDA if driver_gpu()[0] else TORCH_CPU


def gpu_available(also_needs: tuple[str, ...] = ()) -> tuple[bool, str]:
    """The one answer to "can kernelscope run CUDA kernels here": (True, "") or (False, why not, in a few words).

    In order: a CUDA driver with at least one device, torch (and the modules in ``also_needs``)
    installed, and a torch built with CUDA that sees the GPU. Callers add what they needed it for.
    """
    ok, why = driver_gpu()
    if not ok:
        return False, why
    missing = [m for m in ("torch", *also_needs) if importlib.util.find_spec(m) is None]
    if missing:
        return False, f"{' and '.join(missing)} {'is' if len(missing) == 1 else 'are'} not installed in this Python"
    import torch

    if not torch.cuda.is_available():
        return False, "PyTorch sees no CUDA GPU here"
    return True, ""
