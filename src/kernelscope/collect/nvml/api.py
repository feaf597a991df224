"""The one NVML layer: every call into nvidia-ml-py (``pynvml``) goes through here.

Each reading goes through ``read()``, which turns any NVML failure into a
missing Metric carrying NVML's own error text, so one refused field never stops
the others. The ``nvml`` module is always a parameter: the real ``pynvml`` in
use, a scripted fake in tests.
"""
from __future__ import annotations

import math
import time
from collections import deque
from typing import Any, Callable

from kernelscope.model import DeviceReading, GpuProcess, Metric, Sample

Nvml = Any  # the pynvml module or a stand-in with the same functions

# GPM metric id name -> (model name, unit). Hopper and later; values cover the
# time between two GPM samples of the same device.
GPM_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("NVML_GPM_METRIC_SM_UTIL", "sm_activity_pct", "%"),
    ("NVML_GPM_METRIC_SM_OCCUPANCY", "sm_occupancy_pct", "%"),
    ("NVML_GPM_METRIC_ANY_TENSOR_UTIL", "tensor_activity_pct", "%"),
    ("NVML_GPM_METRIC_DRAM_BW_UTIL", "dram_bandwidth_util_pct", "%"),
    ("NVML_GPM_METRIC_PCIE_TX_PER_SEC", "pcie_tx_bytes_per_s", "B/s"),
    ("NVML_GPM_METRIC_PCIE_RX_PER_SEC", "pcie_rx_bytes_per_s", "B/s"),
)
_GPM_SCALE = {"pcie_tx_bytes_per_s": 1024 * 1024, "pcie_rx_bytes_per_s": 1024 * 1024}  # GPM reports MiB/s
# GPM values over short windows alternate between the load and 0 or NaN: the counters behind them refresh
# about every 100 ms, sometimes 150 ms apart (docs/decisions/0007). Windows are kept well above that.
GPM_MIN_WINDOW_NS = 250_000_000


class NvmlUnavailable(Exception):
    """NVML cannot be used here; the message is one sentence for the user."""


def load(nvml: Nvml | None = None) -> Nvml:
    """The given module, or the installed ``pynvml``."""
    if nvml is not None:
        return nvml
    try:
        import pynvml
    except ImportError:
        if not driver_library():  # installing the binding would not help: say what is missing first
            raise NvmlUnavailable("there is no NVIDIA driver here (its NVML library, libnvidia-ml, was not found), "
                                  "so there are no GPU stats to read") from None
        raise NvmlUnavailable("nvidia-ml-py is not installed (pip install 'kernelscope[nvml]')") from None
    return pynvml


NVML_LIBRARIES = ("libnvidia-ml.so.1", "libnvidia-ml.so", "nvml.dll")  # installed by the NVIDIA driver


def driver_library() -> bool:
    """Whether the NVIDIA driver's NVML library loads here (nvidia-ml-py is only the Python binding to it)."""
    import ctypes

    for name in NVML_LIBRARIES:
        try:
            ctypes.CDLL(name)
            return True
        except OSError:
            continue
    return False


def start(nvml: Nvml) -> None:
    try:
        nvml.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound / DriverNotLoaded: no NVIDIA driver here
        raise NvmlUnavailable(f"NVML could not start ({error_text(nvml, e)}): no usable NVIDIA driver here") from None


def stop(nvml: Nvml) -> None:
    try:
        nvml.nvmlShutdown()
    except Exception:  # shutting down is best effort
        pass


def error_text(nvml: Nvml, e: BaseException) -> str:
    if isinstance(e, AttributeError):
        return f"this nvidia-ml-py has no {getattr(e, 'name', None) or e}"
    nvml_error = getattr(nvml, "NVMLError", None)
    if isinstance(nvml_error, type) and isinstance(e, nvml_error):
        return str(e)
    return f"{type(e).__name__}: {e}"


def call(nvml: Nvml, fn: Callable[[], Any]) -> tuple[Any, str | None]:
    """(value, None) or (None, NVML's error text)."""
    try:
        return fn(), None
    except Exception as e:
        return None, error_text(nvml, e)


def read(nvml: Nvml, raw: str, unit: str, fn: Callable[[], Any], scale: float = 1.0, source: str = "nvml") -> Metric:
    value, err = call(nvml, fn)
    return metric(raw, unit, value, err, scale, source)


def metric(raw: str, unit: str, value: Any, err: str | None, scale: float = 1.0, source: str = "nvml") -> Metric:
    if err is not None:
        return Metric.missing(raw, f"NVML: {err}", source, unit)
    if value is None:
        return Metric.missing(raw, "NVML returned no value", source, unit)
    if isinstance(value, float) and not math.isfinite(value):  # GPM gives NaN for some metrics on an idle GPU
        return Metric.missing(raw, f"NVML returned a non-finite value ({value})", source, unit)
    if isinstance(value, bytes):
        value = value.decode(errors="replace")
    if scale != 1.0 and isinstance(value, (int, float)):
        value = value * scale
    return Metric(value=value, unit=unit, source=source, raw_name=raw)


def handle_for(nvml: Nvml, pci_bus_id: str | None, index: int) -> Any:
    """The bus id, not the CUDA ordinal, names the device: CUDA_VISIBLE_DEVICES renumbers only CUDA's."""
    if pci_bus_id:
        return nvml.nvmlDeviceGetHandleByPciBusId(pci_bus_id)
    return nvml.nvmlDeviceGetHandleByIndex(index)


def static_info(nvml: Nvml, h: Any) -> dict[str, Metric]:
    """What does not change while a workload runs: read once, copied into each sample."""
    n = nvml
    return {
        "sm_clock_max_mhz": read(n, "nvmlDeviceGetMaxClockInfo(SM)", "MHz",
                                 lambda: n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_SM)),
        "memory_clock_max_mhz": read(n, "nvmlDeviceGetMaxClockInfo(MEM)", "MHz",
                                     lambda: n.nvmlDeviceGetMaxClockInfo(h, n.NVML_CLOCK_MEM)),
        "power_limit_w": read(n, "nvmlDeviceGetEnforcedPowerLimit", "W", lambda: n.nvmlDeviceGetEnforcedPowerLimit(h),
                              1e-3),
    }


def _throttle_reasons(nvml: Nvml, h: Any) -> Metric:
    # Newer drivers name them "clocks event reasons"; older bindings only have the throttle call.
    raw = "nvmlDeviceGetCurrentClocksEventReasons"
    if not hasattr(nvml, raw):
        raw = "nvmlDeviceGetCurrentClocksThrottleReasons"
    return read(nvml, raw, "bitmask", lambda: getattr(nvml, raw)(h))


def snapshot(nvml: Nvml, h: Any, gpm: "GpmReader | None" = None, static: dict[str, Metric] | None = None,
             pcie: bool = True) -> dict[str, Metric]:
    """One batched reading of a device: utilization, memory, clocks, power, temperature, PCIe, GPM."""
    n = nvml
    util, util_err = call(n, lambda: n.nvmlDeviceGetUtilizationRates(h))
    mem, mem_err = call(n, lambda: n.nvmlDeviceGetMemoryInfo(h))
    out = {
        "gpu_utilization_pct": metric("nvmlDeviceGetUtilizationRates.gpu", "%", getattr(util, "gpu", None), util_err),
        "memory_utilization_pct": metric("nvmlDeviceGetUtilizationRates.memory", "%", getattr(util, "memory", None),
                                         util_err),
        "memory_used_bytes": metric("nvmlDeviceGetMemoryInfo.used", "B", getattr(mem, "used", None), mem_err),
        "memory_total_bytes": metric("nvmlDeviceGetMemoryInfo.total", "B", getattr(mem, "total", None), mem_err),
        "sm_clock_mhz": read(n, "nvmlDeviceGetClockInfo(SM)", "MHz",
                             lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)),
        "memory_clock_mhz": read(n, "nvmlDeviceGetClockInfo(MEM)", "MHz",
                                 lambda: n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_MEM)),
        "power_w": read(n, "nvmlDeviceGetPowerUsage", "W", lambda: n.nvmlDeviceGetPowerUsage(h), 1e-3),
        "temperature_c": read(n, "nvmlDeviceGetTemperature(GPU)", "C",
                              lambda: n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)),
        "throttle_reasons": _throttle_reasons(n, h),
    }
    out.update(static if static is not None else static_info(n, h))
    if gpm is not None:
        out.update(gpm.read())
    if pcie and (gpm is None or gpm.reason is not None):
        # Without GPM, the legacy counter: NVML blocks ~20 ms per call to measure it.
        for key, counter, raw in (
            ("pcie_tx_bytes_per_s", "NVML_PCIE_UTIL_TX_BYTES", "nvmlDeviceGetPcieThroughput(TX)"),
            ("pcie_rx_bytes_per_s", "NVML_PCIE_UTIL_RX_BYTES", "nvmlDeviceGetPcieThroughput(RX)"),
        ):
            out[key] = read(n, raw, "B/s", lambda c=counter: n.nvmlDeviceGetPcieThroughput(h, getattr(n, c)), 1024.0)
    return out


class GpmReader:
    """GPM metrics of one device, each over a trailing window of at least ``min_window_ns``.

    GPM values are differences between two GPM samples. Each read takes one
    sample and measures from the newest kept sample that is at least the
    minimum window old, so reads more frequent than the window still get a
    value (over a slightly longer window). When GPM is unsupported every GPM
    field says why.
    """

    def __init__(self, nvml: Nvml, h: Any, min_window_ns: int = GPM_MIN_WINDOW_NS,
                 clock: Callable[[], int] = time.monotonic_ns) -> None:
        self.nvml, self.handle, self.min_window_ns, self.clock = nvml, h, min_window_ns, clock
        self.reason: str | None = None
        self._kept: deque[tuple[int, Any]] = deque()  # (monotonic ns, GPM sample buffer), oldest first
        self._free: list[Any] = []
        support, err = call(nvml, lambda: nvml.nvmlGpmQueryDeviceSupport(h))
        if err is not None:
            self.reason = f"NVML GPM support query failed: {err}"
        elif not getattr(support, "isSupportedDevice", 0):
            self.reason = "GPM is not supported on this GPU (NVML GPM metrics need Hopper or later)"

    def _missing(self, reason: str) -> dict[str, Metric]:
        return {key: Metric.missing(raw, reason, "gpm", unit) for raw, key, unit in GPM_FIELDS}

    def read(self) -> dict[str, Metric]:
        if self.reason is not None:
            return self._missing(self.reason)
        n = self.nvml
        buf, err = (self._free.pop(), None) if self._free else call(n, n.nvmlGpmSampleAlloc)
        if err is not None:
            return self._missing(f"NVML could not allocate a GPM sample: {err}")
        t = self.clock()
        _, err = call(n, lambda: n.nvmlGpmSampleGet(self.handle, buf))
        if err is not None:
            self._free.append(buf)
            return self._missing(f"NVML GPM sample failed: {err}")
        while len(self._kept) >= 2 and t - self._kept[1][0] >= self.min_window_ns:
            self._free.append(self._kept.popleft()[1])  # a newer sample is old enough to measure from
        base = self._kept[0][1] if self._kept and t - self._kept[0][0] >= self.min_window_ns else None
        self._kept.append((t, buf))
        if base is None:
            return self._missing(f"GPM measures between two GPM samples at least {self.min_window_ns / 1e6:g} ms "
                                 "apart, and sampling began less than that ago")
        return self._query(base, buf)

    def _query(self, prev: Any, cur: Any) -> dict[str, Metric]:
        n = self.nvml
        mg = n.c_nvmlGpmMetricsGet_t()
        mg.version = n.NVML_GPM_METRICS_GET_VERSION
        mg.numMetrics = len(GPM_FIELDS)
        mg.sample1, mg.sample2 = prev, cur
        for i, (raw, _, _) in enumerate(GPM_FIELDS):
            mg.metrics[i].metricId = getattr(n, raw)
        _, err = call(n, lambda: n.nvmlGpmMetricsGet(mg))
        if err is not None:
            return self._missing(f"NVML GPM metrics query failed: {err}")
        out: dict[str, Metric] = {}
        for i, (raw, key, unit) in enumerate(GPM_FIELDS):
            m = mg.metrics[i]
            ret = int(m.nvmlReturn)
            err = None if ret == n.NVML_SUCCESS else error_text(n, n.NVMLError(ret))
            out[key] = metric(raw, unit, float(m.value), err, _GPM_SCALE.get(key, 1.0), "gpm")
        return out

    def close(self) -> None:
        for b in [*self._free, *(buf for _, buf in self._kept)]:
            call(self.nvml, lambda b=b: self.nvml.nvmlGpmSampleFree(b))
        self._free, self._kept = [], deque()


def processes(nvml: Nvml, h: Any) -> tuple[list[GpuProcess], str | None]:
    """Compute and graphics processes on the device, with their GPU memory; (list, reason-if-none)."""
    n = nvml
    found: dict[int, Any] = {}
    errors = []
    for fn in ("nvmlDeviceGetComputeRunningProcesses", "nvmlDeviceGetGraphicsRunningProcesses"):
        procs, err = call(n, lambda fn=fn: getattr(n, fn)(h))
        if err is not None:
            errors.append(f"{fn}: {err}")
            continue
        for p in procs or []:
            found.setdefault(int(p.pid), p)
    if len(errors) == 2:  # one list refused (graphics, on a compute-only GPU) still leaves the other
        return [], "NVML: " + "; ".join(errors)
    out = []
    for pid, p in sorted(found.items()):
        name = read(n, "nvmlSystemGetProcessName", "", lambda pid=pid: n.nvmlSystemGetProcessName(pid))
        used = getattr(p, "usedGpuMemory", None)
        mem = (Metric(value=int(used), unit="B", source="nvml", raw_name="usedGpuMemory") if used is not None else
               Metric.missing("usedGpuMemory", "NVML does not report this process's memory here", "nvml", "B"))
        out.append(GpuProcess(pid=pid, name=name, used_memory=mem))
    return out, None


def read_device(nvml: Nvml, index: int, h: Any, gpm: GpmReader | None, static: dict[str, Metric]) -> DeviceReading:
    """What `top` shows for one device (NVML index) now."""
    t = time.time_ns()
    metrics = snapshot(nvml, h, gpm, static)
    procs, reason = processes(nvml, h)
    name = read(nvml, "nvmlDeviceGetName", "", lambda: nvml.nvmlDeviceGetName(h))
    return DeviceReading(index=index, name=name, sample=Sample(wall_time_ns=t, device_index=index, metrics=metrics),
                         processes=procs, processes_missing_reason=reason)
