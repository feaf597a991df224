"""The Kineto trace parser on a trace recorded on an H100 (tests/data/trace_h100_mixed.json.gz)."""
from __future__ import annotations

import gzip
import json

import pytest

from conftest import DATA
from kernelscope.collect.trace.kineto import TraceFormatError, parse_trace


@pytest.fixture(scope="module")
def doc():
    return json.loads(gzip.decompress((DATA / "trace_h100_mixed.json.gz").read_bytes()))


@pytest.fixture(scope="module")
def parsed(doc):
    return parse_trace(doc)


def test_every_kernel_event_becomes_a_launch_with_its_raw_config(doc, parsed):
    raw = sorted((e for e in doc["traceEvents"] if e.get("cat") == "kernel"), key=lambda e: e["ts"])
    assert len(parsed.launches) == len(raw) > 0
    for launch, e in zip(parsed.launches, raw):
        assert launch.kernel == e["name"]
        assert list(launch.grid) == e["args"]["grid"] and list(launch.block) == e["args"]["block"]
        assert launch.value("registers_per_thread") == e["args"]["registers per thread"]
        assert launch.value("shared_memory_per_block_bytes") == e["args"]["shared memory"]
        assert launch.duration_ns == round(e["dur"] * 1000)
        assert launch.stream == e["args"]["stream"]


def test_launch_times_are_on_one_clock_and_ordered(parsed):
    starts = [x.start_ns for x in parsed.launches]
    assert starts == sorted(starts) and starts[0] >= 0
    assert parsed.time_origin_ns > 1_700_000_000 * 10**9  # absolute, from baseTimeNanoseconds


def test_regions_enclose_the_kernels_launched_inside_them(parsed):
    by_short = {}
    for x in parsed.launches:
        by_short.setdefault(x.kernel.split("<")[0][-40:], set()).update(x.regions)
    flash = [x for x in parsed.launches if "flash_fwd_kernel" in x.kernel]
    gemm = [x for x in parsed.launches if x.kernel.startswith("nvjet")]
    triton = [x for x in parsed.launches if x.kernel == "_scaled_add"]
    assert flash and all(x.regions == ["attention"] for x in flash)
    assert gemm and all(x.regions == ["gemm"] for x in gemm)
    assert triton and all(x.regions == ["elementwise"] for x in triton)
    # torch.randn runs before any region
    assert all(not x.regions for x in parsed.launches if "distribution" in x.kernel)


def test_region_gpu_spans_cover_their_kernels(parsed):
    gemm = [r for r in parsed.regions if r.name == "gemm"]
    assert len(gemm) == 2 and all(r.gpu_start_ns is not None for r in gemm)
    for r in gemm:
        inside = [x for x in parsed.launches if "gemm" in x.regions
                  and r.gpu_start_ns <= x.start_ns <= r.gpu_start_ns + r.gpu_duration_ns]
        assert len(inside) == 1


def test_values_the_trace_cannot_give_are_missing_with_reasons(parsed):
    m = parsed.launches[0].metrics
    assert m["shared_memory_static_bytes"].is_missing and "combined" in m["shared_memory_static_bytes"].missing_reason
    assert m["achieved_occupancy_pct"].is_missing and "ncu" in m["achieved_occupancy_pct"].missing_reason
    assert m["kineto_estimated_occupancy_pct"].source == "derived"


def test_device_properties_from_the_trace(parsed):
    (d,) = parsed.devices
    assert d.name == "NVIDIA H100 80GB HBM3" and d.compute_capability == (9, 0)
    assert d.value("sm_count") == 132


def test_memcpy_and_memset_are_kept(doc, parsed):
    raw = [e for e in doc["traceEvents"] if e.get("cat") in ("gpu_memcpy", "gpu_memset")]
    assert len(parsed.activities) == len(raw) > 0
    assert {a.kind for a in parsed.activities} == {"memcpy", "memset"}


@pytest.mark.parametrize("bad", [[], {"traceEvents": "x"}, {"nothing": 1}])
def test_not_a_trace(bad):
    with pytest.raises(TraceFormatError):
        parse_trace(bad)


def test_malformed_kernel_events_are_left_out_and_counted(doc, parsed):
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    kernels[0]["args"]["block"] = [128, 1, -5]  # no kernel runs with a negative block dimension
    kernels[1]["ts"] = "soon"  # not a time
    got = parse_trace(doc)
    assert len(got.launches) == len(parsed.launches) - 2
    assert got.problems == ["2 malformed kernel event(s) left out"]
    assert parsed.problems == []


def test_a_launch_from_another_thread_belongs_to_the_step_whose_window_holds_it():
    """The backward pass's kernels are launched from autograd's thread, where no step range is open: they get
    the step range of their process that holds their launch time (outermost), other regions kept."""
    def x(cat, name, ts, dur, tid, **args):
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid, "args": args}

    events = [
        x("user_annotation", "ProfilerStep#1", 0.0, 100.0, 1), x("user_annotation", "ProfilerStep#2", 100.0, 100.0, 1),
        x("user_annotation", "backward_block", 20.0, 50.0, 7),  # a range on the autograd thread
        x("cuda_runtime", "cudaLaunchKernel", 10.0, 2.0, 1, correlation=1),  # main thread, step 1
        x("cuda_runtime", "cudaLaunchKernel", 30.0, 2.0, 7, correlation=2),  # autograd thread, step 1
        x("cuda_runtime", "cudaLaunchKernel", 150.0, 2.0, 7, correlation=3),  # autograd thread, step 2
        *(x("kernel", f"k{i}", 15.0 + 60 * i, 5.0, 9, correlation=i + 1, grid=[1, 1, 1], block=[32, 1, 1])
          for i in range(3)),
    ]
    parsed = parse_trace({"traceEvents": events})
    regions = {x.kernel: x.regions for x in parsed.launches}
    assert regions == {"k0": ["ProfilerStep#1"], "k1": ["ProfilerStep#1", "backward_block"], "k2": ["ProfilerStep#2"]}


def test_kernels_launched_by_autograd_s_thread_get_the_regions_open_on_the_main_thread():
    """kernelscope.region("backward") wraps loss.backward() on the main thread; autograd launches the kernels from
    its own thread, where nothing is open: they belong to the main thread's step and region at their launch time."""
    def x(cat, name, ts, dur, tid, **args):
        return {"ph": "X", "cat": cat, "name": name, "ts": ts, "dur": dur, "pid": 1, "tid": tid, "args": args}

    events = [
        x("user_annotation", "ProfilerStep#3", 0.0, 100.0, 1), x("user_annotation", "backward", 40.0, 50.0, 1),
        x("cuda_runtime", "cudaLaunchKernel", 10.0, 2.0, 1, correlation=1),  # forward, main thread
        x("cuda_runtime", "cudaLaunchKernel", 50.0, 2.0, 7, correlation=2),  # autograd thread, inside backward
        x("cuda_runtime", "cudaLaunchKernel", 95.0, 2.0, 7, correlation=3),  # autograd thread, after backward
        *(x("kernel", f"k{i}", 15.0 + 40 * i, 5.0, 9, correlation=i + 1, grid=[1, 1, 1], block=[32, 1, 1])
          for i in range(3)),
    ]
    regions = {x.kernel: x.regions for x in parse_trace({"traceEvents": events}).launches}
    assert regions == {"k0": ["ProfilerStep#3"], "k1": ["ProfilerStep#3", "backward"], "k2": ["ProfilerStep#3"]}
