"""Graph timing (N calls in one CUDA graph / N) and CUPTI kernel time: the arithmetic, the sweep's use of
them (% of floor and speedups on graph time, the table's labels), without a GPU; the GPU part skips."""
from __future__ import annotations

import io

import pytest

from kernelscope.bench.graph_timing import (MAX_WARMUP_REPLAYS, calls_in_graph, copies_for_cold_l2,
                                            kernel_time_per_range, per_call_times, warmup_replays)
from kernelscope.collect.timing import summarize

torch = pytest.importorskip("torch")

from kernelscope.bench.w4a16 import IMPLEMENTATIONS, W4A16Settings, make_cases, run_w4a16_sweep  # noqa: E402

MIB = 1 << 20
EVENT_MS, GRAPH_MS, CUPTI_MS = 2.0, 0.5, 0.4
CPU = W4A16Settings(warmup=0, repeats=1, flush_l2=False, device="cpu", copy_buffer_bytes=MIB)


def test_weight_copies_cover_twice_l2():
    assert copies_for_cold_l2(8 * MIB, 50 * MIB) == 13  # 13 x 8 MiB = 104 MiB >= 100 MiB, 12 x 8 = 96 is not
    assert copies_for_cold_l2(117 * MIB, 50 * MIB) == 2  # never one: a call would follow itself
    assert copies_for_cold_l2(1, 50 * MIB) == 16  # capped
    with pytest.raises(ValueError):
        copies_for_cold_l2(0, 50 * MIB)


def test_warm_up_replays_fill_the_warm_up_time():
    assert warmup_replays(0.9, 25.0) == 28  # 28 x 0.9 ms = 25.2 ms >= 25, 27 x 0.9 = 24.3 is not
    assert warmup_replays(40.0, 25.0) == 1  # a replay longer than the warm-up time: still one
    assert warmup_replays(0.001, 25.0) == MAX_WARMUP_REPLAYS  # capped
    assert warmup_replays(0.0, 25.0) == MAX_WARMUP_REPLAYS  # an unmeasurably short replay: the cap
    assert warmup_replays(0.9, 0.0) == 0  # no warm-up asked for


def test_calls_and_per_call_arithmetic():
    assert calls_in_graph(3) == 21 and calls_in_graph(1) == 20 and calls_in_graph(13) == 26
    assert per_call_times([10.0, 21.0], 5) == [2.0, 4.2]
    with pytest.raises(ValueError):
        per_call_times([1.0], 0)


def test_kernel_time_per_range_attributes_by_start():
    ranges = [("a", 0.0, 100.0), ("b", 200.0, 300.0), ("c", 400.0, 500.0)]
    kernels = [(10.0, 30.0), (40.0, 45.0), (150.0, 190.0), (250.0, 260.0)]  # 150-190: a flush between calls
    got = kernel_time_per_range(ranges, kernels)
    assert got["a"] == pytest.approx(0.025) and got["b"] == pytest.approx(0.010) and got["c"] is None


def test_gpu_annotations_of_the_call_ranges_are_not_kernels():
    from kernelscope.bench.graph_timing import is_gpu_work

    names = ["kernelscope.call.0"]
    assert is_gpu_work("CUDA", "_w4a16_kernel", names, False)
    assert not is_gpu_work("CUDA", "kernelscope.call.0", names, False)  # kineto's GPU span of the range
    assert not is_gpu_work("CUDA", "anything", names, True)
    assert not is_gpu_work("CPU", "cudaLaunchKernel", names, False)


def _fixed(ms):
    def timer(fn, *, warmup=0, repeats=1, flush_l2=False, **_):
        fn()
        return summarize([ms] * 3, warmup, "fake", flush_l2)
    return timer


def _graph_timer(seen):
    def timer(variants, *, replays, flush_l2):
        seen.append(len(variants))
        for v in variants:
            v()
        return summarize([GRAPH_MS] * 3, 0, "fake graph", flush_l2)
    return timer


def _kernel_timer(fn, *, calls, flush_l2):
    fn()
    return summarize([CUPTI_MS] * 3, 0, "fake cupti", flush_l2)




def test_floor_and_speedups_use_graph_time():
    seen: list[int] = []
    results = run_w4a16_sweep(make_cases([4], [(512, 256)]), {"cublas": IMPLEMENTATIONS["cublas"]}, CPU,
                              timer=_fixed(EVENT_MS), graph_timer=_graph_timer(seen), kernel_timer=_kernel_timer,
                              command=["t"])
    row = results.rows[0]
    assert row.status == "ok" and seen == [1]  # no flush: warm point, one weight copy
    assert row.get("median_ms") == EVENT_MS and row.get("graph_median_ms") == GRAPH_MS
    assert row.get("cupti_median_ms") == CUPTI_MS and row.get("timing_basis") == "cuda-graph"
    floor = row.get("floor_ms")
    assert row.get("pct_of_floor") == pytest.approx(100 * floor / GRAPH_MS)
    assert row.get("event_pct_of_floor") == pytest.approx(100 * floor / EVENT_MS)
    assert "graph_median_ms" in results.settings["pct_of_floor_formula"]


def test_speedup_basis_graph_when_both_else_event():
    from kernelscope.bench.w4a16 import add_speedups
    from kernelscope.bench.results import BenchRow

    p = {"m": 1, "k": 512, "n": 256, "groupsize": 128}
    w = BenchRow("w4a16", p, "ok", None, {"median_ms": 4.0, "graph_median_ms": 1.0})
    c = BenchRow("cublas", p, "ok", None, {"median_ms": 6.0, "graph_median_ms": 3.0})
    t = BenchRow("tinygemm", p, "ok", None, {"median_ms": 5.0})  # graph capture failed for it
    add_speedups([w, c, t])
    assert w.get("speedup_vs_cublas") == 3.0 and w.get("speedup_vs_cublas_basis") == "graph_median_ms"
    assert w.get("speedup_vs_tinygemm") == 1.25 and w.get("speedup_vs_tinygemm_basis") == "median_ms"


def test_graph_failure_is_recorded_and_event_time_used():
    def broken(variants, *, replays, flush_l2):
        raise RuntimeError("operation not permitted when stream is capturing")

    results = run_w4a16_sweep(make_cases([1], [(512, 256)]), {"cublas": IMPLEMENTATIONS["cublas"]}, CPU,
                              timer=_fixed(EVENT_MS), graph_timer=broken, command=["t"])
    row = results.rows[0]
    assert row.status == "ok" and row.get("graph_median_ms") is None
    assert "CUDA-graph capture or replay failed: RuntimeError" in row.get("graph_missing_reason")
    assert row.get("cupti_missing_reason") == "not measured on a CPU run"
    assert row.get("timing_basis") == "cuda-event"
    assert row.get("pct_of_floor") == pytest.approx(100 * row.get("floor_ms") / EVENT_MS)


def test_summary_table_labels_each_timing():
    from kernelscope.cli.bench.w4a16 import print_summary

    results = run_w4a16_sweep(make_cases([1, 4], [(512, 256)]), {"cublas": IMPLEMENTATIONS["cublas"]}, CPU,
                              timer=_fixed(EVENT_MS), graph_timer=_graph_timer([]), kernel_timer=_kernel_timer,
                              command=["t"])
    buf = io.StringIO()
    print_summary(results, 140, False, file=buf)
    lines = buf.getvalue().splitlines()
    first = next(line for line in lines if line.startswith("│ cublas (graph)"))
    assert first.count(f"{GRAPH_MS:.4f} / ") == 2
    assert next(line for line in lines if "cublas (event)" in line).count(f"{EVENT_MS:.4f}") == 2
    assert next(line for line in lines if "cublas (cupti)" in line).count(f"{CUPTI_MS:.4f}") == 2
    assert "graph = N calls in one CUDA graph / N" in buf.getvalue()


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_graph_time_on_gpu_is_below_event_time_for_a_tiny_kernel():
    from kernelscope.bench.graph_timing import time_cuda_graph, time_cupti_kernels
    from kernelscope.collect.timing import time_cuda

    x = torch.zeros(1, device="cuda")
    event = time_cuda(lambda: x.fill_(1.0), flush_l2=False)
    graph = time_cuda_graph([lambda: x.fill_(1.0)], flush_l2=False)
    cupti = time_cupti_kernels(lambda: x.fill_(1.0), flush_l2=False)
    assert 0 < graph.median_ms < event.median_ms and 0 < cupti.median_ms < event.median_ms
    assert "warm-up replays)" in graph.clock  # the replays before the timed ones, as the rows record them
