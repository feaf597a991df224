"""Trace pass + counter pass in one session, recorded with `kernelscope run --counters`
on an H100: launches matched by kernel name, configuration and occurrence."""
from __future__ import annotations

import copy

import pytest

from conftest import DATA
from kernelscope.collect.ncu.merge import merge
from kernelscope.collect.ncu.report_reader import read_report
from kernelscope.model import Metric, Session
from kernelscope.model.names import short_kernel_name
from ncu_fixtures import report_file


def _profiled(s: Session):
    return [x for x in s.launches if x.counters]


@pytest.mark.parametrize("name,expected", [("session_h100_counters", 4), ("counters_h100_region", 1)])
def test_each_counter_result_sits_on_a_trace_launch_of_the_same_configuration(name, expected):
    s = Session.load(DATA / f"{name}.json.gz")
    details = s.collectors["counters"].details
    assert s.collectors["trace"].status == "ok" and s.collectors["counters"].status == "ok"
    assert details["matched_by_config"] == details["kernels_profiled"] == expected
    profiled = _profiled(s)
    assert len(profiled) == expected
    for x in profiled:
        c = x.counters
        assert (c["launch__grid_dim_x"].value, c["launch__grid_dim_y"].value, c["launch__grid_dim_z"].value) == x.grid
        assert (
            c["launch__block_dim_x"].value,
            c["launch__block_dim_y"].value,
            c["launch__block_dim_z"].value,
        ) == x.block
        assert x.start_ns is not None  # a trace launch, not one invented from the report
        # CUPTI's duration and ncu's gpu__time_duration measure the same kernel in two runs
        assert 0.5 < c["gpu__time_duration.sum"].value / x.duration_ns < 2.0, x.kernel
        assert x.metrics["achieved_occupancy_pct"].source == "ncu"
        assert x.metrics["registers_per_thread"].source == "cupti"  # trace values stay; ncu's copy is in counters
        assert c["launch__registers_per_thread"].value == x.metrics["registers_per_thread"].value


def test_region_filter_profiled_only_the_kernel_inside_the_nvtx_range():
    s = Session.load(DATA / "counters_h100_region.json.gz")
    (x,) = _profiled(s)
    assert short_kernel_name(x.kernel).startswith("nvjet") and "cublas_mm" in x.regions
    first = next(y for y in s.launches if short_kernel_name(y.kernel) == short_kernel_name(x.kernel))
    assert x is first  # occurrence 0 of that configuration (launch-skip 0)


def test_merge_again_from_the_report_gives_the_same_match(tmp_path):
    recorded = Session.load(DATA / "counters_h100_region.json.gz")
    trace_only = copy.deepcopy(recorded)
    for x in trace_only.launches:
        x.counters, x.findings = {}, []
        x.metrics = {k: m for k, m in x.metrics.items() if m.source != "ncu"}
        x.metrics["achieved_occupancy_pct"] = Metric.missing("sm__warps_active.avg.pct_of_peak_sustained_active",
                                                             "needs the counter pass (ncu)", "ncu", "%")
    report = read_report(report_file("ncu_h100_region", tmp_path))
    stats = merge(trace_only, report)
    assert (stats.matched_by_config, stats.matched_by_name, stats.unmatched) == (1, 0, 0)
    got = [i for i, x in enumerate(trace_only.launches) if x.counters]
    want = [i for i, x in enumerate(recorded.launches) if x.counters]
    assert got == want
    a, b = trace_only.launches[got[0]], recorded.launches[want[0]]
    assert a.metrics["achieved_occupancy_pct"].value == b.metrics["achieved_occupancy_pct"].value


def test_launch_skip_moves_the_match_to_that_occurrence(tmp_path):
    s = Session.load(DATA / "counters_h100_region.json.gz")
    for x in s.launches:
        x.counters, x.findings = {}, []
    report = read_report(report_file("ncu_h100_region", tmp_path))
    merge(s, report, launch_skip=1)
    nvjet = [x for x in s.launches if short_kernel_name(x.kernel).startswith("nvjet")]
    assert len(nvjet) == 2 and not nvjet[0].counters and nvjet[1].counters
