"""The program-level verdict: the wall-time breakdown and the program rules, held to whole programs recorded on an
H100 (benchmarks/diagnosis/programs, tests/data/diagnosis/programs) against their fixed twins' measured gains, and to
small hand-built sessions whose every gap is known."""
from __future__ import annotations

import json

import pytest

from conftest import DATA, run_cli
from kernelscope.analyze import breakdown as bd
from kernelscope.analyze.analysis import analyze_session
from kernelscope.analyze.ranks import ranks_report
from kernelscope.analyze.thresholds import HOST_STALL_GAP_NS
from kernelscope.analyze.verdict import session_verdict
from kernelscope.model import Device, HostSync, Launch, Region, Session

PROGRAMS = DATA / "diagnosis" / "programs"
TIMINGS = json.loads((PROGRAMS / "program_timings.json").read_text())["programs"]
# no measurable defect on the H100: its fixed twin was slower (benchmarks/diagnosis/programs/config.py, excluded)
EXCLUDED = {"holdout_sync_cpu_print"}
DEFECTS = sorted(n for n, p in TIMINGS.items() if p.get("expected_rule") and n not in EXCLUDED)
CONTROLS = sorted(n for n, p in TIMINGS.items() if not p.get("expected_rule"))
# estimated gains more than 20 points from the measured one (benchmarks/diagnosis/RESULTS.md says why); the planted
# defect still comes first
GAIN_MISSES = {
    "host_features_thread": "the fix (8 prefetch threads) hides only part of the host work; the rule assumes all of it",
    "holdout_host_tokenize": "the fix (one background thread) hides only part of the host work under the GIL",
    "holdout_sync_nonzero": "the fix also batches the per-image loop, removing launch overhead the sync rule does "
                            "not claim",
}

# planted defects whose finding is not ranked first, and why
RANK_MISSES = {
    "sync_item_train": "under the profiler this loop is host-bound (31 ms a step against 17.5 ms unprofiled): the "
                       "replay finds the GPU already starved when each sync is called, so its fix gives back 0.3% of "
                       "the profiled window; the unprofiled 8.9% needs the profiler's own cost taken out (issue 51)",
}


def _verdict(file: str):
    s = Session.load(PROGRAMS / file)
    return session_verdict(s, analyze_session(s), ranks_report(s))


@pytest.mark.parametrize("name", DEFECTS)
def test_planted_defect_is_the_first_finding_and_its_gain_is_near_the_measured_one(name):
    p = TIMINGS[name]
    v = _verdict(p["sessions"]["defect"])
    assert v.findings, name
    first = v.findings[0]
    if name in RANK_MISSES:
        assert first.rule != p["expected_rule"], f"{name} now ranks its defect first: take it off RANK_MISSES"
        pytest.xfail(RANK_MISSES[name])
    assert first.rule == p["expected_rule"], [(f.rule, round(f.gain_pct, 1)) for f in v.findings[:4]]
    assert first.gain_formula and first.fix and first.evidence
    within = abs(first.gain_pct - p["real_gain_pct"]) <= 20
    if name in GAIN_MISSES:
        assert not within, f"{name} now estimates within 20 points: take it off GAIN_MISSES"
        pytest.xfail(GAIN_MISSES[name])
    assert within, (first.gain_pct, p["real_gain_pct"])


@pytest.mark.parametrize("name", [n for n in DEFECTS if TIMINGS[n]["expected_rule"] == "straggler-rank"])
def test_straggler_run_names_the_straggler_first(name):
    p = TIMINGS[name]
    v = _verdict(p["sessions"]["defect"])
    n = p["nproc"]
    assert v.findings[0].rank == n - 1  # the programs give the last rank the extra work
    assert f"rank {n - 1} is the straggler" in v.findings[0].title
    # NCCL kernels get no launch-configuration findings
    assert not any(f.kernel and "nccl" in f.kernel.lower() for f in v.findings)


@pytest.mark.parametrize("name", CONTROLS)
def test_tuned_controls_get_no_finding_above_20_percent(name):
    v = _verdict(TIMINGS[name]["sessions"]["control"])
    assert all(f.gain_pct <= 20 for f in v.findings), [(f.rule, f.gain_pct) for f in v.findings[:3]]


@pytest.mark.parametrize("name", DEFECTS + CONTROLS)
def test_breakdown_accounts_for_every_nanosecond_of_the_window(name):
    variant = "control" if name in CONTROLS else "defect"
    v = _verdict(TIMINGS[name]["sessions"][variant])
    for r in v.breakdown.ranks:
        assert sum(s.total_ns for s in r.shares) == r.wall_ns
        assert r.steps == 10 or TIMINGS[name]["nproc"] > 1  # --steps 5-14 on one GPU
        assert all(s.total_ns >= 0 for s in r.shares)


def test_show_json_carries_the_verdict():
    p = TIMINGS["sync_check_infer"]
    out = run_cli("show", str(PROGRAMS / p["sessions"]["defect"]), "--json")
    assert out.returncode == 0, out.stderr
    v = json.loads(out.stdout)["verdict"]
    assert v["findings"][0]["rule"] == "sync-in-loop"
    for f in v["findings"]:
        assert set(f) >= {"category", "title", "kernel", "gain_pct", "gain_formula", "evidence", "fix"}
    cats = {c["category"] for c in v["breakdown"]["ranks"][0]["categories"]}
    assert cats == set(bd.CATEGORIES)


# -- hand-built sessions: every gap known ---------------------------------------------------------------------------

def _session(kernels: list[tuple[str, int, int]], syncs=(), steps=()) -> Session:
    s = Session(device=Device(0, "test GPU", (9, 0)))
    s.launches = [Launch(kernel=k, grid=(1, 1, 1), block=(128, 1, 1), start_ns=t, duration_ns=d) for k, t, d in kernels]
    s.host_syncs = [HostSync(n, "stream", a, b - a) for n, a, b in syncs]
    s.regions = [Region(f"ProfilerStep#{i}", a, b - a) for i, (a, b) in enumerate(steps)]
    return s


def test_gaps_are_classed_by_what_the_host_did():
    us = 1_000
    kernels = [("k", 0, 100 * us), ("k", 101 * us, 100 * us),  # back to back: 1 µs
               ("k", 231 * us, 100 * us),  # 30 µs launch gap
               ("k", 431 * us, 100 * us),  # 100 µs after a sync that waited from 300 to 532 µs
               ("k", 3531 * us, 100 * us)]  # 3 ms with no sync: host elsewhere
    s = _session(kernels, syncs=[("cudaStreamSynchronize", 300 * us, 332 * us)])
    b, gaps = bd.breakdown(s)
    (r,) = b.ranks
    assert [g.category for g in gaps[0]] == [bd.AFTER_SYNC, bd.HOST_ELSEWHERE]  # the ones kept one by one
    assert (r.ns(bd.SWITCHING), r.count(bd.SWITCHING), r.ns(bd.LAUNCHING), r.count(bd.LAUNCHING)) == \
        (1 * us, 1, 30 * us, 1)
    assert r.ns(bd.AFTER_SYNC) == 100 * us and r.ns(bd.HOST_ELSEWHERE) == 3_000 * us
    assert r.sync_calls == (("cudaStreamSynchronize", 1),)
    assert 3_000 * us > HOST_STALL_GAP_NS


def test_steady_window_leaves_out_step_0_and_the_tail_and_step_gaps_are_nobody_s():
    us = 1_000
    kernels = [("k", t * us, 50 * us) for t in (0, 1000, 1100, 2000, 2100, 3000)]
    steps = [(0, 900 * us), (900 * us, 1900 * us), (1900 * us, 2900 * us), (2900 * us, 3500 * us)]
    s = _session(kernels, steps=steps)
    b, gaps = bd.breakdown(s)
    (r,) = b.ranks
    assert (r.window_start_ns, r.window_end_ns, r.steps) == (900 * us, 2900 * us, 2)
    assert r.median_step_ns == 1000 * us
    cats = {g.category for g in gaps[0]}
    assert bd.STEP_BOUNDARY in cats  # 2050 -> 2100 µs holds no step start; 1150 -> 2000 µs holds step 2's
    assert r.ns(bd.KERNELS) == 4 * 50 * us


def test_a_sync_in_the_loop_comes_before_launch_overhead_it_makes_unfixable():
    us = 1_000
    kernels, syncs, t = [], [], 0
    for _ in range(20):  # each iteration: 5 tiny kernels 40 µs apart, then a sync and 300 µs of host round trip
        for _ in range(5):
            kernels.append(("tiny", t, 5 * us))
            t += 45 * us
        syncs.append(("cudaStreamSynchronize", t - 60 * us, t + 1 * us))
        t += 300 * us
    s = _session(kernels, syncs=syncs)
    v = session_verdict(s, analyze_session(s))
    rules = [f.rule for f in v.findings]
    assert rules.index("sync-in-loop") < rules.index("launch-bound")
    launch = v.findings[rules.index("launch-bound")]
    assert launch.fix.startswith("first remove the host syncs")


def test_rules_without_their_data_say_so():
    s = _session([("k", 20 * i, 10) for i in range(12)])  # a loop long enough to judge (thresholds.MIN_REPEATS_...)
    s.device = None
    v = session_verdict(s, analyze_session(s))
    assert ("tensor-cores-unused", "the session has no device compute capability") in \
        {(n.rule, n.reason) for n in v.not_evaluated}
    empty = Session()
    v = session_verdict(empty, analyze_session(empty))
    assert {n.rule for n in v.not_evaluated} >= {"sync-in-loop", "launch-bound", "straggler-rank"}
    assert all("no GPU activity" in n.reason for n in v.not_evaluated)


def test_one_verdict_drawn_by_every_renderer():
    """Terminal, HTML report, notebook view and show --json draw the same findings in the same order."""
    import html as html_lib

    import kernelscope
    from kernelscope.analyze.report import build_report
    from kernelscope.render.html import render_html

    path = PROGRAMS / TIMINGS["straggler_allreduce@4"]["sessions"]["defect"]
    loaded = kernelscope.load(path)
    v = loaded.report.verdict
    titles = [f.title for f in v.gains]
    text = run_cli("show", str(path), "--brief", "--width", "160", "--no-color").stdout
    page = html_lib.unescape(render_html(build_report(loaded.session)))
    cell = html_lib.unescape(loaded._repr_html_())
    doc = json.loads(run_cli("show", str(path), "--json").stdout)["verdict"]
    assert [f["title"] for f in doc["findings"]][:len(titles)] == titles
    for shown in (text, page, cell):
        at = [shown.index(t) for t in titles]
        assert at == sorted(at), "findings drawn out of order"
    assert f"{v.findings[0].gain_pct:.1f}%" in text and f"{v.findings[0].gain_pct:.1f}%" in page


def test_communication_alone_on_the_gpu_is_a_finding_of_its_own():
    """The balanced all-reduce program: no straggler to speak of, and its 128 MB all-reduce runs with nothing
    beside it; the gain is what overlap could hide, at most the kernel time."""
    v = _verdict(TIMINGS["straggler_allreduce@2"]["sessions"]["fixed"])
    f = v.findings[0]
    assert f.rule == "exposed-communication" and f.kernel is None
    expected = sum(100 * min(r.ns(bd.COMMUNICATION), r.ns(bd.KERNELS)) / r.wall_ns for r in v.breakdown.ranks) / 2
    assert f.gain_pct == pytest.approx(expected)


def test_nccl_kernels_get_no_kernel_rules():
    s = Session.load(PROGRAMS / TIMINGS["straggler_ddp@2"]["sessions"]["defect"])
    a = analyze_session(s)
    nccl = [k for k in a.kernels if "nccl" in k.kernel.name.lower()]
    assert nccl
    for k in nccl:
        assert k.recommendations.recommendations == ()
        assert all("communication (NCCL) kernel" in n.reason for n in k.recommendations.not_evaluated)
