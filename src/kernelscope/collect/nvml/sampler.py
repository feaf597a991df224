"""The live sampler: a background thread that reads NVML (and GPM) while the trace pass runs.

Samples carry absolute ``time.time_ns()`` times; once the trace gives the
session its origin they are placed on the session clock, next to the kernels.
The thread measures its own cost (CPU time, time per reading) into the
collector status, so every session says what sampling cost.
"""
from __future__ import annotations

import os
import statistics
import threading
import time
from typing import Any

from kernelscope.collect.nvml import api as nvml_api
from kernelscope.collect.nvml.api import GpmReader, Nvml, NvmlUnavailable
from kernelscope.model import CollectorStatus, DeviceReading, Metric, Sample, Session
from kernelscope.model import collectors as collector

DEFAULT_INTERVAL_MS = 100.0
INTERVAL_ENV = "KERNELSCOPE_SAMPLE_INTERVAL_MS"  # `kernelscope run --sample-interval` sets it for the child


def interval_from_env(default: float = DEFAULT_INTERVAL_MS) -> float:
    try:
        v = float(os.environ.get(INTERVAL_ENV, default))
    except ValueError:
        return default
    return v if v >= 0 else default


class _Device:
    def __init__(self, cuda_index: int, handle: Any, static: dict[str, Metric], gpm: GpmReader) -> None:
        self.cuda_index, self.handle, self.static, self.gpm = cuda_index, handle, static, gpm


# Fields every reading has while NVML answers; all of them missing means the device stopped answering.
LIVE_FIELDS = ("gpu_utilization_pct", "memory_used_bytes", "sm_clock_mhz", "power_w", "temperature_c")


class GpuSampler:
    """Samples the given devices every ``interval_ms`` until stopped.

    ``targets`` are (CUDA ordinal, PCI bus id) pairs; ``nvml`` defaults to the
    installed pynvml, and tests pass a fake.
    """

    def __init__(self, targets: list[tuple[int, str | None]], interval_ms: float = DEFAULT_INTERVAL_MS,
                 nvml: Nvml | None = None, gpm_min_window_ns: int = nvml_api.GPM_MIN_WINDOW_NS) -> None:
        self.targets, self.interval_ms, self._nvml_arg = targets, float(interval_ms), nvml
        self.gpm_min_window_ns = gpm_min_window_ns
        self.samples: list[Sample] = []
        self._nvml: Nvml = None
        self._devices: list[_Device] = []
        self._skipped: list[str] = []
        self._read_ns: list[int] = []
        self._cpu_ns = 0
        self._error: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> str | None:
        """Start the thread; returns why not when it cannot sample at all."""
        if self.interval_ms <= 0:
            return "sampling was turned off (sample interval 0)"
        try:
            self._nvml = nvml_api.load(self._nvml_arg)
            nvml_api.start(self._nvml)
        except NvmlUnavailable as e:
            return str(e)
        n = self._nvml
        for cuda_index, bus in self.targets:
            h, err = nvml_api.call(n, lambda bus=bus, i=cuda_index: nvml_api.handle_for(n, bus, i))
            if err is not None:
                self._skipped.append(f"device {cuda_index}: NVML could not find it ({err})")
                continue
            gpm = GpmReader(n, h, self.gpm_min_window_ns)
            self._devices.append(_Device(cuda_index, h, nvml_api.static_info(n, h), gpm))
        if not self._devices:
            nvml_api.stop(n)
            return "; ".join(self._skipped) or "no device to sample"
        self._thread = threading.Thread(target=self._run, name="kernelscope-nvml-sampler", daemon=True)
        self._thread.start()
        return None

    def _read_all(self) -> None:
        for d in self._devices:
            t0 = time.time_ns()
            metrics = nvml_api.snapshot(self._nvml, d.handle, d.gpm, d.static)
            self._read_ns.append(time.time_ns() - t0)
            self.samples.append(Sample(wall_time_ns=t0, device_index=d.cuda_index, metrics=metrics))

    def _run(self) -> None:
        cpu0 = time.thread_time_ns()
        period = self.interval_ms / 1000.0
        next_t = time.monotonic()
        try:
            while True:
                self._read_all()
                next_t = max(next_t + period, time.monotonic())  # a slow read delays, never bunches, the next
                if self._stop.wait(next_t - time.monotonic()):
                    break
            self._read_all()  # the state right after the workload
        except Exception as e:  # never let sampling break the workload; keep what was read
            self._error = f"the sampler stopped early: {nvml_api.error_text(self._nvml, e)}"
        finally:
            self._cpu_ns = time.thread_time_ns() - cpu0

    def _silent_devices(self) -> list[str]:
        """Devices whose readings came back empty (the GPU fell off the bus, the driver unloaded): each
        such sample is kept as N/A with NVML's reason, and the status says how many there were."""
        out = []
        for d in self._devices:
            mine = [x for x in self.samples if x.device_index == d.cuda_index]
            dead = [x for x in mine if all(x.metrics[k].is_missing for k in LIVE_FIELDS if k in x.metrics)]
            if dead:
                why = next((x.metrics[k].missing_reason for x in dead for k in LIVE_FIELDS if k in x.metrics), "")
                first = mine.index(dead[0]) + 1
                out.append(f"NVML read nothing for device {d.cuda_index} in {len(dead)} of {len(mine)} samples, "
                           f"from sample {first} on ({why})")
        return out

    def stop(self) -> CollectorStatus:
        """Stop the thread and say what was sampled and what it cost."""
        if self._thread is None:
            return CollectorStatus("not-run", "the sampler was not started")
        self._stop.set()
        self._thread.join()
        self._thread = None
        for d in self._devices:
            d.gpm.close()
        nvml_api.stop(self._nvml)
        details: dict[str, Any] = {
            "collector": "NVML (nvidia-ml-py) sampler thread",
            "interval_ms": self.interval_ms,
            "samples": len(self.samples),
            "devices": [d.cuda_index for d in self._devices],
            "sampler_thread_cpu_ms": round(self._cpu_ns / 1e6, 3),
        }
        if self._read_ns:
            details["read_ms_mean"] = round(statistics.fmean(self._read_ns) / 1e6, 3)
            details["read_ms_max"] = round(max(self._read_ns) / 1e6, 3)
        gpm = [d.gpm.reason for d in self._devices if d.gpm.reason]
        details["gpm"] = gpm[0] if gpm else "ok"
        problems = [p for p in (self._error, *self._skipped, *self._silent_devices()) if p]
        if problems:
            return CollectorStatus("partial", "; ".join(problems), details)
        return CollectorStatus("ok", None, details)


def visible_devices() -> list[tuple[int, str | None]]:
    """The CUDA-visible devices as (ordinal, PCI bus id), from the CUDA driver."""
    from kernelscope.collect import driver

    out: list[tuple[int, str | None]] = []
    for i in range(driver.device_count()):
        out.append((i, driver.query_device(i).value("pci_bus_id_string")))
    return out


def start_for_session(
    session: Session, interval_ms: float | None = None, nvml: Nvml | None = None
) -> GpuSampler | None:
    """Start sampling every CUDA-visible device; on failure record why and return None."""
    interval = interval_from_env() if interval_ms is None else interval_ms
    try:
        targets = visible_devices()
    except Exception as e:  # DriverUnavailable, or a driver without the calls we use
        session.collectors[collector.SAMPLER] = CollectorStatus("not-run", f"no CUDA devices to sample: {e}")
        return None
    sampler = GpuSampler(targets, interval, nvml)
    reason = sampler.start()
    if reason is not None:
        session.collectors[collector.SAMPLER] = CollectorStatus("not-run", reason)
        return None
    return sampler


def finish_for_session(sampler: GpuSampler | None, session: Session) -> None:
    """Stop the sampler and put its samples (absolute times) into the session."""
    if sampler is None:
        return
    session.collectors[collector.SAMPLER] = sampler.stop()
    session.samples.extend(sampler.samples)


def place_on_session_clock(session: Session) -> None:
    """Give each sample its time on the session clock, now that the trace set the origin."""
    if not session.time_origin_ns:
        return
    for s in session.samples:
        s.t_ns = s.wall_time_ns - session.time_origin_ns


class Monitor:
    """Every GPU NVML sees, read on demand: what `kernelscope top` shows.

    GPM values in a reading cover the time since the previous ``read()``.
    """

    def __init__(self, nvml: Nvml | None = None) -> None:
        self._nvml_arg = nvml
        self._nvml: Nvml = None
        self._devices: list[tuple[int, Any, dict[str, Metric], GpmReader]] = []
        self.unreadable: list[str] = []  # devices NVML counts but would not open, with its reason

    def open(self) -> None:
        """Raises NvmlUnavailable (one sentence) when there is no driver, no binding or no GPU."""
        n = self._nvml = nvml_api.load(self._nvml_arg)
        nvml_api.start(n)
        count, err = nvml_api.call(n, n.nvmlDeviceGetCount)
        if err is not None or not count:
            nvml_api.stop(n)
            raise NvmlUnavailable("NVML sees no NVIDIA GPU on this machine" + (f" ({err})" if err else ""))
        for i in range(count):
            h, err = nvml_api.call(n, lambda i=i: n.nvmlDeviceGetHandleByIndex(i))
            if err is None:
                self._devices.append((i, h, nvml_api.static_info(n, h), GpmReader(n, h)))
            else:
                self.unreadable.append(f"GPU {i}: NVML could not open it ({err})")

    def driver_version(self) -> Metric:
        return nvml_api.read(self._nvml, "nvmlSystemGetDriverVersion", "", self._nvml.nvmlSystemGetDriverVersion)

    def read(self) -> list[DeviceReading]:
        return [nvml_api.read_device(self._nvml, i, h, gpm, static) for i, h, static, gpm in self._devices]

    def close(self) -> None:
        for _, _, _, gpm in self._devices:
            gpm.close()
        self._devices = []
        if self._nvml is not None:
            nvml_api.stop(self._nvml)
            self._nvml = None
