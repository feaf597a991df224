"""The timeline: rows in time order and idle gaps computed from the recorded start
times and durations (H100 sessions), gap classes, the panel, and `show --timeline`."""
from __future__ import annotations

import re

import pytest

from conftest import assert_snapshot, DATA, draw, ROOT, run_cli, shown
from kernelscope.analyze import thresholds as th
from kernelscope.analyze.timeline import BACK_TO_BACK, HOST_WAIT, LAUNCH_GAP, build_timeline, gap_kind
from kernelscope.model import Session
from kernelscope.render.timeline import TimelinePanel

DEMO = ROOT / "src" / "kernelscope" / "data" / "demo_session.json.gz"
RANKS = DATA / "ranks" / "session_h200x2_run_torchrun.json.gz"

SESSIONS = ["session_h100_counters", "session_h100_mixed", "session_h100_samples"]


@pytest.mark.parametrize("name", SESSIONS)
def test_gaps_are_start_minus_the_latest_end_so_far(name):
    s = Session.load(DATA / f"{name}.json.gz")
    tl = build_timeline(s)
    events = sorted([(x.start_ns, x.duration_ns) for x in s.launches]
                    + [(a.start_ns, a.duration_ns) for a in s.activities])
    gpu_rows = [r for r in tl.rows if r.kind != "region"]
    assert [(r.start_ns, r.duration_ns) for r in gpu_rows] == events
    end = None
    idle = 0
    for (start, dur), row in zip(events, gpu_rows):
        expect = None if end is None else max(0, start - end)
        assert row.gap_before_ns == expect
        assert row.gap_kind == gap_kind(expect)
        idle += expect or 0
        end = start + dur if end is None else max(end, start + dur)
    assert tl.span_ns == end - events[0][0]
    assert tl.gpu_busy_ns + idle == tl.span_ns  # one stream: busy and idle tile the span
    counted = {g.kind: g for g in tl.gaps}
    for kind in (LAUNCH_GAP, HOST_WAIT):
        rows = [r.gap_before_ns for r in gpu_rows if r.gap_kind == kind]
        if rows:
            assert (counted[kind].count, counted[kind].total_ns, counted[kind].largest_ns) == \
                (len(rows), sum(rows), max(rows))


def test_rows_are_in_time_order_and_regions_open_before_their_kernels():
    tl = build_timeline(Session.load(DATA / "session_h100_counters.json.gz"))
    starts = [r.start_ns for r in tl.rows]
    assert starts == sorted(starts)
    i = next(i for i, r in enumerate(tl.rows) if r.kind == "region" and r.name == "triton_mm")
    assert tl.rows[i + 1].short_name == "matmul_kernel" and 0 <= tl.rows[i + 1].start_ns - tl.rows[i].start_ns < 1000


def test_gap_classes_follow_the_thresholds():
    assert gap_kind(None) == BACK_TO_BACK
    assert gap_kind(th.BACK_TO_BACK_GAP_NS) == BACK_TO_BACK
    assert gap_kind(th.BACK_TO_BACK_GAP_NS + 1) == LAUNCH_GAP
    assert gap_kind(th.HOST_WAIT_GAP_NS - 1) == LAUNCH_GAP
    assert gap_kind(th.HOST_WAIT_GAP_NS) == HOST_WAIT


def test_back_to_back_kernels_are_not_called_gaps():
    # A recorded run with many kernels queued back to back (the bundled demo no longer records the
    # weight preparation that made such a run before issue #20).
    tl = build_timeline(Session.load(DATA / "session_h100_samples.json.gz"))
    b2b = [r for r in tl.rows if r.kind != "region" and r.gap_before_ns is not None
           and r.gap_before_ns <= th.BACK_TO_BACK_GAP_NS]
    assert len(b2b) > 10 and all(r.gap_kind == BACK_TO_BACK for r in b2b)


def test_per_kernel_notes_come_only_from_launches_the_counter_pass_measured():
    s = Session.load(DATA / "session_h100_counters.json.gz")
    tl = build_timeline(s)
    noted = [r for r in tl.rows if r.notes]
    assert len(noted) == sum(1 for x in s.launches if x.counters)
    mm = next(r for r in noted if r.short_name == "matmul_kernel")
    notes = dict(mm.notes)
    assert notes["SM"].raw_name == "sm__throughput.avg.pct_of_peak_sustained_elapsed"
    assert notes["tensor"].value == pytest.approx(68.80, abs=0.01)


def test_counter_only_session_has_no_timeline_and_says_why():
    tl = build_timeline(Session.load(DATA / "counters_h100_cuda.json.gz"))
    assert tl.rows == () and "no start times" in tl.missing_reason
    assert "N/A: the session has no start times" in draw(TimelinePanel(tl))


def test_timeline_snapshot():
    tl = build_timeline(Session.load(DATA / "session_h100_counters.json.gz"))
    assert_snapshot("timeline_h100_counters.w120.txt", draw(TimelinePanel(tl, limit=40)))


def test_show_timeline_flag():
    env = {"KERNELSCOPE_CACHE_DIR": "/nonexistent-kernelscope-cache"}
    base = ["show", str(DATA / "session_h100_mixed.json.gz"), "--width", "120", "--no-color", "--top", "1"]
    plain = run_cli(*base, env=env)
    assert plain.returncode == 0 and "─ Timeline" not in plain.stdout
    assert "Profiling summary" in plain.stdout
    r = run_cli(*base, "--timeline", "5", env=env)
    assert r.returncode == 0 and "─ Timeline" in r.stdout and "more rows (show --timeline N" in r.stdout
    bad = run_cli(*base, "--timeline", "0", env=env)
    assert bad.returncode == 2 and bad.stderr.startswith("kernelscope: error:") and len(bad.stderr.splitlines()) == 1


def test_multi_rank_timeline_gaps_say_they_sum_over_ranks(tmp_path):
    # two ranks' host waits add up to more than the run's span (1.990 s of a 1.094 s span): the line says why
    flat = " ".join(line.strip("│ ") for line in shown(RANKS, "--timeline", "12", "--whole-run", "--panels", "0",
                                                         "--width", "160").splitlines())
    assert re.search(r"Host waits +681 totalling 1\.990 s, summed over the ranks, largest 505\.637 ms", flat)
    assert "… 1,440 more rows" in flat
    assert "summed over the ranks" not in shown(DEMO, "--timeline", "12", "--panels", "0", "--width", "160")
    out = tmp_path / "r.html"
    assert run_cli("report", str(RANKS), "-o", str(out), "--panels", "0").returncode == 0
    assert "681 totalling 1.990 s, summed over the ranks" in out.read_text()
