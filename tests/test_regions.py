"""kernelscope.region marks ranges the trace pass sees (record_function), as a
context manager and as a decorator. Checked on the CPU with the real profiler."""
from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from kernelscope.collect.trace.kineto import parse_trace  # noqa: E402
from kernelscope.collect.trace.regions import region  # noqa: E402


@region("decorated")
def _work(x):
    return (x @ x).sum()


def test_regions_appear_in_a_real_profiler_trace_nested(tmp_path):
    from torch.profiler import ProfilerActivity, profile

    x = torch.randn(64, 64)
    with profile(activities=[ProfilerActivity.CPU]) as p:
        with region("outer"):
            with region("inner"):
                x @ x
            _work(x)
            _work(x)
    path = tmp_path / "t.json"
    p.export_chrome_trace(str(path))
    parsed = parse_trace(json.loads(path.read_text()))
    names = [r.name for r in parsed.regions]
    assert names.count("outer") == 1 and names.count("inner") == 1 and names.count("decorated") == 2
    outer = next(r for r in parsed.regions if r.name == "outer")
    for r in parsed.regions:
        if r.name != "outer":
            assert outer.cpu_start_ns <= r.cpu_start_ns
            assert r.cpu_start_ns + r.cpu_duration_ns <= outer.cpu_start_ns + outer.cpu_duration_ns


def test_region_needs_a_name():
    with pytest.raises(ValueError, match="non-empty name"):
        region("")


def test_decorator_keeps_the_function():
    assert _work.__name__ == "_work"
    assert float(_work(torch.ones(2, 2))) == 8.0
