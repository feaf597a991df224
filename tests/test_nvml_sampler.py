"""The NVML layer and the sampler thread against a scripted fake NVML (no GPU needed):
values, N/A with NVML's reason, GPM missing or present, no driver, no nvidia-ml-py."""
from __future__ import annotations

import sys
import time
from types import SimpleNamespace

import pytest

from kernelscope.collect.nvml import snapshot as nvml

from kernelscope.collect.nvml import api as nvml_api

from kernelscope.collect.nvml import sampler
from kernelscope.collect.nvml.api import GpmReader
from kernelscope.collect.nvml.sampler import GpuSampler
from kernelscope.model import Session


class NVMLError(Exception):
    TEXT = {3: "Not Supported", 4: "Insufficient Permissions", 6: "Not Found", 9: "Driver Not Loaded",
            12: "NVML Shared Library Not Found", 15: "GPU is lost"}

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.value = value

    def __str__(self) -> str:
        return self.TEXT.get(self.value, f"NVML error {self.value}")


class NVMLError_NotSupported(NVMLError):
    def __init__(self) -> None:
        super().__init__(3)


class NVMLError_DriverNotLoaded(NVMLError):
    def __init__(self) -> None:
        super().__init__(9)


class NVMLError_GpuIsLost(NVMLError):
    def __init__(self) -> None:
        super().__init__(15)


class MetricsGet:
    """Stands in for pynvml's c_nvmlGpmMetricsGet_t ctypes structure."""

    def __init__(self) -> None:
        self.version = self.numMetrics = 0
        self.sample1 = self.sample2 = None
        self.metrics = [SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0) for _ in range(210)]


H100_READING = {
    "util": SimpleNamespace(gpu=97, memory=41),
    "mem": SimpleNamespace(used=3 * 2**30, total=80 * 2**30, free=77 * 2**30),
    "sm_clock": 1980,
    "mem_clock": 2619,
    "power_mw": 512_345,
    "temp": 48,
    "reasons": 0x4,
    "pcie_tx_kb": 1000,
    "pcie_rx_kb": 2000,
    "gpm": {2: 88.5, 3: 41.0, 5: 72.25, 10: 30.0, 20: 12.0, 21: 34.0},
}


class FakeNvml:
    """A scripted pynvml: each snapshot takes the next reading of the script (the last one repeats).

    A field whose value is an exception class raises it, as NVML does for a field it refuses.
    """

    NVMLError, NVMLError_NotSupported, NVMLError_DriverNotLoaded = (
        NVMLError,
        NVMLError_NotSupported,
        NVMLError_DriverNotLoaded,
    )
    NVML_SUCCESS, NVML_CLOCK_SM, NVML_CLOCK_MEM, NVML_TEMPERATURE_GPU = 0, 1, 2, 0
    NVML_PCIE_UTIL_TX_BYTES, NVML_PCIE_UTIL_RX_BYTES, NVML_GPM_METRICS_GET_VERSION = 0, 1, 1
    NVML_GPM_METRIC_SM_UTIL, NVML_GPM_METRIC_SM_OCCUPANCY, NVML_GPM_METRIC_ANY_TENSOR_UTIL = 2, 3, 5
    NVML_GPM_METRIC_DRAM_BW_UTIL, NVML_GPM_METRIC_PCIE_TX_PER_SEC, NVML_GPM_METRIC_PCIE_RX_PER_SEC = 10, 20, 21
    c_nvmlGpmMetricsGet_t = MetricsGet

    def __init__(self, readings=None, gpus=1, gpm=True, init_error=None, static=None, gpm_refuses=(), processes=None):
        self.readings = list(readings or [H100_READING])
        self.gpus, self.gpm, self.init_error, self.gpm_refuses = gpus, gpm, init_error, set(gpm_refuses)
        self.static = {"sm_max": 1980, "mem_max": 2619, "power_limit_mw": 700_000, **(static or {})}
        self.processes = processes if processes is not None else []
        self.calls: dict[str, int] = {}
        self.tick = -1
        self.initialised = 0
        self.gpm_live = 0  # GPM sample buffers allocated and not yet freed
        self.gpm_pairs: list[tuple[int, int]] = []  # (older, newer) GPM sample numbers each query measured

    def _count(self, name):
        self.calls[name] = self.calls.get(name, 0) + 1

    def _r(self, key):
        v = self.readings[min(max(self.tick, 0), len(self.readings) - 1)][key]
        if isinstance(v, type) and issubclass(v, Exception):
            raise v()
        return v

    def nvmlInit(self):
        if self.init_error is not None:
            raise self.init_error()
        self.initialised += 1

    def nvmlShutdown(self):
        self.initialised -= 1

    def nvmlDeviceGetCount(self):
        return self.gpus

    def nvmlDeviceGetHandleByIndex(self, i):
        if not 0 <= i < self.gpus:
            raise NVMLError(6)
        return ("gpu", i)

    def nvmlDeviceGetHandleByPciBusId(self, bus):
        if bus == "0000:ff:00.0":
            raise NVMLError(6)
        return ("gpu", 0)

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA H100 80GB HBM3"

    def nvmlSystemGetDriverVersion(self):
        return "580.159.04"

    def nvmlDeviceGetUtilizationRates(self, h):
        self.tick += 1  # the first call of each snapshot moves the script on
        self._count("util")
        return self._r("util")

    def nvmlDeviceGetMemoryInfo(self, h):
        return self._r("mem")

    def nvmlDeviceGetClockInfo(self, h, which):
        return self._r("sm_clock" if which == self.NVML_CLOCK_SM else "mem_clock")

    def nvmlDeviceGetMaxClockInfo(self, h, which):
        self._count("max_clock")
        return self.static["sm_max" if which == self.NVML_CLOCK_SM else "mem_max"]

    def nvmlDeviceGetEnforcedPowerLimit(self, h):
        return self.static["power_limit_mw"]

    def nvmlDeviceGetPowerUsage(self, h):
        return self._r("power_mw")

    def nvmlDeviceGetTemperature(self, h, sensor):
        return self._r("temp")

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        return self._r("reasons")

    def nvmlDeviceGetPcieThroughput(self, h, counter):
        self._count("pcie_legacy")
        return self._r("pcie_tx_kb" if counter == self.NVML_PCIE_UTIL_TX_BYTES else "pcie_rx_kb")

    def nvmlGpmQueryDeviceSupport(self, h):
        return SimpleNamespace(version=1, isSupportedDevice=int(self.gpm))

    def nvmlGpmSampleAlloc(self):
        self.gpm_live += 1
        return SimpleNamespace(tick=None)

    def nvmlGpmSampleFree(self, s):
        self.gpm_live -= 1

    def nvmlGpmSampleGet(self, h, s):
        self.gpm_seq = getattr(self, "gpm_seq", 0) + 1
        s.tick, s.seq = max(self.tick, 0), self.gpm_seq
        return s

    def nvmlGpmMetricsGet(self, mg):
        assert mg.sample1 is not mg.sample2 and mg.sample1.seq < mg.sample2.seq  # older sample first
        self.gpm_pairs.append((mg.sample1.seq, mg.sample2.seq))
        values = self.readings[min(mg.sample2.tick, len(self.readings) - 1)]["gpm"]
        for m in mg.metrics[: mg.numMetrics]:
            if m.metricId in self.gpm_refuses:
                m.nvmlReturn, m.value = 3, -1.0
            else:
                m.nvmlReturn, m.value = 0, values[m.metricId]
        return mg

    def nvmlDeviceGetComputeRunningProcesses(self, h):
        return [SimpleNamespace(pid=p, usedGpuMemory=m) for p, m in self.processes]

    def nvmlDeviceGetGraphicsRunningProcesses(self, h):
        raise NVMLError_NotSupported()

    def nvmlSystemGetProcessName(self, pid):
        if pid == 4242:
            raise NVMLError(6)
        return b"python3"


def test_snapshot_reads_every_field_with_units_and_provenance():
    fake = FakeNvml()
    fake.nvmlInit()
    h = fake.nvmlDeviceGetHandleByIndex(0)
    m = nvml_api.snapshot(fake, h)
    assert m["gpu_utilization_pct"].value == 97 and m["gpu_utilization_pct"].unit == "%"
    assert m["memory_utilization_pct"].value == 41
    assert m["memory_used_bytes"].value == 3 * 2**30 and m["memory_total_bytes"].value == 80 * 2**30
    assert m["sm_clock_mhz"].value == 1980 and m["sm_clock_max_mhz"].value == 1980
    assert m["power_w"].value == pytest.approx(512.345) and m["power_w"].raw_name == "nvmlDeviceGetPowerUsage"
    assert m["power_limit_w"].value == pytest.approx(700.0)
    assert m["temperature_c"].value == 48 and m["throttle_reasons"].value == 0x4
    # No GPM reader: PCIe comes from the legacy counter, in KB/s scaled to bytes/s.
    assert m["pcie_tx_bytes_per_s"].value == 1000 * 1024 and m["pcie_rx_bytes_per_s"].value == 2000 * 1024
    assert all(x.source == "nvml" for x in m.values())


def test_a_refused_field_is_na_with_nvmls_reason_and_the_rest_goes_on():
    fake = FakeNvml([dict(H100_READING, temp=NVMLError_NotSupported, power_mw=NVMLError_NotSupported)])
    m = nvml_api.snapshot(fake, ("gpu", 0))
    assert m["temperature_c"].is_missing and m["temperature_c"].missing_reason == "NVML: Not Supported"
    assert m["power_w"].value is None and "Not Supported" in m["power_w"].missing_reason
    assert m["sm_clock_mhz"].value == 1980 and m["gpu_utilization_pct"].value == 97


def test_a_function_missing_from_the_binding_is_na_too():
    fake = FakeNvml()
    fake.nvmlDeviceGetPowerUsage = None  # calling None raises TypeError, like a broken binding
    m = nvml_api.snapshot(fake, ("gpu", 0))
    assert m["power_w"].is_missing and "TypeError" in m["power_w"].missing_reason


def test_gpm_first_read_has_no_window_then_values_over_the_interval():
    fake = FakeNvml([H100_READING, dict(H100_READING, gpm={**H100_READING["gpm"], 2: 50.0})])
    gpm = GpmReader(fake, ("gpu", 0), min_window_ns=0)
    first = nvml_api.snapshot(fake, ("gpu", 0), gpm)
    assert first["sm_activity_pct"].is_missing and "sampling began" in first["sm_activity_pct"].missing_reason
    assert first["sm_activity_pct"].source == "gpm"
    second = nvml_api.snapshot(fake, ("gpu", 0), gpm)
    assert second["sm_activity_pct"].value == 50.0 and second["tensor_activity_pct"].value == 72.25
    assert second["dram_bandwidth_util_pct"].value == 30.0 and second["sm_occupancy_pct"].value == 41.0
    assert second["pcie_tx_bytes_per_s"].value == 12.0 * 2**20 and second["pcie_tx_bytes_per_s"].source == "gpm"
    assert first["pcie_tx_bytes_per_s"].is_missing and "sampling began" in first["pcie_tx_bytes_per_s"].missing_reason
    assert fake.calls.get("pcie_legacy", 0) == 0  # the ~20 ms legacy counter is not read when GPM works
    third = nvml_api.snapshot(fake, ("gpu", 0), gpm)
    assert third["sm_activity_pct"].value == 50.0
    gpm.close()
    assert fake.gpm_live == 0


def test_gpm_measures_over_at_least_the_minimum_window_when_read_more_often():
    fake = FakeNvml()
    now = [0]
    gpm = GpmReader(fake, ("gpu", 0), min_window_ns=100, clock=lambda: now[0])
    got = []
    for t in (0, 50, 100, 150, 200, 260, 270):  # reads every ~50 "ns", window 100
        now[0] = t
        got.append(gpm.read()["sm_activity_pct"].value)
    assert got[:2] == [None, None] and all(v == 88.5 for v in got[2:])
    # GPM sample k is the (k+1)-th read; each value spans the newest sample at least 100 old
    assert fake.gpm_pairs == [(1, 3), (2, 4), (3, 5), (4, 6), (4, 7)]
    assert fake.gpm_live <= 4  # buffers are reused, not allocated per read
    gpm.close()
    assert fake.gpm_live == 0


def test_gpm_nan_is_na_not_a_number_in_the_session():
    fake = FakeNvml([dict(H100_READING, gpm={**H100_READING["gpm"], 10: float("nan")})])
    gpm = GpmReader(fake, ("gpu", 0), min_window_ns=0)
    gpm.read()
    m = gpm.read()["dram_bandwidth_util_pct"]
    assert m.value is None and "non-finite" in m.missing_reason


def test_gpm_unsupported_says_why_and_pcie_falls_back():
    fake = FakeNvml(gpm=False)
    gpm = GpmReader(fake, ("gpu", 0))
    m = nvml_api.snapshot(fake, ("gpu", 0), gpm)
    for key in ("sm_activity_pct", "sm_occupancy_pct", "tensor_activity_pct", "dram_bandwidth_util_pct"):
        assert m[key].is_missing and "not supported on this GPU" in m[key].missing_reason
    assert m["pcie_rx_bytes_per_s"].value == 2000 * 1024 and m["pcie_rx_bytes_per_s"].source == "nvml"


def test_one_gpm_metric_refused_is_na_the_others_are_read():
    fake = FakeNvml(gpm_refuses={5})
    gpm = GpmReader(fake, ("gpu", 0), min_window_ns=0)
    gpm.read()
    m = gpm.read()
    assert m["tensor_activity_pct"].is_missing and m["tensor_activity_pct"].missing_reason == "NVML: Not Supported"
    assert m["sm_activity_pct"].value == 88.5


def test_sampler_thread_samples_at_the_interval_and_measures_its_cost():
    fake = FakeNvml()
    s = GpuSampler([(0, "0000:19:00.0")], interval_ms=10, nvml=fake, gpm_min_window_ns=30_000_000)
    assert s.start() is None
    time.sleep(0.2)
    status = s.stop()
    n = len(s.samples)
    assert 5 <= n <= 40, n  # ~20 at 10 ms, plus the closing one; a loaded CI box may run slow
    assert status.status == "ok" and status.details["samples"] == n and status.details["interval_ms"] == 10
    assert status.details["sampler_thread_cpu_ms"] >= 0 and status.details["read_ms_mean"] > 0
    assert status.details["gpm"] == "ok"
    times = [x.wall_time_ns for x in s.samples]
    assert times == sorted(times) and all(x.device_index == 0 for x in s.samples)
    gaps = sorted(b - a for a, b in zip(times, times[1:-1]))
    assert 8e6 <= gaps[len(gaps) // 2] <= 15e6  # median gap is the interval (a late reading is caught up)
    assert s.samples[0].value("sm_activity_pct") is None  # GPM: no 30 ms window yet
    assert s.samples[-1].value("sm_activity_pct") == 88.5
    gpm_times = [x.wall_time_ns for x in s.samples if x.value("sm_activity_pct") is not None]
    assert gpm_times and gpm_times[0] - times[0] >= 25e6  # first GPM value once the window has passed
    assert fake.initialised == 0 and fake.gpm_live == 0  # NVML shut down and GPM buffers freed
    assert fake.calls["max_clock"] == 2  # static fields read once, not per sample


def test_a_gpu_that_stops_answering_midway_keeps_the_samples_and_says_from_when():
    lost = {k: NVMLError_GpuIsLost for k in H100_READING}  # fell off the bus: every call fails from now on
    s = GpuSampler([(0, "0000:19:00.0")], interval_ms=10, nvml=FakeNvml([H100_READING, H100_READING, lost]))
    assert s.start() is None
    time.sleep(0.1)
    status = s.stop()
    assert status.status == "partial"
    n = len(s.samples)
    assert (
        f"NVML read nothing for device 0 in {n - 2} of {n} samples, from sample 3 on (NVML: GPU is lost)"
        in status.reason
    )
    assert s.samples[1].value("sm_clock_mhz") == 1980  # what was read before is kept
    assert s.samples[2].value("sm_clock_mhz") is None and s.samples[2].metrics["sm_clock_mhz"].missing_reason


def test_sampler_without_a_driver_says_why():
    s = GpuSampler([(0, None)], 10, nvml=FakeNvml(init_error=NVMLError_DriverNotLoaded))
    reason = s.start()
    assert reason is not None and "Driver Not Loaded" in reason and "NVIDIA driver" in reason
    assert s.samples == []


def test_sampler_without_nvidia_ml_py_says_why(monkeypatch):
    from kernelscope.collect.nvml import api

    monkeypatch.setitem(sys.modules, "pynvml", None)  # import fails
    monkeypatch.setattr(api, "driver_library", lambda: True)  # a driver, without its Python binding
    reason = GpuSampler([(0, None)], 10).start()
    assert reason is not None and "nvidia-ml-py is not installed" in reason
    monkeypatch.setattr(api, "driver_library", lambda: False)  # no driver: the binding would not help
    reason = GpuSampler([(0, None)], 10).start()
    assert reason is not None and "no NVIDIA driver" in reason and "install" not in reason


def test_sampler_off_and_unknown_device():
    assert "turned off" in GpuSampler([(0, None)], 0, nvml=FakeNvml()).start()
    reason = GpuSampler([(0, "0000:ff:00.0")], 10, nvml=FakeNvml()).start()
    assert "NVML could not find it" in reason and "Not Found" in reason


def test_session_gets_samples_on_the_session_clock(monkeypatch):
    monkeypatch.setattr(sampler, "visible_devices", lambda: [(0, "0000:19:00.0")])
    session = Session()
    smp = sampler.start_for_session(session, 5, nvml=FakeNvml())
    time.sleep(0.05)
    sampler.finish_for_session(smp, session)
    assert session.collectors["sampler"].status == "ok" and len(session.samples) >= 3
    assert all(x.t_ns is None for x in session.samples)  # no trace origin yet
    session.time_origin_ns = session.samples[1].wall_time_ns
    sampler.place_on_session_clock(session)
    assert session.samples[1].t_ns == 0 and session.samples[0].t_ns < 0 < session.samples[2].t_ns
    again = Session.from_dict(session.to_dict())
    assert again.samples[2].t_ns == session.samples[2].t_ns
    assert again.samples[2].metrics == session.samples[2].metrics


def test_session_records_why_when_it_cannot_sample(monkeypatch):
    monkeypatch.setattr(sampler, "visible_devices", lambda: [(0, None)])
    session = Session()
    assert sampler.start_for_session(session, 50, nvml=FakeNvml(init_error=NVMLError_DriverNotLoaded)) is None
    st = session.collectors["sampler"]
    assert st.status == "not-run" and "Driver Not Loaded" in st.reason


def test_interval_from_environment(monkeypatch):
    monkeypatch.setenv(sampler.INTERVAL_ENV, "25")
    assert sampler.interval_from_env() == 25.0
    monkeypatch.setenv(sampler.INTERVAL_ENV, "soon")
    assert sampler.interval_from_env() == sampler.DEFAULT_INTERVAL_MS


def test_trace_recorder_without_cuda_records_why_the_sampler_did_not_run():
    from conftest import HAS_CUDA
    from kernelscope.collect.trace.recorder import TraceRecorder

    if HAS_CUDA:
        pytest.skip("this checks the machine without a GPU")
    session = Session()
    rec = TraceRecorder(session, sample_interval_ms=20)
    rec.start()
    rec.stop()
    st = session.collectors["sampler"]
    assert st.status == "not-run" and st.reason and session.samples == []


def test_one_off_snapshot_keeps_its_keys_and_reports_no_driver():
    metrics, reason = nvml.snapshot("0000:19:00.0", 0, nvml=FakeNvml())
    assert reason is None
    assert metrics["driver_version"].value == "580.159.04" and metrics["sm_clock_max_mhz"].value == 1980
    assert set(metrics) == {"driver_version", "sm_clock_mhz", "sm_clock_max_mhz", "memory_clock_mhz",
                            "memory_clock_max_mhz", "power_limit_w", "temperature_c", "throttle_reasons"}
    metrics, reason = nvml.snapshot(None, 0, nvml=FakeNvml(init_error=NVMLError_DriverNotLoaded))
    assert metrics == {} and "Driver Not Loaded" in reason


@pytest.mark.gpu
def test_real_nvml_sampler_on_the_gpu():
    pytest.importorskip("pynvml")
    s = GpuSampler(sampler.visible_devices()[:1], interval_ms=20)
    assert s.start() is None
    time.sleep(0.3)
    status = s.stop()
    assert status.status == "ok" and len(s.samples) >= 5
    last = s.samples[-1]
    assert last.value("sm_clock_max_mhz") and last.value("memory_total_bytes")
    assert isinstance(last.value("gpu_utilization_pct"), int)
