"""`kernelscope diff`: two recordings of the same workload on the H100 (differences are
noise), a recording against a copy with durations scaled (a real slowdown), noise
detection, the CI exit status, different GPUs, and bad input."""
from __future__ import annotations

import json

import pytest

from conftest import assert_snapshot, DATA, draw, run_cli
from kernelscope.analyze.diff import FASTER, NOISE, ONLY_A, SAME, SLOWER, UNSTEADY, diff_sessions
from kernelscope.analyze.analysis import analyze_session
from kernelscope.model import Session
from kernelscope.render.diff_view import DiffView

MIXED = DATA / "session_h100_mixed.json.gz"
RUN1 = DATA / "session_h100_counters.json.gz"  # tests/workloads/counters_small.py ...
RUN2 = DATA / "counters_h100_region.json.gz"  # ... recorded again, the counter pass on one region


def diff(a: Session, b: Session):
    return diff_sessions(analyze_session(a), analyze_session(b), a, b)


def scaled(s: Session, factor: float, only: str | None = None) -> Session:
    out = Session.from_dict(s.to_dict())
    for x in out.launches:
        if only is None or only in x.kernel:
            x.duration_ns = int(round(x.duration_ns * factor))
    return out


def ks(*args: str, cache: str = "/nonexistent-kernelscope-cache"):
    return run_cli(*args, env={"KERNELSCOPE_CACHE_DIR": cache})


def test_a_session_against_itself_is_the_same_everywhere():
    s = Session.load(MIXED)
    d = diff(s, s)
    assert {k.verdict for k in d.kernels} == {SAME}
    assert d.total_change_pct == 0 and d.device.warning is None and not d.slower_than(0)


def test_scaled_durations_are_slower_unless_within_the_spread():
    a = Session.load(MIXED)
    b = scaled(a, 1.25)
    d = diff(a, b)
    assert d.total_change_pct == pytest.approx(25.0, abs=0.01)
    slower = 0
    for k in d.kernels:
        assert k.change_pct == pytest.approx(25.0, abs=0.1)
        beyond = k.spread_ns is None or abs(k.b.median_ns - k.a.median_ns) > k.spread_ns
        unsteady = not beyond and k.spread_ns > max(k.a.median_ns, k.b.median_ns)
        assert k.verdict == (SLOWER if beyond else UNSTEADY if unsteady else NOISE), k.name
        slower += k.verdict == SLOWER
    assert slower >= 10
    # distribution_elementwise ran at several sizes with one configuration: its spread hides +25%
    dist = next(k for k in d.kernels if k.short_name.startswith("distribution_elementwise") and k.a.launches > 4)
    assert dist.verdict in (NOISE, UNSTEADY) and dist.spread_ns > dist.b.median_ns - dist.a.median_ns


def test_changes_smaller_than_the_spread_are_noise_not_wins():
    a = Session.load(DATA / "session_h100_samples.json.gz")  # 703 launches of one GEMM: a real IQR
    b = scaled(a, 0.99, only="nvjet")
    k = next(k for k in diff(a, b).kernels if "nvjet" in k.name)
    assert k.spread_basis == "IQR" and k.change_pct == pytest.approx(-1.0, abs=0.05)
    assert k.verdict == NOISE  # a 1% "win" inside a 119 µs IQR is not a win
    k2 = next(k for k in diff(a, scaled(a, 0.5, only="nvjet")).kernels if "nvjet" in k.name)
    assert k2.verdict == FASTER


def test_two_real_recordings_of_the_same_workload_differ_only_by_noise():
    a, b = Session.load(RUN1), Session.load(RUN2)
    d = diff(a, b)
    assert d.device.warning is None
    assert not d.slower_than(2.0)
    assert all(k.verdict in (NOISE, UNSTEADY, FASTER, SLOWER, SAME) for k in d.kernels)
    assert sum(k.verdict == NOISE for k in d.kernels) >= 7
    nvjet = next(k for k in d.kernels if "nvjet" in k.name)  # the counter pass measured it in both
    counters = {c.label: c for c in nvjet.counters}
    assert counters["DRAM bytes"].change_pct == pytest.approx((17355520 - 17239808) / 17239808 * 100)
    assert counters["registers/thread"].change_pct == 0


def test_different_gpus_are_warned_about():
    a = Session.load(MIXED)
    b = Session.from_dict(a.to_dict())
    b.device.name = "NVIDIA A100-SXM4-80GB"
    d = diff(a, b)
    assert not d.device.same_gpu and "different GPUs" in d.device.warning
    assert "Warning" in draw(DiffView(d, "a", "b"))


def test_kernels_in_one_session_only():
    a = Session.load(MIXED)
    b = Session.from_dict(a.to_dict())
    b.launches = [x for x in b.launches if "nvjet" not in x.kernel]
    k = next(k for k in diff(a, b).kernels if "nvjet" in k.name)
    assert k.verdict == ONLY_A and k.b is None


def test_cli_fail_if_slower_exit_status(tmp_path):
    slow = tmp_path / "slow.json.gz"
    scaled(Session.load(MIXED), 1.25).save(slow)
    r = ks("diff", str(MIXED), str(slow), "--fail-if-slower", "10", "--width", "120", "--no-color")
    assert r.returncode == 1 and "slower by more than 10%" in r.stdout
    assert ks("diff", str(MIXED), str(slow), "--fail-if-slower", "30").returncode == 0
    assert ks("diff", str(RUN1), str(RUN2), "--fail-if-slower", "2").returncode == 0
    r = ks("diff", str(MIXED), str(slow), "--json", "--fail-if-slower", "10")
    doc = json.loads(r.stdout)
    assert r.returncode == 1 and doc["schema"] == "kernelscope-diff/1" and doc["slower"]
    assert all(k["change_pct"] == pytest.approx(25.0, abs=0.1) for k in doc["kernels"])


def test_cli_warns_on_stderr_for_different_gpus(tmp_path):
    other = Session.load(MIXED)
    other.device.name = "NVIDIA A100-SXM4-80GB"
    p = tmp_path / "other.json"
    other.save(p)
    r = ks("diff", str(MIXED), str(p))
    assert r.returncode == 0 and "warning: the sessions ran on different GPUs" in r.stderr


@pytest.mark.parametrize("args,phrase", [
    (["diff", "no_such.json", str(MIXED)], "no such session file"),
    (["diff", str(MIXED), str(MIXED), "--kernel", "("], "not a valid regular expression"),
    (["diff", str(MIXED), str(MIXED), "--kernel", "zzz_none"], "no kernel of either session"),
    (["diff", str(MIXED), str(MIXED), "--fail-if-slower", "-1"], "non-negative"),
])
def test_cli_bad_input_is_one_sentence(args, phrase):
    r = ks(*args)
    assert r.returncode == 2 and phrase in r.stderr and "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    if lines[0].startswith("usage:"):  # an argument's own type refused it: argparse's usage, then its one sentence
        assert lines[-1].startswith("kernelscope diff: error: argument") and phrase in lines[-1]
    else:
        assert len(lines) == 1 and lines[0].startswith("kernelscope: error:")


def test_diff_snapshots(tmp_path):
    a, b = Session.load(RUN1), Session.load(RUN2)
    assert_snapshot("diff_h100_counters_two_recordings.w120.txt", draw(DiffView(diff(a, b), "run1", "run2", 2.0)))
    m = Session.load(MIXED)
    assert_snapshot("diff_mixed_scaled_1.25.w120.txt", draw(DiffView(diff(m, scaled(m, 1.25)), "mixed",
                                                                       "mixed x1.25", 10.0)))


def test_percentages_change_in_points_not_relative_percent():
    """Issue 36: DRAM 16.9% -> 17.0% is +0.1 pp; a relative "+0.8%" (or "+483.8%" from 1% to 5.8%) misleads."""
    from kernelscope.analyze.diff import _metric_change
    from kernelscope.model import Metric

    ch = _metric_change("DRAM %", Metric(1.0, "%", "ncu", "x"), Metric(5.838, "%", "ncu", "x"))
    assert ch.change_pct is None and ch.change_pp == pytest.approx(4.838)
    assert _metric_change("DRAM bytes", Metric(100, "byte", "ncu", "x"), Metric(150, "byte", "ncu", "x")).change_pct \
        == pytest.approx(50.0)
    r = run_cli("diff", str(DATA / "session_h100_analysis.json.gz"), str(DATA / "session_h100_counters.json.gz"),
                "--width", "160", "--no-color")
    rows = [" ".join(line.split()) for line in r.stdout.splitlines()]
    assert any(row.startswith("│ DRAM % 16.9% 17.0% +0.1 pp") for row in rows), rows
    assert not [row for row in rows if " % " in row and row.rstrip(" │").endswith("%") and "pp" not in row
                and row.startswith(("│ SM %", "│ DRAM %", "│ memory %", "│ tensor %"))]
    assert "→ ?" not in r.stdout and "compute → unknown" in " ".join(rows)


def test_a_rank_diff_calls_a_collective_that_varies_more_than_it_takes_unsteady_not_noise():
    """The torchrun recording's broadcast: 23.58 µs on rank 0, 161.39 µs on rank 1 (+584%), spread 396 µs."""
    r = run_cli("diff", str(DATA / "ranks" / "session_h200x2_run_torchrun.json.gz"), "--ranks", "0", "1", "--width",
                "160", "--no-color")
    assert r.returncode == 0, r.stderr
    row = next(" ".join(line.split()) for line in r.stdout.splitlines() if "Broadcast_RING_LL [24 / 544]" in line)
    assert "+584.3%" in row and " unsteady " in row and " noise " not in row, row
    assert "unsteady: within the spread, and spread > max(median A, median B)" in " ".join(r.stdout.split())
