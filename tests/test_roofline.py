"""Bound classification, FLOPs and bytes, declared work, measured ceilings and the
roofline (terminal and PNG), on sessions recorded on an H100."""
from __future__ import annotations

import dataclasses
import json

import pytest

from conftest import assert_snapshot, DATA, draw, run_cli
from kernelscope.analyze import thresholds as th
from kernelscope.analyze.bound import COMPUTE, LATENCY, LAUNCH, MEMORY, OCCUPANCY, classify, from_counters
from kernelscope.analyze.analysis import analyze_session
from kernelscope.analyze.roofline import NO_CALIBRATION, Ceilings, counter_flops, declared_totals
from kernelscope.model import Launch, Metric, Session
from kernelscope.model.launch import DeclaredWork
from kernelscope.render.roofline_term import RooflineChart
from kernelscope.render.kernel_analysis import SummaryPanel

# tests/workloads/counters_small.py multiplies two 2048 x 2048 fp16 matrices, twice, in each region.
N = 2048
GEMM_FLOPS = 2 * N ** 3
GEMM_BYTES = 3 * N * N * 2  # A and B read, C written once, fp16


def with_declared_gemms() -> Session:
    s = Session.load(DATA / "session_h100_counters.json.gz")
    for region in ("triton_mm", "cublas_mm"):
        for i in range(2):
            s.declared_work.append(DeclaredWork(region, i, GEMM_FLOPS, GEMM_BYTES, {"tokens": N}))
    return s


# Ceilings for tests only, not a measurement of any GPU: the code path of a calibration.
TEST_CEILINGS = Ceilings.from_metrics({
    "copy_bandwidth_bytes_per_s": Metric(3.0e12, "byte/s", "derived", "test", formula="test value"),
    "matmul_fp16_flop_per_s": Metric(7.0e14, "FLOP/s", "derived", "test", formula="test value"),
    "fma_fp32_flop_per_s": Metric(5.0e13, "FLOP/s", "derived", "test", formula="test value"),
}, "test values, not measured on any GPU")


@pytest.mark.parametrize("session,kernel,bound,limiter", [
    ("counters_h100_cuda", "copy_strided", MEMORY, "L2"),  # L2 61.8% just above DRAM 61.4%, both >= 60%
    ("counters_h100_cuda", "copy_coalesced", MEMORY, "L2"),
    ("counters_h100_cuda", "transpose_smem", LATENCY, None),  # memory 59.1%, SM 22.2%, occupancy 90%
    ("counters_h100_cuda", "wmma_gemm", MEMORY, "L1/TEX"),  # L1 97.6%, DRAM 1.5%
    ("session_h100_counters", "nvjet_sm90_hsh_256x128_64x4_1x2_h_bz_coopA_NNT", COMPUTE, "tensor pipe"),
    ("session_h100_counters", "matmul_kernel", MEMORY, "L2"),
    ("session_h100_counters", "unrolled_elementwise_kernel", LATENCY, None),
])
def test_bound_of_recorded_kernels(session, kernel, bound, limiter):
    k = analyze_session(Session.load(DATA / f"{session}.json.gz")).kernel(kernel)
    assert (k.bound.bound, k.bound.limiter) == (bound, limiter)
    assert k.bound.basis == "counters" and k.bound.evidence


def test_short_reduce_is_launch_bound_and_says_what_the_counters_see_inside():
    a = analyze_session(Session.load(DATA / "session_h100_counters.json.gz"))
    k = next(k for k in a.kernels if k.kernel.short_name == "reduce_kernel" and k.counter_launch is not None)
    assert k.bound.bound == LAUNCH and k.bound.basis == "timeline"
    gaps = [g for g in a.timeline.gaps_before(k.kernel.name) if g < th.HOST_WAIT_GAP_NS]
    assert gaps and min(gaps) >= k.durations.median_ns  # idle longer than it ran
    assert k.bound.inside is not None and k.bound.inside.bound == LATENCY


def _launch(**pcts) -> Launch:
    metrics = {k: Metric(v, "%", "ncu", f"raw.{k}") for k, v in pcts.items()}
    return Launch("k", (1, 1, 1), (32, 1, 1), None, 1000, metrics=metrics, counters={"x": Metric(1, "", "ncu", "x")})


def test_thresholds_are_the_ones_written_down():
    assert from_counters(_launch(sm_throughput_pct=10.0, memory_throughput_pct=th.SOL_BOUND_PCT)).bound == MEMORY
    assert from_counters(_launch(sm_throughput_pct=10.0, memory_throughput_pct=th.SOL_BOUND_PCT - 0.1,
                                 achieved_occupancy_pct=90.0)).bound == LATENCY
    low = from_counters(_launch(sm_throughput_pct=30.0, memory_throughput_pct=30.0, achieved_occupancy_pct=20.0))
    assert low.bound == OCCUPANCY and "20.0%" in low.reason
    assert from_counters(_launch(sm_throughput_pct=80.0, memory_throughput_pct=70.0)).bound == COMPUTE
    assert classify(None, [5000, 5000], [6000, 7000]).bound == LAUNCH
    assert classify(None, [5000, 5000], [1000, 1000]).bound == "unknown"
    assert classify(None, [50_000], [60_000]).bound == "unknown"  # too long to be launch-bound


def test_flops_from_counters_are_na_with_the_reason_unless_sass_counters_exist():
    s = Session.load(DATA / "counters_h100_cuda.json.gz")
    wmma = next(x for x in s.launches if x.kernel.startswith("wmma"))
    copy = next(x for x in s.launches if x.kernel.startswith("copy_coalesced"))
    assert "MMA shape" in counter_flops(wmma).missing_reason
    assert "does not collect the SASS FLOP counters" in counter_flops(copy).missing_reason
    for op, n in (("fadd", 10.0), ("fmul", 20.0), ("ffma", 30.0)):
        raw = f"smsp__sass_thread_inst_executed_op_{op}_pred_on.sum"
        copy.counters[raw] = Metric(n, "inst", "ncu", raw)
    m = counter_flops(copy)
    assert m.value == 10 + 20 + 2 * 30 and m.source == "derived" and m.formula


def test_declared_work_is_attributed_to_the_one_kernel_of_each_occurrence():
    s = with_declared_gemms()
    d = declared_totals(s)
    assert d["triton_mm"].per_launch_kernel == "matmul_kernel"
    assert d["cublas_mm"].per_launch_kernel.startswith("nvjet_sm90")
    busy = [x.duration_ns for x in s.launches if "triton_mm" in x.regions]
    assert len(busy) == 2 and d["triton_mm"].gpu_ns == sum(busy)  # kernel busy time, not the region span
    assert d["triton_mm"].flops == 2 * GEMM_FLOPS and d["triton_mm"].units == {"tokens": 2 * N}


def test_roofline_point_from_declared_flops_and_measured_dram_bytes():
    s = with_declared_gemms()
    k = analyze_session(s).kernel("matmul_kernel")
    p = k.roofline
    dram = k.counter_launch.metrics["dram_bytes"].value
    assert p.intensity.value == pytest.approx(GEMM_FLOPS / dram)
    assert p.flop_rate.value == pytest.approx(GEMM_FLOPS / (k.durations.median_ns * 1e-9))
    assert p.flops.source == "user" and p.bytes.raw_name == "dram__bytes.sum"
    assert p.roof.is_missing and NO_CALIBRATION in p.roof.missing_reason  # no ceilings: no roof, no invented number
    assert dict(k.throughput)["tokens"].value == pytest.approx(N / (k.durations.median_ns * 1e-9))


def test_measured_ceilings_give_the_roof_and_the_percentage():
    k = analyze_session(with_declared_gemms(), TEST_CEILINGS).kernel("matmul_kernel")
    p = k.roofline
    assert p.side == "compute"  # ~990 FLOP/byte is far right of the 233 FLOP/byte ridge of the test ceilings
    assert p.roof.value == 7.0e14
    assert p.pct_of_roof.value == pytest.approx(100 * p.flop_rate.value / 7.0e14)
    dram_pct = dict(k.pct_of_peak)["DRAM vs measured copy bandwidth"]
    rate = dict(k.throughput)["DRAM"].value
    assert dram_pct.value == pytest.approx(100 * rate / 3.0e12) and dram_pct.formula
    lowi = dataclasses.replace(p)
    assert lowi.roof.formula.startswith("min(intensity x measured copy bandwidth")


def test_terminal_roofline_snapshots():
    s = with_declared_gemms()
    for name, ceilings in (("roofline_declared_no_ceilings", None), ("roofline_declared_test_ceilings", TEST_CEILINGS)):
        a = analyze_session(s, ceilings)
        text = draw(RooflineChart(tuple(k.roofline for k in a.kernels) + a.regions, a.ceilings))
        assert_snapshot(f"{name}.w120.txt", text)
    assert "Roofs: N/A" in draw(RooflineChart((), Ceilings.none()))


def test_summary_snapshot_with_declared_work():
    a = analyze_session(with_declared_gemms(), TEST_CEILINGS)
    text = draw(SummaryPanel(a.kernel("matmul_kernel")))
    assert "tokens" in text and "% of the compute roof" in text
    assert_snapshot("summary_matmul_declared_test_ceilings.w120.txt", text)


def test_roofline_png(tmp_path):
    pytest.importorskip("matplotlib")
    from kernelscope.render.roofline_plot import write_roofline_png

    a = analyze_session(with_declared_gemms(), TEST_CEILINGS)
    out = write_roofline_png(tuple(k.roofline for k in a.kernels) + a.regions, a.ceilings, tmp_path / "r.png", "t1")
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and b"t1" in data
    none = write_roofline_png((), Ceilings.none(), tmp_path / "n.png", "empty")
    assert none.stat().st_size > 0


def test_show_cli_draws_the_summary_and_writes_the_roofline_png(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")


    s = with_declared_gemms()
    path = tmp_path / "s.json"
    s.save(path)
    png = tmp_path / "r.png"
    r = run_cli("show", str(path), "--width", "120", "--no-color", "--kernel", "matmul_kernel", "--roofline-png",
                str(png), env={"KERNELSCOPE_CACHE_DIR": str(tmp_path / "cache"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert "Profiling summary · matmul_kernel" in r.stdout and "╭─ Roofline" in r.stdout
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_sessions_with_declared_work_round_trip_and_old_files_load(tmp_path):
    s = with_declared_gemms()
    s.save(tmp_path / "s.json")
    back = Session.load(tmp_path / "s.json")
    assert back.declared_work == s.declared_work
    old = json.loads(json.dumps(Session.load(DATA / "session_h100_mixed.json.gz").to_dict()))
    assert "declared_work" not in old  # nothing written when nothing was declared
    assert Session.from_dict(old).declared_work == []


def test_region_declares_work_into_the_log_of_a_recording_trace_pass():
    from kernelscope.collect.trace import regions as R
    with R.region("outside", flops=1.0):  # nothing records: nothing is kept
        pass
    log = R.start_declared_work_log()
    try:
        for i in range(3):
            with R.region("gemm", flops=2.0 * i, bytes=8.0, units={"tokens": 16}):
                pass
        with R.region("plain"):
            pass

        @R.region("decorated", flops=5)
        def f():
            return 7

        assert f() == 7 and f() == 7
    finally:
        got = R.stop_declared_work_log(log)
    assert [(w.region, w.occurrence, w.flops) for w in got] == [
        ("gemm", 0, 0.0), ("gemm", 1, 2.0), ("gemm", 2, 4.0), ("decorated", 0, 5.0), ("decorated", 1, 5.0)]
    assert got[0].bytes == 8.0 and got[0].units == {"tokens": 16.0}
    assert R.stop_declared_work_log(log) == got  # stopping twice is harmless
    with R.region("after", flops=1.0):
        pass
    assert len(log.entries) == len(got)


@pytest.mark.parametrize("kw", [{"flops": -1}, {"bytes": "many"}, {"units": {"tokens": -3}}, {"flops": True}])
def test_region_rejects_bad_declarations(kw):
    from kernelscope.collect.trace.regions import region

    with pytest.raises(ValueError, match="non-negative number"):
        region("r", **kw)


def test_declared_occurrences_line_up_with_the_profiler_regions():
    torch = pytest.importorskip("torch")
    from torch.profiler import ProfilerActivity, profile

    from kernelscope.collect.trace import regions as R
    from kernelscope.collect.trace.kineto import parse_trace

    x = torch.randn(32, 32)
    log = R.start_declared_work_log()
    with profile(activities=[ProfilerActivity.CPU]) as p:
        for i in range(2):
            with R.region("mm", flops=2 * 32 ** 3 * (i + 1)):
                x @ x
            with R.region("other"):
                x + x
    declared = R.stop_declared_work_log(log)
    import tempfile

    with tempfile.NamedTemporaryFile(suffix=".json") as f:
        p.export_chrome_trace(f.name)
        parsed = parse_trace(json.loads(open(f.name).read()))
    s = Session(regions=parsed.regions, declared_work=declared)
    mm = sorted((r for r in s.regions if r.name == "mm"), key=lambda r: r.cpu_start_ns)
    assert len(mm) == 2 and [w.occurrence for w in declared] == [0, 1]
    d = declared_totals(s)["mm"]
    assert d.flops == 2 * 32 ** 3 * 3 and d.gpu_ns is None and d.per_launch_kernel is None  # CPU only: no GPU span


# --- the roofline PNG as a reader sees it (recorded session and the ceilings measured with it) ---

def _recorded_roofline(ceilings: Ceilings | None = None):
    pytest.importorskip("matplotlib")
    from kernelscope.collect.calibrate.ceilings import load_calibration
    from kernelscope.render.roofline_plot import roofline_figure

    s = Session.load(DATA / "session_h100_analysis.json.gz")
    if ceilings is None:
        ceilings = Ceilings.from_metrics(load_calibration(DATA / "ceilings_h100.json").ceilings, "recorded")
    a = analyze_session(s, ceilings)
    points = tuple(k.roofline for k in a.kernels) + a.regions
    fig = roofline_figure(points, ceilings, f"roofline — {s.device.name}")
    fig.canvas.draw()
    return fig, points, ceilings


def _inside(outer, inner) -> bool:
    return outer.x0 <= inner.x0 and inner.x1 <= outer.x1 and outer.y0 <= inner.y0 and inner.y1 <= outer.y1


def _texts(fig):
    return [t for ax in fig.axes for t in ax.texts if t.get_text()]


def test_roofline_png_rates_are_tflops_and_ticks_are_plain_numbers():
    import matplotlib.pyplot as plt

    fig, points, _ = _recorded_roofline()
    ax = fig.axes[0]
    assert "TFLOP/s" in ax.get_ylabel()
    ys = [y for c in ax.collections for _, y in c.get_offsets()]
    rates = [float(p.flop_rate.value) / 1e12 for p in points if not p.flop_rate.is_missing and p.flop_rate.value]
    assert sorted(ys) == pytest.approx(sorted(rates))  # drawn in TFLOP/s, the measured rates / 10¹²
    labels = [t.get_text() for t in ax.get_yticklabels() + ax.get_xticklabels() if t.get_text()]
    assert labels and not any("$" in t or "10^" in t for t in labels), labels  # no raw 10¹⁴ mathtext
    plt.close(fig)


def test_roofline_axes_hold_the_points_and_ridges_not_the_whole_memory_line():
    import matplotlib.pyplot as plt

    fig, points, ceilings = _recorded_roofline()
    ax = fig.axes[0]
    (x_lo, x_hi), (y_lo, y_hi) = ax.get_xlim(), ax.get_ylim()
    drawn = [p for p in points if not p.intensity.is_missing and not p.flop_rate.is_missing]
    bw = float(ceilings.memory_bandwidth.value)
    tensor_ridges = [float(m.value) / bw for label, m in ceilings.compute if "matmul" in label]
    xs = [float(p.intensity.value) for p in drawn] + tensor_ridges
    ys = [float(p.flop_rate.value) / 1e12 for p in drawn] + [float(m.value) / 1e12 for label, m in ceilings.compute
                                                             if "matmul" in label]
    assert all(p.tensor for p in drawn)  # so the fp32 FMA roof sets no limit, and says it is off the chart
    assert x_lo <= min(xs) and max(xs) <= x_hi and y_lo <= min(ys) and max(ys) <= y_hi
    assert x_lo >= min(xs) / 10 and x_hi <= max(xs) * 10 and y_lo >= min(ys) / 10 and y_hi <= max(ys) * 10
    legend_text = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert any("fp32 FMA" in t and "(below the chart)" in t for t in legend_text), legend_text
    plt.close(fig)


def test_roofline_labels_do_not_overlap_and_the_key_and_note_lie_in_the_figure():
    import matplotlib.pyplot as plt

    from kernelscope.render.plot_text import boxes_overlap

    for ceilings in (None, Ceilings.none()):
        fig, points, ceilings = _recorded_roofline(ceilings)
        renderer = fig.canvas.get_renderer()
        chart, key = fig.axes
        numbers = [t for t in chart.texts if t.get_text().isdigit()]
        assert len(numbers) == len(chart.collections) == 6
        boxes = [t.get_window_extent(renderer) for t in numbers]
        assert not any(boxes_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
        markers = chart.transData.transform([xy for c in chart.collections for xy in c.get_offsets()])
        for box in boxes:
            assert _inside(chart.get_window_extent(renderer), box)
            assert not any(box.x0 <= x <= box.x1 and box.y0 <= y <= box.y1 for x, y in markers)
        legend = key.get_legend().get_window_extent(renderer)
        assert _inside(fig.bbox, legend) and not legend.overlaps(chart.get_window_extent(renderer))
        notes = [t for t in key.texts if t.get_text()]
        if ceilings.missing_reason:
            assert notes and "roofs N/A" in notes[0].get_text().replace("\n", " ")
            assert ceilings.missing_reason.split()[0] in notes[0].get_text()
        for t in notes:
            assert _inside(fig.bbox, t.get_window_extent(renderer)), t.get_text()
            assert not boxes_overlap(t.get_window_extent(renderer), legend)
        plt.close(fig)


def test_crowded_roofline_points_still_get_separate_labels():
    pytest.importorskip("matplotlib")
    import matplotlib.pyplot as plt

    from kernelscope.analyze.roofline import make_point
    from kernelscope.render.plot_text import boxes_overlap
    from kernelscope.render.roofline_plot import roofline_figure

    def m(v, unit):
        return Metric(v, unit, "user", "test")

    # eight kernels within 25% of each other in intensity and rate: their markers nearly touch
    pts = tuple(make_point(f"k{i}", "kernel", m(1e12 * (1 + 0.03 * i), "FLOP"), m(1e9, "byte"),
                           m(2e6 * (1 + i % 3 * 0.02), "ns"), True, TEST_CEILINGS) for i in range(8))
    fig = roofline_figure(pts, TEST_CEILINGS, "crowded")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [t.get_window_extent(renderer) for t in fig.axes[0].texts if t.get_text().isdigit()]
    assert len(boxes) == 8
    assert not any(boxes_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    plt.close(fig)
