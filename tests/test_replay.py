"""The replay of a session's window (analyze/replay.py): the dependency graph, the unedited replay against the
measured wall time of every recorded session, and the edits' semantics and direction."""
from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from kernelscope.analyze import replay as rp
from kernelscope.model import Launch, Region, Session
from kernelscope.model.host_sync import HostSync
from kernelscope.model.session_file import SessionFileError

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
PROGRAMS = DATA / "diagnosis" / "programs"
RECORDED = sorted(DATA.rglob("*.json.gz")) + sorted((ROOT / "src" / "kernelscope" / "data").glob("*session*.json.gz"))


def _graph(path: Path) -> rp.ReplayGraph:
    return rp.build_graph(Session.load(path))


@pytest.mark.slow
@pytest.mark.parametrize("path", RECORDED, ids=lambda p: str(p.relative_to(ROOT)))
def test_unedited_replay_reproduces_the_measured_wall_time(path: Path) -> None:
    try:
        session = Session.load(path)
    except SessionFileError:
        pytest.skip("not a session file")
    try:
        graph = rp.build_graph(session)
    except ValueError as e:  # a counter-pass-only session: no start times
        pytest.skip(str(e))
    got = rp.replay(graph)
    for r in got.ranks:
        assert abs(r.error_pct) <= 2.0, (r.rank, r.measured_wall_ns, r.replayed_wall_ns)
        # the critical path covers the window: its edges add up to the replayed wall time
        assert sum(ns for _, ns in r.bound_by) == r.replayed_wall_ns


def test_graph_reads_releases_syncs_steps_and_graph_launches() -> None:
    g = _graph(PROGRAMS / "sync_check_infer_defect.json.gz")
    host = g.host(0)
    kinds = {x.kind for x in host}
    assert {rp.LAUNCH, rp.SYNC, rp.STEP_START, rp.STEP_END} <= kinds
    assert {x.release for x in g.ops} == {rp.HOST_FED, rp.QUEUED}
    syncs = [x for x in host if x.kind == rp.SYNC]
    assert any(x.waits_for for x in syncs) and all(x.cost_ns >= 0 for x in syncs)
    for x in syncs:  # what a sync waits for ended by the time it returned
        assert all(g.ops[w].end_ns <= x.end_ns for w in x.waits_for)
    assert g.windows[0].start_node is not None and g.windows[0].end_node is not None
    assert any(what == "launch calls" for what, _ in g.not_modelled)
    graphed = _graph(PROGRAMS / "control_graphed_decode_control.json.gz")
    heads = [x for x in graphed.ops if x.release != rp.GRAPH]
    assert len(heads) == 10 and sum(x.release == rp.GRAPH for x in graphed.ops) == 7520  # 10 replays of 753 kernels
    assert all(graphed.ops[k].launch_node == graphed.ops[graphed.ops[k].prev].launch_node
               for k, x in enumerate(graphed.ops) if x.release == rp.GRAPH)


def test_collectives_are_joined_across_ranks() -> None:
    g = _graph(DATA / "ranks" / "session_h200x2_run_torchrun.json.gz")
    assert g.collectives and all(len({g.ops[k].rank for k in c.ops}) == 2 for c in g.collectives)
    assert all(t >= 0 for c in g.collectives for t in c.tail_ns)
    r1 = rp.replay(g).ranks[1]  # rank 1's window ends waiting for rank 0 (its planted delay)
    assert any(kind.startswith(rp.WAITING) for kind, _ in r1.bound_by)


def test_recorded_graph_kernel_gap_is_the_graphed_controls() -> None:
    assert rp.graph_kernel_gap_ns(_graph(PROGRAMS / "control_graphed_decode_control.json.gz")) == \
        rp.RECORDED_GRAPH_KERNEL_GAP_NS


@pytest.mark.slow
def test_recorded_switch_gap_is_the_program_suites() -> None:
    gaps = []
    for path in sorted(PROGRAMS.glob("*.json.gz")):
        g = _graph(path)
        gaps += [x.switch_ns for x in g.ops if x.release == rp.QUEUED and x.kind == rp.KERNEL
                 and g.ops[x.prev].kind == rp.KERNEL and x.switch_ns <= rp.BACK_TO_BACK_GAP_NS]
    assert len(gaps) == 29_389 and statistics.median(gaps) == rp.RECORDED_SWITCH_NS


def _toy() -> Session:
    """One step: K1 (host-fed), a device sync that waits for it, K2 launched 25 µs after, a last sync that does
    not wait, all on one stream (times in ns)."""
    s = Session()
    s.launches = [Launch("k1", (1, 1, 1), (1, 1, 1), 10_000, 100_000, stream=7),
                  Launch("k2", (1, 1, 1), (1, 1, 1), 140_000, 50_000, stream=7)]
    s.host_syncs = [HostSync("cudaDeviceSynchronize", "device", 20_000, 95_000),
                    HostSync("cudaDeviceSynchronize", "device", 195_000, 5_000)]
    s.regions = [Region("ProfilerStep#1", 0, 205_000), Region("ProfilerStep#2", 210_000, 10_000)]
    return s


def test_replay_semantics_on_a_hand_built_session() -> None:
    g = rp.build_graph(_toy())
    base = rp.replay(g)
    assert base.wall_ns == base.measured_wall_ns == 205_000
    assert g.windows[0].switch_ns == rp.RECORDED_SWITCH_NS  # no queued op: the recorded switch gap
    first_sync = next(x for x in g.host(0) if x.kind == rp.SYNC)
    assert first_sync.cost_ns == 5_000 and first_sync.waits_for == (0,)
    # The first sync removed (the last of the step kept): the host launches K2 at 20 + 25 µs, the GPU runs it
    # after K1 and the switch gap; the last sync waits for it, returns 5 µs later, the step ends 5 µs after.
    fixed = rp.replay(g, (rp.RemoveSyncs(),))
    assert fixed.wall_ns == 110_000 + rp.RECORDED_SWITCH_NS + 50_000 + 5_000 + 5_000
    assert fixed.edits == ("1 synchronize call(s) in the window removed, the last of each step kept (1)",)
    assert dict(fixed.bound_by)[rp.GPU_KINDS[rp.KERNEL]] == 150_000
    # K1 made 4x faster: the first sync returns early, everything after moves up with it
    faster = rp.replay(g, (rp.SetKernelDuration("^k1$", duration_ns=25_000),))
    assert faster.wall_ns == 205_000 - 75_000


def test_a_window_of_steps_waits_for_the_gpu_work_that_ended_in_it() -> None:
    s = _toy()
    s.host_syncs = []  # as a merged multi-rank session: no synchronize recorded
    g = rp.build_graph(s)
    assert rp.replay(g).wall_ns == 205_000
    # no host time between the launches: the host reaches the step's end at 75 µs, but K2, launched with K1, runs
    # after it (the recorded graph gap, as the session has no graph of its own) and ends later
    fixed = rp.replay(g, (rp.ShrinkLaunchOverhead(),))
    assert fixed.wall_ns == 110_000 + rp.RECORDED_GRAPH_KERNEL_GAP_NS + 50_000
    assert dict(fixed.bound_by)[rp.GPU_KINDS[rp.KERNEL]] == 150_000


def test_launch_overhead_cut_takes_the_range_edges_between_launches() -> None:
    s = Session()
    s.launches = [Launch(f"k{i}", (1, 1, 1), (1, 1, 1), 10_000 + 50_000 * i, 10_000, stream=7) for i in range(3)]
    s.regions = [Region(f"layer{i}", 5_000 + 50_000 * i, 10_000) for i in range(3)] + \
        [Region("ProfilerStep#1", 0, 130_000), Region("ProfilerStep#2", 140_000, 10_000)]
    g = rp.build_graph(s)
    assert [x.kind for x in g.host(0)][:5] == [rp.STEP_START, rp.SPAN_START, rp.LAUNCH, rp.SPAN_END, rp.SPAN_START]
    assert rp.replay(g).wall_ns == 130_000
    # every launch right after K1's: each kernel follows the previous by the recorded graph gap
    fixed = rp.replay(g, (rp.ShrinkLaunchOverhead(),))
    assert fixed.wall_ns == 10_000 + 3 * 10_000 + 2 * rp.RECORDED_GRAPH_KERNEL_GAP_NS
    assert fixed.edits[0].startswith("host time between launches cut to 0.00 µs per launch at 2 launches (0.100 ms")


EDITS = (rp.RemoveSyncs(), rp.ShrinkLaunchOverhead(), rp.RemoveHostWork(),
         rp.SetKernelDuration(".", scale=0.5, source="test"))


@pytest.mark.parametrize("name", ["sync_check_infer_defect", "host_augment_numpy_defect", "tc_mlp_train_defect",
                                  "pageable_h2d_train_defect"])
def test_edits_never_lengthen_the_window_and_combine(name: str) -> None:
    g = _graph(PROGRAMS / f"{name}.json.gz")
    base = rp.replay(g).wall_ns
    alone = {}
    for e in EDITS:
        got = rp.replay(g, (e,))
        assert got.wall_ns <= base, e
        assert len(got.edits) == 1
        alone[e] = got.wall_ns
    both = rp.replay(g, EDITS).wall_ns
    assert both <= min(alone.values())
    assert rp.replay(g, (rp.SetKernelDuration(".", scale=2.0),)).wall_ns >= base
    assert rp.replay(g, (rp.SetKernelDuration(".", scale=1.0),)).wall_ns == base


@pytest.mark.slow
@pytest.mark.parametrize("path", sorted(PROGRAMS.glob("*.json.gz")), ids=lambda p: p.name)
def test_no_fix_lengthens_any_recorded_program(path: Path) -> None:
    g = _graph(path)
    base = rp.replay(g).wall_ns
    walls = [rp.replay(g, (e,)).wall_ns for e in EDITS]
    assert all(w <= base for w in walls)
    assert rp.replay(g, EDITS).wall_ns <= min(walls)


def test_sync_removal_gains_where_syncs_stall_the_gpu() -> None:
    g = _graph(PROGRAMS / "sync_check_infer_defect.json.gz")
    gain = rp.replayed_gain(g, (rp.RemoveSyncs(),))
    assert gain.gain_pct > 5
    before, after = dict(gain.baseline.bound_by), dict(gain.fixed.bound_by)
    assert after.get(rp.SYNC_RETURN, 0) < before[rp.SYNC_RETURN]


def test_launch_overhead_shrink_gains_on_an_eager_decode_loop() -> None:
    g = _graph(PROGRAMS / "launch_decode_loop_defect.json.gz")
    gain = rp.replayed_gain(g, (rp.ShrinkLaunchOverhead(),))
    assert gain.gain_pct > 50
    assert gain.baseline.bound_by[0][0] == rp.HOST_LAUNCHING
    assert gain.fixed.bound_by[0][0] == rp.GPU_KINDS[rp.KERNEL]
    assert "recorded on an NVIDIA H100" in gain.fixed.edits[0]  # the session has no graph of its own


def test_set_kernel_duration_takes_one_figure() -> None:
    g = rp.build_graph(_toy())
    with pytest.raises(ValueError):
        rp.replay(g, (rp.SetKernelDuration("k1"),))


def test_the_suite_replays_each_rule_with_the_edit_its_finding_uses() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "replay_gains", ROOT / "benchmarks" / "diagnosis" / "programs" / "replay_gains.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    s = Session.load(PROGRAMS / "tc_mlp_train_defect.json.gz")
    (tc,) = mod.fix_edits("tensor-cores-unused", s)
    assert tc.scale == pytest.approx(1 / 7.4) and "sm_90" in tc.source  # the rule's datasheet ratio, said so
    assert [type(e) for e in mod.fix_edits("sync-in-loop", s)] == [rp.RemoveSyncs]
    assert mod.fix_edits("pageable-copies", s) is None  # no edit models an asynchronous copy yet


def _program_findings(name: str) -> dict:
    from kernelscope.analyze import breakdown as bd
    from kernelscope.analyze import program_rules as pr

    s = Session.load(PROGRAMS / f"{name}.json.gz")
    b, gaps = bd.breakdown(s)
    found, _ = pr.run_program_rules(pr.ProgramContext(s, b, gaps, None, (9, 0)))
    return {f.rule: f for f in found}


def test_sync_and_launch_findings_gain_the_replay_of_their_fix(monkeypatch: pytest.MonkeyPatch) -> None:
    from kernelscope.analyze import program_rules as pr

    got = _program_findings("holdout_sync_nonzero_defect")
    g = rp.build_graph(Session.load(PROGRAMS / "holdout_sync_nonzero_defect.json.gz"))
    for rule, edits in (("sync-in-loop", (rp.RemoveSyncs(),)), ("launch-bound", (rp.ShrinkLaunchOverhead(),))):
        f = got[rule]
        assert f.gain_pct == rp.replayed_gain(g, edits).gain_pct
        ev = dict(f.evidence)
        assert ev["replayed fix"] == rp.replay(g, edits).edits[0]
        assert "launch calls" in ev["not in the replay graph"]
        assert f.gain_formula.startswith(rp.GAIN_FORMULA)
    assert dict(got["sync-in-loop"].evidence)["share-of-idle estimate before the replay, % of wall"] == 18.6
    monkeypatch.setattr(pr, "REPLAY_MAX_OPS", 1_000)  # over the budget: the share-of-idle estimate stands
    over = _program_findings("holdout_sync_nonzero_defect")["sync-in-loop"]
    assert round(over.gain_pct, 1) == 18.6 and "not replayed: 11,600 GPU ops" in dict(over.evidence)["replayed fix"]
