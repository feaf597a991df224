"""The session verdict: its numbers are the analysis's, and `show` opens with it (`--brief`: only it)."""
from __future__ import annotations

import pytest

from conftest import DATA, run_cli
from kernelscope.analyze.analysis import analyze_session
from kernelscope.analyze.rules.base import NO_COUNTERS
from kernelscope.analyze.recommend import TIMELINE_RULES
from kernelscope.analyze.verdict import KERNEL_GAIN_FORMULA, TOP_KERNELS, session_verdict
from kernelscope.model import Session

COUNTERS = DATA / "session_h100_counters.json.gz"


@pytest.fixture(scope="module")
def recorded():
    s = Session.load(COUNTERS)
    a = analyze_session(s)
    return s, a, session_verdict(s, a)


def test_time_by_kernel_is_the_kernel_table(recorded):
    s, a, v = recorded
    ks = a.summary.kernels
    assert v.kernel_time_ns == sum(x.duration_ns for x in s.launches) == a.summary.total_kernel_ns
    assert [r.name for r in v.by_kernel[:TOP_KERNELS]] == [k.label for k in ks[:TOP_KERNELS]]
    assert [r.total_ns for r in v.by_kernel[:TOP_KERNELS]] == [k.total_ns for k in ks[:TOP_KERNELS]]
    assert v.by_kernel[-1].name == f"{len(ks) - TOP_KERNELS} other kernels"
    assert sum(r.total_ns for r in v.by_kernel) == v.kernel_time_ns
    assert sum(r.share for r in v.by_kernel) == pytest.approx(1.0)


def test_time_by_kind_and_region_sum_what_was_recorded(recorded):
    s, a, v = recorded
    kinds = {r.name: r for r in v.by_kind}
    assert kinds["kernel"].total_ns == v.kernel_time_ns
    for kind in ("memcpy", "memset"):
        acts = [x for x in s.activities if x.kind == kind]
        assert (kinds[kind].total_ns, kinds[kind].count) == (sum(x.duration_ns for x in acts), len(acts))
    assert sum(r.share for r in v.by_kind) == pytest.approx(1.0)
    regions = {r.name: r.total_ns for r in v.by_region}
    assert regions["triton_mm"] == sum(x.duration_ns for x in s.launches if x.regions and x.regions[-1] == "triton_mm")
    assert sum(regions.values()) == v.kernel_time_ns  # innermost region: nothing counted twice


def test_kernel_findings_are_the_analysis_ranking_as_shares_of_wall_time(recorded):
    _, a, v = recorded
    ranked = [r for r in a.ranked if r.session_gain_pct is not None and r.gain_pct is not None
              and r.finding.rule_id not in TIMELINE_RULES]
    assert ranked, "the recorded counter session has estimated findings"
    (b,) = v.breakdown.ranks
    busy = b.ns("kernels") / b.wall_ns
    kernel = [f for f in v.findings if f.scope == "kernel"]
    # every kernel finding is one of the analysis's, its gain in wall time by the named formula
    by_key = {(r.finding.rule_id, r.gain_pct): r for r in ranked}
    for f in kernel:
        r = by_key[(f.rule, f.kernel_gain_pct)]
        assert f.gain_pct == pytest.approx(r.session_gain_pct * busy)
        assert f.gain_formula.startswith(KERNEL_GAIN_FORMULA)
    assert [f.gain_pct for f in v.findings] == sorted((f.gain_pct for f in v.findings), reverse=True)
    assert v.unranked == len([r for r in a.ranked if r.session_gain_pct is None or r.gain_pct is None])


def test_what_was_not_measured_names_the_kernels_without_counters(recorded):
    s, a, v = recorded
    without = [k for k in a.kernels if k.counter_launch is None]
    (row,) = [n for n in v.not_measured if n.reason == NO_COUNTERS]
    assert row.kernels == len(without) > 0 and "counters" in row.what
    assert any(n.what.startswith("measured ceilings") for n in v.not_measured)  # no calibration: said once


def test_counter_only_session_says_why_there_is_no_split_by_kind():
    s = Session.load(DATA / "counters_h100_cuda.json.gz")
    v = session_verdict(s, analyze_session(s))
    assert v.by_kind == () and "no start times" in v.by_kind_missing


def test_show_opens_with_the_verdict_and_brief_stops_there():
    full = run_cli("show", str(COUNTERS), "--width", "120", "--no-color")
    brief = run_cli("show", str(COUNTERS), "--width", "120", "--no-color", "--brief")
    assert full.returncode == brief.returncode == 0, full.stderr + brief.stderr
    panels = [ln for ln in full.stdout.splitlines() if ln.startswith("╭─ ")]
    assert panels[0].startswith("╭─ kernelscope session") and panels[1].startswith("╭─ Verdict")
    assert full.stdout.index("Verdict") < full.stdout.index("Kernels by total GPU time")
    assert brief.stdout.rstrip().endswith("╯") and "Kernels by total GPU time" not in brief.stdout
    assert full.stdout.startswith(brief.stdout)
    assert len(brief.stdout.splitlines()) < len(full.stdout.splitlines()) / 5
