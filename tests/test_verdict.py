"""The session verdict: its numbers are the analysis's, and `show` opens with it (`--brief`: only it)."""
from __future__ import annotations

import re

import pytest

from conftest import DATA, draw, ROOT, run_cli, shown
from kernelscope.analyze.analysis import analyze_session
from kernelscope.analyze.rules.base import NO_COUNTERS
from kernelscope.analyze.recommend import TIMELINE_RULES
from kernelscope.analyze.verdict import KERNEL_GAIN_FORMULA, TOP_KERNELS, session_verdict
from kernelscope.model import Session
from kernelscope.render.verdict import VerdictPanel, gain_text, window_text

DEMO = ROOT / "src" / "kernelscope" / "data" / "demo_session.json.gz"
RANKS = DATA / "ranks" / "session_h200x2_run_torchrun.json.gz"
STRAGGLER_N2 = DATA / "diagnosis" / "programs" / "straggler_allreduce_n2_defect.json.gz"  # launch-bound on rank 1

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
              and r.finding.rule not in TIMELINE_RULES]
    assert ranked, "the recorded counter session has estimated findings"
    (b,) = v.breakdown.ranks
    busy = b.ns("kernels") / b.wall_ns
    kernel = [f for f in v.findings if f.scope == "kernel"]
    # every kernel finding is one of the analysis's, its gain in wall time by the named formula
    by_key = {(r.finding.rule, r.gain_pct): r for r in ranked}
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


def test_ranks_with_the_same_window_are_named_once():
    s = Session.load(RANKS)
    v = session_verdict(s, analyze_session(s))
    text = window_text(v)
    assert text.startswith("ranks 0, 1: 16.810 ms of wall time each, from the end of the first launch")
    assert text.count("no steps marked") == 1


def test_a_finding_of_one_rank_names_it_in_the_terminal_and_not_in_a_one_rank_session(tmp_path):
    s = Session.load(STRAGGLER_N2)
    v = session_verdict(s, analyze_session(s))
    (f,) = [g for g in v.gains if g.rule == "launch-bound"]
    assert f.rank == 1
    assert gain_text(f, 2).endswith("(rank 1)")
    assert "launch each kernel (rank 1)" in draw(VerdictPanel(v), 160)  # not eaten as a markup tag
    demo = Session.load(DEMO)
    dv = session_verdict(demo, analyze_session(demo))
    assert all("rank" not in gain_text(g, 1) for g in dv.gains)
    out = tmp_path / "d.html"
    assert run_cli("report", str(DEMO), "-o", str(out)).returncode == 0
    assert "[rank 0]" not in out.read_text()


def test_kernel_time_and_the_gpu_time_the_kinds_share():
    text = shown(DEMO, "--brief", "--width", "160")
    # 463.96 µs of kernels + 359.04 µs of copies = 823.00 µs; 463.96 / 823.00 = 56.4%
    assert "463.96 µs of kernel time in 10 launches of 2 kernels; 823.00 µs of GPU time with the copies" in text
    assert re.search(r"by kind\s+56\.4%\s+463\.96 µs\s+kernels", text)


def test_a_prerequisite_listed_before_a_larger_gain_is_said(tmp_path):
    # the host syncs (23.0% replayed) come before launch-bound (45.1%): a CUDA graph cannot hold them
    path = DATA / "diagnosis" / "programs" / "holdout_sync_nonzero_defect.json.gz"
    s = Session.load(path)
    v = session_verdict(s, analyze_session(s))
    assert [f.rule for f in v.gains[:2]] == ["sync-in-loop", "launch-bound"]
    assert v.gains[0].gain_pct < v.gains[1].gain_pct
    flat = " ".join(line.strip("│ ") for line in shown(path, "--brief", "--width", "160").splitlines())
    assert "largest estimated gain first (share of the window's wall time); a finding whose fix another needs first " \
           "comes before it" in flat
    assert "needs first comes before it" not in shown(DEMO, "--brief", "--width", "160")  # in gain order there
    out = tmp_path / "s.html"
    assert run_cli("report", str(path), "-o", str(out), "--panels", "0").returncode == 0
    assert "a finding whose fix another needs first comes before it" in out.read_text()
