"""Panel 9 and its analysis: on samples recorded with `kernelscope run --sample-interval 50`
on an H100 (tests/data/session_h100_samples.json.gz, scripts/record.sh gpu_stats), and on
small hand-made sessions for the edge cases. No GPU needed."""
from __future__ import annotations


import pytest

from conftest import assert_snapshot, DATA, draw
from kernelscope.analyze.gpu_stats import (
    CLOCK_LOW_FRACTION, clock_hygiene, decode_throttle_reasons, limiting_reasons, low_clock, sample_flags,
    summarize_gpu_stats,
)
from kernelscope.analyze.report import build_report
from kernelscope.model import Launch, Metric, Sample, Session
from kernelscope.render.gpu_stats import GpuStatsPanel, bucket, kernel_busy, sparkline
from kernelscope.render.header import SessionHeader
from kernelscope.render.show import ShowView

H100 = DATA / "session_h100_samples.json.gz"


def nv(raw: str, value, unit: str = "") -> Metric:
    return Metric(value=value, unit=unit, source="nvml", raw_name=raw)


def sample(t_ns: int | None, sm_mhz: int = 1980, reasons: int = 0, util: int = 100, wall: int | None = None) -> Sample:
    return Sample(wall_time_ns=wall if wall is not None else 10**18 + (t_ns or 0), device_index=0, t_ns=t_ns, metrics={
        "gpu_utilization_pct": nv("nvmlDeviceGetUtilizationRates.gpu", util, "%"),
        "sm_clock_mhz": nv("nvmlDeviceGetClockInfo(SM)", sm_mhz, "MHz"),
        "sm_clock_max_mhz": nv("nvmlDeviceGetMaxClockInfo(SM)", 1980, "MHz"),
        "throttle_reasons": nv("nvmlDeviceGetCurrentClocksEventReasons", reasons, "bitmask"),
        "temperature_c": nv("nvmlDeviceGetTemperature(GPU)", 50, "C"),
    })


def launch(name: str, start: int, dur: int) -> Launch:
    return Launch(kernel=name, grid=(1, 1, 1), block=(128, 1, 1), start_ns=start, duration_ns=dur, device_index=0)


# -- analysis -------------------------------------------------------------------------------

def test_throttle_bits_decode_by_table():
    assert decode_throttle_reasons(0) == ()
    assert decode_throttle_reasons(0x1 | 0x4) == ("gpu_idle", "sw_power_cap")
    assert decode_throttle_reasons(0x40 | 0x800) == ("hw_thermal_slowdown", "unknown_0x800")
    assert limiting_reasons(0x1) == () and limiting_reasons(0x5) == ("sw_power_cap",)
    assert limiting_reasons(None) == ()


def test_low_clock_threshold_is_the_one_constant():
    edge = CLOCK_LOW_FRACTION * 1980
    assert low_clock(sample(0, sm_mhz=int(edge) - 1)) and not low_clock(sample(0, sm_mhz=int(edge) + 1))
    assert sample_flags(sample(0, sm_mhz=1980, reasons=0x4)) == ("throttled: sw_power_cap",)
    assert sample_flags(sample(0, sm_mhz=1980, reasons=0x1)) == ()  # idle is not a measurement problem
    assert len(sample_flags(sample(0, sm_mhz=900, reasons=0x20))) == 2


def test_windows_place_samples_against_kernels_and_flag_only_busy_ones():
    s = Session(time_origin_ns=10**18, launches=[launch("gemm", 10, 80), launch("add", 120, 10)])
    s.samples = [sample(0, 345, 0x1, 0), sample(50, 1200, 0x4), sample(100, 1980), sample(150, 345, 0x1, 0),
                 sample(200, 345, 0x1, 0)]
    st = summarize_gpu_stats(s)
    assert st.samples == 4 and st.outside_trace == 1  # the one at 200 follows another past the trace's end
    assert [w.kernels for w in st.windows] == [(), (("gemm", 40),), (("gemm", 40),), (("add", 10),)]
    assert [w.busy for w in st.windows] == [False, True, True, True]
    assert [bool(w.flags) for w in st.windows] == [False, True, False, True]  # the idle first one is not flagged
    assert (st.busy_samples, st.flagged_samples) == (3, 2)
    assert dict((n, (c, b)) for n, c, b in st.throttle_counts) == {"gpu_idle": (2, 1), "sw_power_cap": (1, 1)}
    clocks = st.field("sm_clock_mhz")
    assert (clocks.minimum, clocks.peak, clocks.limit, clocks.count) == (345, 1980, 1980, 4)


def test_without_a_trace_origin_samples_are_summarised_on_their_own_clock():
    s = Session()
    s.samples = [sample(None, wall=10**18 + i * 50_000_000, util=u) for i, u in enumerate((0, 80, 0))]
    st = summarize_gpu_stats(s)
    assert not st.on_timeline and st.samples == 3 and st.busy_samples == 1  # busy from utilization
    assert st.interval_ms_median == pytest.approx(50.0)
    text = draw(GpuStatsPanel(s, st), 100)
    assert "since 1st sample" in text and "(none)" in text


def test_nan_from_an_old_file_is_not_a_number_in_the_summary():
    s = Session()
    s.samples = [sample(None, wall=1), sample(None, wall=2)]
    s.samples[0].metrics["sm_activity_pct"] = Metric(value=float("nan"), unit="%", source="gpm", raw_name="x")
    s.samples[1].metrics["sm_activity_pct"] = Metric(value=40.0, unit="%", source="gpm", raw_name="x")
    f = summarize_gpu_stats(s).field("sm_activity_pct")
    assert (f.count, f.mean) == (1, 40.0)


def test_clock_hygiene_for_a_measurement_window():
    samples = [sample(0, 1980), sample(50, 1400, 0x4), sample(100, 1980), sample(150, 1980)]
    bad = clock_hygiene(samples, 40, 110)
    assert bad.status == "flagged" and bad.samples == 2 and bad.sm_clock_min_mhz == 1400
    assert bad.throttle_reasons == ("sw_power_cap",) and any("below 80%" in f for f in bad.flags)
    good = clock_hygiene(samples, 120, 160)
    assert good.status == "ok" and good.flags == () and good.sm_clock_max_mhz == 1980
    assert clock_hygiene(samples, 1000, 2000).status == "unknown"


def test_sparkline_and_time_columns():
    assert sparkline([0, 50, 100, None], 0, 100) == "▁▅█·"
    cols = bucket([0, 100], [10.0, 20.0], 0, 100, 4)
    assert cols[:3] == [10.0, 20.0, 20.0] and cols[3] == 20.0  # each column shows the sample that covers it
    assert kernel_busy([launch("k", 0, 50)], 0, 100, 2) == [1.0, 0.0]


# -- on the H100 recording ------------------------------------------------------------------

@pytest.fixture(scope="module")
def h100() -> Session:
    return Session.load(H100)


def test_h100_recording_has_timed_samples_with_every_field(h100):
    st = h100.collectors["sampler"]
    assert st.status == "ok" and st.details["interval_ms"] == 50.0 and st.details["gpm"] == "ok"
    assert len(h100.samples) == st.details["samples"] > 40
    assert all(x.t_ns is not None for x in h100.samples)
    assert all(x.t_ns == x.wall_time_ns - h100.time_origin_ns for x in h100.samples)
    last = h100.samples[-1]
    for key in ("gpu_utilization_pct", "memory_used_bytes", "memory_total_bytes", "sm_clock_mhz", "sm_clock_max_mhz",
                "power_w", "power_limit_w", "temperature_c", "throttle_reasons", "sm_activity_pct",
                "tensor_activity_pct", "dram_bandwidth_util_pct", "pcie_tx_bytes_per_s"):
        assert not last.metrics[key].is_missing, key
    assert last.metrics["sm_activity_pct"].source == "gpm"
    first = h100.samples[0].metrics["sm_activity_pct"]
    assert first.is_missing and "GPM" in first.missing_reason  # no GPM window yet: N/A with the reason
    assert Session.from_dict(h100.to_dict()).samples == h100.samples


def test_h100_matmuls_ran_power_capped_and_are_flagged(h100):
    st = summarize_gpu_stats(h100)
    assert st.flagged_samples > 10 and st.busy_samples > st.flagged_samples
    counts = {n: b for n, _, b in st.throttle_counts}
    assert counts.get("sw_power_cap", 0) > 10
    gemm = next(r for r in h100.regions if r.name == "gemm_bf16_8192")
    during = clock_hygiene(st.used, gemm.gpu_start_ns, gemm.gpu_start_ns + gemm.gpu_duration_ns)
    assert during.status == "flagged" and "sw_power_cap" in during.throttle_reasons
    assert during.sm_clock_min_mhz < CLOCK_LOW_FRACTION * during.sm_clock_max_mhz
    tensor = st.field("tensor_activity_pct")
    assert tensor.peak > 80  # bf16 matmuls keep the tensor cores busy (GPM)
    kernels = {k for w in st.windows if w.flags for k, _ in w.kernels}
    assert any(k.startswith("nvjet") for k in kernels)


def test_h100_panel_snapshot_at_120_columns(h100):
    text = draw(GpuStatsPanel(h100, summarize_gpu_stats(h100)), 120)
    assert_snapshot("gpu_stats_h100_samples.w120.txt", text)
    assert max(len(line) for line in text.splitlines()) <= 120
    assert "GPU stats · device" in text and "sw_power_cap" in text and "nvjet_sm90" in text and "!" in text


def test_h100_panel_fits_a_narrow_terminal(h100):
    text = draw(GpuStatsPanel(h100, summarize_gpu_stats(h100)), 80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    row = next(line for line in lines if "GPU utilization" in line and "%" in line)
    assert "100 %" in row and row.rstrip(" │").endswith("nvml")  # one line per field, collector named
    assert len(lines) < 70


def test_show_adds_the_panel_only_when_there_are_samples(h100):
    def show(session):
        return draw(ShowView(build_report(session, None, 0), with_analysis=False))

    assert "GPU stats · device" in show(h100)
    older = Session.load(DATA / "session_h100_mixed.json.gz")  # written before samples existed
    assert older.samples == [] and "GPU stats · device" not in show(older)


def test_the_two_memory_totals_are_told_apart(h100):
    """The header's total (CUDA, cuDeviceTotalMem) and the memory-used ceiling (NVML's total) differ by what the
    driver reserves: both are labelled, so a reader does not take one for a misprint of the other."""
    text = draw(GpuStatsPanel(h100, summarize_gpu_stats(h100)), 160)
    cuda_gib = h100.device.value("total_memory_bytes") / 2**30
    assert f"the header's {cuda_gib:.1f} GiB is CUDA's (cuDeviceTotalMem)" in text
    assert "NVML's total (79.6 GiB" in text
    assert "(CUDA)" in draw(SessionHeader(h100), 80)
