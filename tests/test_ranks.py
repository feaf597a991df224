"""Multi-GPU sessions on traces and sessions recorded on 2x H200 (tests/data/ranks, see its README):
import of per-rank Kineto traces, collectives matched across ranks, waits and stragglers, bus bandwidth,
bad input, merge of two hosts with a clock shifted on purpose, 4 ranks built from the recorded 2."""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DATA, HANG_S, ROOT, run_cli, shown
from kernelscope.analyze.collectives import analyze_collectives, busbw_factor, operation
from kernelscope.analyze.ranks import ranks_report
from kernelscope.model import Session

RANKS = DATA / "ranks"
JOB = [RANKS / "job2_rank0.pt.trace.json.gz", RANKS / "job2_rank1.pt.trace.json.gz"]
NODES = [RANKS / "node0_rank0.pt.trace.json.gz", RANKS / "node1_rank1.pt.trace.json.gz"]
RUN = RANKS / "session_h200x2_run_torchrun.json.gz"
STRAGGLER_N4 = DATA / "diagnosis" / "programs" / "straggler_allreduce_n4_fixed.json.gz"  # a rank last at one collective


def load_trace(p: Path) -> dict:
    return json.loads(gzip.decompress(p.read_bytes()))


def write_trace(doc: dict, p: Path) -> Path:
    p.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return p


def planted_waits(session: Session, doc: dict, after_step: int = 0) -> list[tuple[int, int]]:
    """(rank 0's wait, planted delay) for each step where rank 1 arrived last at the all-reduce after its spin
    kernel (torch.cuda._sleep in the region "planted_delay", measured in rank 1's trace; the workload's head start
    is a spin of every rank, not a delay), from the recorded step AFTER_STEP on."""
    spins = sorted((x.start_ns + x.duration_ns, x.duration_ns) for x in session.launches
                   if x.rank == 1 and x.start_ns is not None and "spin_kernel" in x.kernel
                   and "planted_delay" in x.regions)[after_step:]
    allreduces = [c for c in doc["collectives"] if c["name"] == "allreduce"]
    pairs = []
    for end, delay in spins:
        c = next((c for c in allreduces if c["ranks"]["1"]["start_ns"] >= end), None)
        if c is not None and c["straggler_rank"] == 1:
            pairs.append((c["ranks"]["0"]["wait_ns"], delay))
    return pairs


@pytest.fixture(scope="module")
def job(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("job") / "job.json"
    assert run_cli("import", *map(str, JOB), "-o", str(out)).returncode == 0
    return out


def test_import_joins_the_ranks_with_their_collectives(job: Path) -> None:
    s = Session.load(job)
    assert [r.rank for r in s.ranks] == [0, 1]
    assert {r.world_size for r in s.ranks} == {2} and {r.nccl_version for r in s.ranks} == {"2.28.9"}
    assert [r.device_index for r in s.ranks] == [0, 1]
    assert {x.rank for x in s.launches} == {0, 1}
    nccl = [x for x in s.launches if x.collective is not None]
    assert nccl and all(x.kernel.startswith("ncclDevKernel") for x in nccl)
    a = analyze_collectives(s)
    assert [(r.process_group, r.name) for r in a.rows] == [("0", "allreduce")] * 6 + [("1", "_allgather_base")] * 3
    assert not a.problems
    for row in a.rows:  # wait = last arrival - this arrival; the straggler waits for nobody
        last = max(t.start_ns for t in row.ranks)
        assert [t.wait_ns for t in row.ranks] == [last - t.start_ns for t in row.ranks]
        assert next(t for t in row.ranks if t.rank == row.straggler_rank).wait_ns == 0


def test_the_planted_straggler_is_named_and_rank_0_waits_for_it(job: Path) -> None:
    s = Session.load(job)
    code, out, _ = run_cli("show", str(job), "--json")
    doc = json.loads(out)
    assert code == 0 and doc["ranks_summary"]["straggler_rank"] == 1
    pairs = planted_waits(s, doc)
    assert len(pairs) == 3  # the three profiled steps
    for wait, delay in pairs:  # steps closed by a synchronize: rank 0 starts a step up to ~0.4 ms after rank 1
        assert 0.8 * delay <= wait <= 1.05 * delay
    code, text, _ = run_cli("show", str(job), "--width", "140", "--panels", "0")
    assert "straggler of the run: rank 1" in text and "GPU0 waits for GPU1" in text
    assert "Ranks (2)" in text and "Collectives (9)" in text


def test_recorded_run_under_torchrun_waits_within_10_percent_of_the_delay() -> None:
    """The session `kernelscope run -- torchrun --nproc-per-node 2` wrote on 2x H200 (no synchronize per step)."""
    s = Session.load(RUN)
    assert [r.rank for r in s.ranks] == [0, 1] and [r.local_rank for r in s.ranks] == [0, 1]
    assert all(r.host and r.pid for r in s.ranks)
    code, out, _ = run_cli("show", str(RUN), "--json")
    doc = json.loads(out)
    pairs = planted_waits(s, doc)
    assert len(pairs) >= 4
    for wait, delay in pairs:
        assert abs(wait - delay) <= 0.1 * delay


def test_the_runs_straggler_leaves_out_warm_up_collectives() -> None:
    """In the recorded run rank 0 is late once by 43.6 ms at the first all-reduce (its first step's start-up):
    counted, it would be the run's straggler (46.8 ms caused vs 11.9 ms); the planted rank 1 is named instead."""
    s = Session.load(RUN)
    a = analyze_collectives(s)
    first_allreduce = next(r for r in a.rows if r.name == "allreduce")
    assert first_allreduce.straggler_rank == 0 and first_allreduce.spread_ns > 40e6  # still shown as it was
    by_rank = {x.rank: x for x in a.stragglers}
    assert a.run_straggler is not None and a.run_straggler.rank == 1
    assert by_rank[0].warmup_wait_ns >= first_allreduce.spread_ns  # counted apart, not lost
    assert by_rank[0].caused_wait_ns + by_rank[0].warmup_wait_ns > by_rank[1].caused_wait_ns  # the old rule's pick
    code, out, _ = run_cli("show", str(RUN), "--json")
    summary = json.loads(out)["ranks_summary"]
    assert summary["straggler_rank"] == 1 and "warm-up" in summary["straggler_rule"]
    code, text, _ = run_cli("show", str(RUN), "--width", "140", "--panels", "0")
    assert "straggler of the run: rank 1" in text and "warm-up: rank 0" in text


def test_show_json_lists_ranks_and_collectives_as_specified(job: Path) -> None:
    doc = json.loads(run_cli("show", str(job), "--json")[1])
    assert isinstance(doc["ranks"], list) and [r["rank"] for r in doc["ranks"]] == [0, 1]
    for c in doc["collectives"]:
        assert {"name", "process_group", "bytes", "straggler_rank", "ranks"} <= set(c)
        assert set(c["ranks"]) == {"0", "1"}
        for t in c["ranks"].values():
            assert set(t) == {"start_ns", "end_ns", "wait_ns"} and t["end_ns"] > t["start_ns"]
    by_group: dict[str, list[int]] = {}
    for c in doc["collectives"]:
        by_group.setdefault(c["process_group"], []).append(min(t["start_ns"] for t in c["ranks"].values()))
    assert all(v == sorted(v) for v in by_group.values())  # time order per process group


def test_bytes_and_bus_bandwidth_follow_nccl_tests(job: Path) -> None:
    a = analyze_collectives(Session.load(job))
    ar, ag = a.rows[0], a.rows[-1]
    assert ar.bytes == 2099200 * 4  # In/Out msg nelems x float32
    assert ag.bytes == 512 * 4  # all-gather: the whole gathered buffer (Out msg nelems)
    assert ar.algbw_gb_s == pytest.approx(ar.bytes / ar.transfer_ns)
    assert ar.busbw_gb_s == pytest.approx(ar.algbw_gb_s * 2 * (2 - 1) / 2)
    assert ag.busbw_gb_s == pytest.approx(ag.algbw_gb_s * (2 - 1) / 2)
    assert busbw_factor("allreduce", 8) == pytest.approx(1.75) and busbw_factor("broadcast", 8) == 1.0
    assert operation("_allgather_base") == "allgather" and operation("reduce_scatter_tensor") == "reducescatter"


def test_per_rank_time_adds_up(job: Path) -> None:
    r = ranks_report(Session.load(job))
    for t in r.summary.ranks:
        assert t.compute_ns + t.communication_ns - t.overlap_ns + t.idle_ns == t.span_ns
    computes = [t.compute_ns for t in r.summary.ranks]
    mean = sum(computes) / 2
    assert r.summary.compute_imbalance_pct == pytest.approx((max(computes) - mean) / mean * 100)
    assert r.summary.ranks[0].wait_ns == sum(t.wait_ns for row in r.collectives.rows for t in row.ranks if t.rank == 0)


def test_a_truncated_rank_trace_keeps_its_events_before_the_cut_and_names_the_cut(tmp_path: Path) -> None:
    cut = tmp_path / "rank1.json"
    cut.write_bytes(gzip.decompress(JOB[1].read_bytes())[:50_000])
    out = tmp_path / "s.json"
    code, _, err = run_cli("import", str(JOB[0]), str(cut), "-o", str(out))
    assert code == 0
    notes = [line for line in err.splitlines() if line.startswith(f"kernelscope: note: {cut}")]
    assert len(notes) == 1 and "the trace is damaged at character" in notes[0] and "were read" in notes[0]
    s = Session.load(out)
    assert [r.rank for r in s.ranks] == [0, 1]  # the streaming reader keeps what came before the damage
    assert s.collectors["trace"].status == "partial" and "rank 1: the trace is damaged" in s.collectors["trace"].reason
    text = run_cli("show", str(out), "--json")[1]
    assert json.loads(text)


def test_traces_of_two_jobs_and_other_world_sizes_get_one_sentence_each(tmp_path: Path) -> None:
    other = load_trace(JOB[1])
    other["distributedInfo"]["world_size"] = 4
    odd = write_trace(other, tmp_path / "w4.json.gz")
    out = tmp_path / "s.json"
    code, _, err = run_cli("import", str(JOB[0]), str(NODES[0]), str(JOB[1]), str(odd), "-o", str(out))
    assert code == 0
    notes = [line for line in err.splitlines() if line.startswith("kernelscope: note:")]
    assert any("rank 0 appears twice" in n and "two different jobs" in n for n in notes)
    assert any("different world sizes" in n and "world size 4" in n for n in notes)
    assert [r.rank for r in Session.load(out).ranks] == [0, 1]


def test_nothing_readable_is_one_sentence_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"traceEvents": [')
    code, _, err = run_cli("import", str(bad), "-o", str(tmp_path / "s.json"))
    assert code == 2 and err.count("\n") == 1 and "truncated or not JSON" in err
    code, _, err = run_cli("import", str(tmp_path / "missing_dir"), "-o", str(tmp_path / "s.json"))
    assert code == 2 and "no such" in err and err.count("\n") == 1


def test_a_directory_of_traces_imports_like_the_files(tmp_path: Path) -> None:
    d = tmp_path / "traces"
    d.mkdir()
    for p in JOB:
        shutil.copy(p, d / p.name)
    out = tmp_path / "s.json"
    assert run_cli("import", str(d), "-o", str(out))[0] == 0
    assert len(analyze_collectives(Session.load(out)).rows) == 9


def test_merge_aligns_a_shifted_clock_on_collective_ends(tmp_path: Path) -> None:
    shift_us = 5_000_000.0  # 5 s on purpose
    doc = load_trace(NODES[1])
    for e in doc["traceEvents"]:
        if isinstance(e.get("ts"), (int, float)):
            e["ts"] += shift_us
    shifted = write_trace(doc, tmp_path / "node1_shifted.json.gz")
    a, b, both, merged = (tmp_path / n for n in ("a.json", "b.json", "both.json", "m.json"))
    assert run_cli("import", str(NODES[0]), "-o", str(a))[0] == 0
    assert run_cli("import", str(shifted), "-o", str(b))[0] == 0
    assert run_cli("import", *map(str, NODES), "-o", str(both))[0] == 0
    code, _, err = run_cli("merge", str(a), str(b), "-o", str(merged))
    assert code == 0 and "alignment error" in err
    m = Session.load(merged)
    r1 = next(r for r in m.ranks if r.rank == 1)
    assert abs(r1.clock_offset_ns + shift_us * 1000) < 10_000  # the 5 s found again, within 10 µs
    assert r1.alignment_error_ns is not None and r1.alignment_error_ns < 10_000
    aligned = {(row.process_group, row.index): row for row in analyze_collectives(m).rows}
    truth = {(row.process_group, row.index): row for row in analyze_collectives(Session.load(both)).rows}
    assert aligned.keys() == truth.keys()
    for k, row in truth.items():  # waits as on the shared clock, within the alignment error
        for t, u in zip(row.ranks, aligned[k].ranks):
            assert abs(t.wait_ns - u.wait_ns) <= r1.alignment_error_ns + 1_000
    text = run_cli("show", str(merged), "--width", "140", "--panels", "0")[1]
    assert "clocks aligned on collective ends" in text


def test_four_ranks_built_from_the_recorded_two(tmp_path: Path) -> None:
    """Ranks 2 and 3 are copies of 0 and 1 (world size 4); rank 3's clock is moved 1 ms later, so it is the
    last to arrive everywhere and every other rank waits for it."""
    files = []
    for r in range(4):
        doc = load_trace(JOB[r % 2])
        doc["distributedInfo"].update(rank=r, world_size=4)
        for e in doc["traceEvents"]:
            args = e.get("args") or {}
            if "Group size" in args:
                args["Group size"] = 4
            if r == 3 and isinstance(e.get("ts"), (int, float)) and e.get("cat") == "kernel":
                e["ts"] += 1000.0
        files.append(write_trace(doc, tmp_path / f"r{r}.json.gz"))
    out = tmp_path / "s.json"
    assert run_cli("import", *map(str, files), "-o", str(out))[0] == 0
    s = Session.load(out)
    a = analyze_collectives(s)
    assert [r.rank for r in s.ranks] == [0, 1, 2, 3] and all(len(row.ranks) == 4 for row in a.rows)
    assert all(row.straggler_rank == 3 for row in a.rows)
    assert a.run_straggler is not None and a.run_straggler.rank == 3
    assert a.rows[0].busbw_gb_s == pytest.approx(a.rows[0].algbw_gb_s * 2 * 3 / 4)
    doc = json.loads(run_cli("show", str(out), "--json")[1])
    assert set(doc["collectives"][0]["ranks"]) == {"0", "1", "2", "3"}


def test_chrome_export_puts_each_rank_in_its_own_process(job: Path, tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    assert run_cli("export", str(job), "-o", str(out))[0] == 0
    trace = json.loads(out.read_text())
    names = [e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"]
    assert "rank 0 · GPU 0: NVIDIA H200" in names and "rank 1 · GPU 1: NVIDIA H200" in names
    pids = {e["pid"] for e in trace["traceEvents"] if e.get("cat") == "kernel"}
    assert len(pids) == 2
    waits = [e for e in trace["traceEvents"] if e.get("cat") == "collective-wait"]
    assert waits and all(e["name"].startswith("barrier: ") for e in waits)


def test_one_process_session_is_one_rank_and_no_collectives() -> None:
    doc = json.loads(run_cli("show", str(ROOT / "tests" / "data" / "session_h100_mixed.json.gz"), "--json")[1])
    assert [r["rank"] for r in doc["ranks"]] == [0] and doc["collectives"] == []


@pytest.mark.skipif(shutil.which("torchrun", path=os.path.dirname(sys.executable)) is None,
                    reason="needs torch's torchrun")
@pytest.mark.slow
def test_run_under_torchrun_records_every_rank_on_the_cpu(tmp_path: Path) -> None:
    """gloo on the CPU: no kernels, but every rank's process is found and joined."""
    out = tmp_path / "s.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    r = subprocess.run([sys.executable, "-m", "kernelscope", "run", "-o", str(out), "--",
                        shutil.which("torchrun", path=os.path.dirname(sys.executable)), "--nproc-per-node", "2",
                        "--master-port", "29561", str(ROOT / "tests" / "workloads" / "gloo_ranks.py")],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=HANG_S)
    assert r.returncode == 0, r.stderr[-1500:]
    s = Session.load(out)
    assert [(x.rank, x.local_rank, x.world_size) for x in s.ranks] == [(0, 0, 2), (1, 1, 2)]
    assert s.collectors["ranks"].status == "ok"


def test_diff_compares_two_ranks_of_one_session_like_two_sessions() -> None:
    s = Session.load(RUN)
    code, out, _ = run_cli("diff", str(RUN), "--ranks", "0", "1", "--json")
    d = json.loads(out)
    assert code == 0 and d["a"].endswith("rank 0") and d["b"].endswith("rank 1")
    spin = next(k for k in d["kernels"] if k["short_name"] == "spin_kernel")  # the planted delay runs on rank 1 only
    assert spin["verdict"] == "only in B"
    total = {r: sum(x.duration_ns for x in s.launches if x.rank == r) for r in (0, 1)}
    assert (d["total_a_ns"], d["total_b_ns"]) == (total[0], total[1])  # each side is that rank's kernels, no more
    code, back, _ = run_cli("diff", str(RUN), "--ranks", "1", "0", "--json")
    assert json.loads(back)["total_a_ns"] == total[1]
    code, text, _ = run_cli("diff", str(RUN), "--ranks", "0", "1", "--width", "140")
    assert code == 0 and "rank 0" in text and "spin_kernel" in text and "only in B" in text


def test_diff_of_ranks_refuses_a_rank_that_is_not_there() -> None:
    code, _, err = run_cli("diff", str(RUN), "--ranks", "0", "2")
    assert code == 2 and "has no rank 2 (its ranks: 0, 1)" in err and "Traceback" not in err
    code, _, err = run_cli("diff", str(RUN))
    assert code == 2 and "--ranks" in err


def test_the_timeline_marks_collective_waits_on_the_waiting_rank() -> None:
    """"barrier: allreduce 3.03 ms GPU0 waits for GPU1" on rank 0's NCCL kernel, from the collectives' waits."""
    from kernelscope.analyze.timeline import build_timeline

    s = Session.load(RUN)
    tl = build_timeline(s)
    a = analyze_collectives(s)
    waited = sorted((t.rank, t.start_ns, t.wait_ns) for row in a.rows for t in row.ranks
                    if t.rank != row.straggler_rank and t.wait_ns >= 1_000)
    marked = [r for r in tl.rows if r.barrier is not None]
    assert sorted((r.rank, r.start_ns, r.barrier.wait_ns) for r in marked) == waited
    assert all(r.barrier.rank == r.rank and "nccl" in r.name.lower() for r in marked)
    planted = [b for b in tl.barriers if b.rank == 0 and b.straggler_rank == 1 and b.collective == "allreduce"]
    assert len(planted) >= 4 and all(2.7e6 <= b.wait_ns <= 3.1e6 for b in planted if b.wait_ns > 1e6)
    assert {r.rank for r in tl.rows} == {0, 1}
    one = build_timeline(Session.load(ROOT / "tests" / "data" / "session_h100_mixed.json.gz"))
    assert not one.barriers and all(r.rank is None for r in one.rows)  # a one-GPU session is as it was
    code, text, _ = run_cli("show", str(RUN), "--width", "200", "--panels", "0", "--timeline", "5000")
    timeline = text[text.index("Timeline"):text.index("Collectives (")]
    assert code == 0 and "barrier: allreduce 3.035 ms GPU0 waits for GPU1" in timeline
    code, out, _ = run_cli("show", str(RUN), "--json", "--timeline", "5000")
    doc = json.loads(out)["timeline"]
    assert len(doc["barriers"]) == len(waited) and {r["rank"] for r in doc["rows"]} == {0, 1}


def _file_doc(s: Session, p: Path) -> dict:
    s.save(p)
    d = json.loads(p.read_text())
    d.pop("created_utc", None)
    return d


@pytest.mark.parametrize("files", [JOB, NODES, [JOB[0]], [*JOB, NODES[0]]], ids=["job", "nodes", "one", "twice"])
def test_the_columnwise_join_is_the_join_of_launch_objects(tmp_path: Path, files) -> None:
    """import joins the ranks' launch tables column-wise; the session (its file) and `show --json` are those of
    the join of Launch objects, shifted clocks, collectives and a rank left out included."""
    from kernelscope.collect.ranks import join_ranks
    from kernelscope.collect.trace.kineto_import import import_traces, part_from_stream
    from kernelscope.collect.trace.kineto_stream import read_trace

    docs = [load_trace(f) for f in files]
    for k, doc in enumerate(docs):  # different time origins and a kernel without args (a malformed one)
        doc["baseTimeNanoseconds"] = 10**18 + 7_000 * k
    paths = [write_trace(doc, tmp_path / f"r{k}.pt.trace.json.gz") for k, doc in enumerate(docs)]
    imported = import_traces(paths)
    columns = imported.joined.session
    assert columns.__dict__.get("_launches_table") is not None  # no Launch object per kernel was built
    parts = [part_from_stream(read_trace(p), p) for p in paths]
    objects = join_ranks(parts, command=columns.command).session
    assert objects.__dict__.get("_launches_table") is None  # the per-object join: a list of launches
    assert len(columns.ranks) == len({d["distributedInfo"]["rank"] for d in docs})
    assert _file_doc(columns, tmp_path / "c.json") == _file_doc(objects, tmp_path / "o.json")
    shown = [run_cli("show", str(tmp_path / name), "--json") for name in ("c.json", "o.json")]
    # the two files were written a moment apart: their creation times may differ by a second
    docs_shown = [json.loads(out) for _, out, _ in shown]
    for d in docs_shown:
        d["session"].pop("created_utc", None)
    assert shown[0][0] == 0 and docs_shown[0] == docs_shown[1]


def test_the_ranks_timeline_reads_columns_and_equals_the_rows_of_launch_objects(job: Path) -> None:
    from kernelscope.analyze.timeline import build_timeline

    s = Session.load(job)
    timeline = build_timeline(s)
    assert s.__dict__.get("_launches_table") is not None  # still columns: no Launch list was made
    kernels = sorted((r.start_ns, r.duration_ns, r.name, r.regions, r.rank)
                     for r in timeline.rows if r.kind == "kernel")
    assert kernels == sorted((x.start_ns, x.duration_ns, x.kernel, tuple(x.regions), x.rank) for x in s.launches
                             if x.start_ns is not None)
    assert any(r.barrier is not None for r in timeline.rows) and {r.rank for r in timeline.rows} == {0, 1}


def test_import_of_a_rank_not_below_its_world_size_is_one_sentence(tmp_path: Path) -> None:
    d = load_trace(JOB[0])
    d["distributedInfo"].update(rank=5, world_size=2)
    trace = tmp_path / "rank5of2.json"
    trace.write_text(json.dumps(d))
    code, _, err = run_cli("import", str(trace), "-o", str(tmp_path / "s.json"))
    assert code == 2 and err == (f"kernelscope: error: no rank can be joined: {trace} says rank 5, which is not "
                                 "below its world size 2.\n")
    assert not (tmp_path / "s.json").exists()


def test_merge_of_sessions_whose_every_rank_is_not_below_its_world_size_is_one_sentence(tmp_path: Path) -> None:
    d = json.loads(gzip.decompress(RUN.read_bytes()))
    for r in d["ranks"]:
        r["rank"] += 5
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(d))
    b.write_text(json.dumps(d))
    code, _, err = run_cli("merge", str(a), str(b), "-o", str(tmp_path / "m.json"))
    last = err.strip().splitlines()[-1]
    assert code == 2 and last.startswith("kernelscope: error: no rank can be joined: ")
    assert last.endswith("says rank 5, which is not below its world size 2 (and 3 more parts left out).")
    assert "internal error" not in err and not (tmp_path / "m.json").exists()


def test_waits_and_clock_offsets_in_a_unit_that_shows_them(tmp_path):
    """The two recorded nodes' traces, merged: rank 0's worst wait is 1.41 µs ("0.00 ms" before), and the
    offset found between their clocks is a few hundred ns ("-0.000 ms" before)."""
    parts = []
    for name in ("node0_rank0", "node1_rank1"):
        out = tmp_path / f"{name}.json"
        assert run_cli("import", str(DATA / "ranks" / f"{name}.pt.trace.json.gz"), "-o", str(out)).returncode == 0
        parts.append(str(out))
    merged = tmp_path / "m.json"
    r = run_cli("merge", *parts, "-o", str(merged))
    assert r.returncode == 0, r.stderr
    offset = re.search(r"clock offset (\S+ \S+),", r.stderr).group(1)
    assert re.fullmatch(r"[+-]\d+ ns|[+-]\d+\.\d+ (µs|ms|s)|0 ns", offset), offset
    assert "0.000 ms" not in r.stderr and "2 ranks from 2 sessions" in r.stderr
    shown = " ".join(run_cli("show", str(merged), "--width", "160", "--no-color").stdout.split())
    assert "arrives 1.41 µs after rank 1" in shown and "arrives 0.00 ms" not in shown


def test_straggler_sentence_picks_the_unit():
    from kernelscope.analyze.collectives import _wait

    assert (_wait(1_410), _wait(3_600_000), _wait(800)) == ("1.41 µs", "3.60 ms", "800 ns")


def test_straggler_sentence_names_ranks_in_the_plural():
    from kernelscope.analyze.collectives import CollectiveRow, RankTiming, straggler_sentence

    def row(waits: list[int]) -> CollectiveRow:
        ranks = tuple(RankTiming(r, 0, 10, w, "ncclKernel") for r, w in enumerate(waits))
        return CollectiveRow(0, "allreduce", "all_reduce", "0", None, "n/a", ranks, len(waits) - 1, 0, 3_600_000,
                             1, None, None, "n/a")

    assert straggler_sentence(row([5, 5, 5, 0])).endswith("; ranks 0, 1, 2 wait")
    assert straggler_sentence(row([5, 0])).endswith("; rank 0 waits")


def test_ranks_panel_explains_waiting_and_counts_collectives():
    text = shown(STRAGGLER_N4, "--width", "160")
    assert "at 1 collective," in text
    flat = " ".join(line.strip("│ ") for line in text.splitlines())
    assert "waiting = the rank's waits for the last rank to arrive, summed over the collectives it took part in" in flat


def test_a_rank_last_only_at_warm_up_gets_no_empty_also_line():
    # rank 1 of this run was last only at a warm-up collective: its warm-up line says so, and no
    # 'also last to arrive: rank 1 at 0 collectives, others waited 0 ns' line says nothing
    text = shown(DATA / "diagnosis" / "programs" / "straggler_ddp_n4_defect.json.gz", "--width", "160")
    assert "at 0 collectives" not in text
    assert "warm-up: rank 1 last at 1 warm-up collective, others waited 607.26 µs" in text
    assert "also last to arrive: rank 2 at 3 collectives" in text
