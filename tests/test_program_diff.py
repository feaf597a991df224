"""`kernelscope diff` compares programs: recorded defect / fixed pairs of the program suite (H100, 2026-11-26,
tests/data/diagnosis/programs; their unprofiled step times are in program_timings.json) diffed as programs: step
time, breakdown, which findings went away, and each finding's estimated gain against the measured one."""
from __future__ import annotations

import json
from functools import cache

import pytest

from conftest import ROOT, assert_snapshot, run_cli
from kernelscope.analyze.analysis import analyze_session
from kernelscope.analyze.program_diff import GONE, NEW, REMAINS, REPLAYED, program_diff
from kernelscope.analyze.ranks import ranks_report
from kernelscope.analyze.replay import GAIN_FORMULA as REPLAY_GAIN_FORMULA
from kernelscope.analyze.verdict import session_verdict
from kernelscope.model import Session

PROGRAMS = ROOT / "tests" / "data" / "diagnosis" / "programs"
TIMINGS = json.loads((PROGRAMS / "program_timings.json").read_text())["programs"]
PAIRS = ("holdout_sync_nonzero", "launch_decode_loop")


@cache
def _verdict(name: str, variant: str):
    s = Session.load(PROGRAMS / TIMINGS[name]["sessions"][variant])
    ranks = ranks_report(s)
    return session_verdict(s, analyze_session(s, collectives=ranks.collectives), ranks)


def _path(name: str, variant: str) -> str:
    return str((PROGRAMS / TIMINGS[name]["sessions"][variant]).relative_to(ROOT))


@pytest.mark.parametrize("name", PAIRS)
def test_the_planted_defect_goes_away_with_its_estimate_and_the_measured_step_gain(name):
    before, after = _verdict(name, "defect"), _verdict(name, "fixed")
    d = program_diff(before, after)
    rule = TIMINGS[name]["expected_rule"]
    change = next(f for f in d.findings if f.rule == rule and f.kernel is None)
    assert change.status == GONE
    step_a, step_b = before.breakdown.ranks[0].median_step_ns, after.breakdown.ranks[0].median_step_ns
    assert d.step_a.step_ns == step_a and d.step_b.step_ns == step_b
    assert change.measured_gain_pct == pytest.approx(100 * (1 - step_b / step_a))
    estimate = next(f for f in before.findings if f.rule == rule and f.kernel is None)
    assert change.estimated_gain_pct == estimate.gain_pct
    assert change.estimate_basis == REPLAYED and estimate.gain_formula.startswith(REPLAY_GAIN_FORMULA)


def test_findings_gone_together_share_the_measured_gain_and_get_no_error_each():
    d = program_diff(_verdict("holdout_sync_nonzero", "defect"), _verdict("holdout_sync_nonzero", "fixed"))
    gone = d.gone
    assert {"sync-in-loop", "launch-bound"} <= {f.rule for f in gone}
    sync = next(f for f in gone if f.rule == "sync-in-loop")
    # the fixed program still reports a sync in the loop, with almost nothing left to gain: gone, with what is left
    assert sync.gain_b_pct is not None and sync.gain_b_pct < 1.0
    assert all(f.measured_gain_pct == d.measured_gain_pct and f.error_pp is None for f in gone)
    assert set(sync.together_with) == {f.name for f in gone} - {sync.name}
    assert [f.rule for f in d.findings if f.status == NEW] == ["unfused-elementwise"]


def test_one_finding_gone_alone_gets_its_error_in_points():
    d = program_diff(_verdict("launch_decode_loop", "defect"), _verdict("launch_decode_loop", "fixed"))
    (gone,) = d.gone
    assert gone.together_with == ()
    assert gone.error_pp == pytest.approx(d.measured_gain_pct - gone.estimated_gain_pct)


def test_a_program_against_itself_keeps_every_finding_and_gains_nothing():
    v = _verdict("launch_decode_loop", "fixed")
    d = program_diff(v, v)
    assert d.measured_gain_pct == 0.0
    assert d.findings and all(f.status == REMAINS and f.gain_b_pct == f.estimated_gain_pct for f in d.findings)
    assert all(c.share_a == c.share_b and c.per_step_a_ns == c.per_step_b_ns for c in d.breakdown)


def test_breakdown_per_step_is_the_category_time_over_the_steps():
    before = _verdict("launch_decode_loop", "defect")
    d = program_diff(before, _verdict("launch_decode_loop", "fixed"))
    r = before.breakdown.ranks[0]
    launching = next(c for c in d.breakdown if c.category == "host launching")
    assert launching.per_step_a_ns == r.ns("host launching") / r.steps
    assert launching.share_a == r.ns("host launching") / r.wall_ns


def test_cli_json_carries_the_program_comparison():
    code, out, err = run_cli("diff", _path("launch_decode_loop", "defect"), _path("launch_decode_loop", "fixed"),
                             "--json")
    assert code == 0, err
    p = json.loads(out)["program"]
    before, after = _verdict("launch_decode_loop", "defect"), _verdict("launch_decode_loop", "fixed")
    step_a, step_b = before.breakdown.ranks[0].median_step_ns, after.breakdown.ranks[0].median_step_ns
    assert (p["step_a"]["step_ns"], p["step_b"]["step_ns"]) == (step_a, step_b)
    assert p["measured_gain_pct"] == pytest.approx(100 * (1 - step_b / step_a))
    launch = next(f for f in p["findings"] if f["rule"] == "launch-bound")
    assert launch["status"] == GONE
    assert launch["estimated_gain_pct"] == pytest.approx(next(f.gain_pct for f in before.findings
                                                              if f.rule == "launch-bound"))


def test_cli_terminal_snapshot():
    code, out, err = run_cli("diff", _path("launch_decode_loop", "defect"), _path("launch_decode_loop", "fixed"),
                             "--width", "120", "--no-color", "--kernel", "layer_norm")
    assert code == 0, err
    assert "launch-bound" in out and "gone" in out
    assert_snapshot("diff_program_launch_decode_loop.w120.txt", out)


def test_sessions_too_short_to_judge_are_not_compared_as_programs_and_say_why():
    a, b = (Session.load(ROOT / "tests" / "data" / f) for f in ("session_h100_counters.json.gz",
                                                                 "counters_h100_region.json.gz"))
    va, vb = (session_verdict(s, analyze_session(s), ranks_report(s)) for s in (a, b))
    d = program_diff(va, vb)
    assert va.too_short and d.missing_reason == f"A: {va.too_short}"
    assert d.measured_gain_pct is None and not d.findings and not d.breakdown
