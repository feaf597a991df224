"""The column paths that keep a million launches fast give what the per-object paths give: the streamed
Chrome trace is byte for byte json.dumps of its events, the Kineto parser's table is the table of its
launches, a one-rank session's busy time and the verdict's split by kind equal the interval/row sums."""
from __future__ import annotations

import gzip
import io
import json
from collections import defaultdict

import pytest

from conftest import DATA
from kernelscope.analyze.analysis import analyze_session
from kernelscope.analyze.collectives import analyze_collectives
from kernelscope.analyze.intervals import intersect_unions, total, union
from kernelscope.analyze.ranks import summarize_ranks
from kernelscope.analyze.roofline import Ceilings
from kernelscope.analyze.verdict import session_verdict
from kernelscope.collect.trace.kineto import parse_trace
from kernelscope.model import Session
from kernelscope.model.launch_table import LaunchTable
from kernelscope.render.chrome_trace import KernelRows
from kernelscope.render.chrome_trace import session_to_chrome_trace

SESSIONS = sorted(p.name for p in DATA.glob("session_*.json.gz"))


def written(trace) -> bytes:
    buf = io.BytesIO()
    trace.write_json(buf)
    return buf.getvalue()


def overlapping_session() -> Session:
    """The mixed fixture with launch 1 moved to overlap launch 0 in part, and launch 5 given a counter result:
    rows moved to an overlap track, and runs of rows on both sides of a launch built as a Launch."""
    s = Session.load(DATA / "session_h100_mixed.json.gz")
    a, b = s.launches[0], s.launches[1]
    b.start_ns, b.duration_ns = a.start_ns + a.duration_ns // 2, a.duration_ns
    s.launches[5].counters = dict(s.launches[5].metrics)
    return s


@pytest.mark.parametrize("name", SESSIONS)
def test_streamed_trace_is_json_dumps_of_its_events(name):
    trace = session_to_chrome_trace(Session.load(DATA / name))
    assert written(trace) == json.dumps(trace.to_dict()).encode()


def test_streamed_trace_with_moved_rows_and_split_runs():
    trace = session_to_chrome_trace(overlapping_session())
    runs = [p for p in trace.parts if isinstance(p, KernelRows)]
    assert len(runs) >= 2 and runs[0].cols.moved  # rows kept as columns, one of them moved
    assert any("overlap" in n for n in trace.notes)
    assert written(trace) == json.dumps(trace.to_dict()).encode()
    tid = {e["args"]["launch_index"]: e["tid"] for e in trace.events if e.get("cat") == "kernel"}
    assert tid[1] != tid[0] and tid[1] == runs[0].cols.moved[1]  # the moved row is written on its new track
    assert trace.timed_events() == sum(1 for e in trace.events if e["ph"] != "M")


def test_streamed_trace_of_two_ranks(tmp_path):
    from kernelscope.cli import main as cli_main

    out = tmp_path / "job.json"
    ranks = DATA / "ranks"
    assert cli_main(["import", str(ranks / "job2_rank0.pt.trace.json.gz"), str(ranks / "job2_rank1.pt.trace.json.gz"),
                     "-o", str(out)]) == 0
    s = Session.load(out)
    trace = session_to_chrome_trace(s)
    pids = {e["pid"] for e in trace.events if e.get("cat") == "kernel"}
    assert pids == {1001, 2001}  # each rank's launch rows moved to its own process
    assert written(trace) == json.dumps(trace.to_dict()).encode()


def _trace_doc() -> dict:
    return json.loads(gzip.decompress((DATA / "trace_h100_mixed.json.gz").read_bytes()))


def test_parsed_table_is_the_table_of_its_launches():
    doc = _trace_doc()
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    assert len(kernels) > 10
    kernels[3]["ts"], kernels[7]["ts"] = kernels[7]["ts"], kernels[3]["ts"]  # out of start order in the file
    parsed = parse_trace(doc)
    t = parsed.table
    assert len(t) == len(kernels) and t.start_ns == sorted(t.start_ns)
    again = LaunchTable.from_launches(t.launches())
    assert (again.shapes, again.shape, again.start_ns, again.duration_ns, again.correlation_id, again.metric_values) \
        == (t.shapes, t.shape, t.start_ns, t.duration_ns, t.correlation_id, t.metric_values)
    assert len(t.shapes) < len(t)  # launches of one configuration share a shape
    assert [x.kernel for x in parsed.launches] == t.kernels()


def test_a_malformed_kernel_event_is_left_out_and_counted():
    doc = _trace_doc()
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    kernels[2]["args"]["grid"] = ["x", 1, 1]
    parsed = parse_trace(doc)
    assert len(parsed.table) == len(kernels) - 1
    assert parsed.problems == ["1 malformed kernel event(s) left out"]


def _spans(session: Session, rank: int) -> tuple[list, list]:
    """The rank's (start, end) of its NCCL kernels and of its other kernels, from Launch objects one by one."""
    comm, comp = [], []
    for x in session.launches:
        if x.start_ns is not None and (x.rank or 0) == rank:
            (comm if x.collective is not None else comp).append((x.start_ns, x.start_ns + x.duration_ns))
    return comm, comp


def _interval_busy(session: Session) -> tuple[int, int, int]:
    comm, comp = _spans(session, 0)
    busy = union(comm + comp)
    return total(busy), (busy[-1][1] - busy[0][0]) if busy else 0, len(comm) + len(comp)


@pytest.mark.parametrize("name", ["session_h200x2_run_torchrun.json.gz", "shuffled"])
def test_rank_times_from_one_sweep_equal_the_interval_unions(name):
    """The Ranks summary sweeps each rank's launches once (running ends and lengths); the unions and their
    intersection, built interval by interval, give the same numbers: on a torchrun job of 2 ranks, and on it
    with its launches in reverse order (the sweep sorts them)."""
    s = Session.load(DATA / "ranks" / "session_h200x2_run_torchrun.json.gz")
    if name == "shuffled":
        s.launches = list(reversed(s.launches))
    rows = summarize_ranks(s, analyze_collectives(s)).ranks
    assert len(rows) == 2 and all(r.communication_ns > 0 for r in rows)
    for r in rows:
        comm_raw, comp_raw = _spans(s, r.info.rank)
        comm, comp = union(comm_raw), union(comp_raw)
        busy = union(comm_raw + comp_raw)
        span = busy[-1][1] - busy[0][0]
        assert (r.kernels, r.span_ns, r.compute_ns, r.communication_ns, r.idle_ns, r.overlap_ns) == (
            len(comm_raw) + len(comp_raw), span, total(comp), total(comm), span - total(busy),
            total(intersect_unions(comp, comm)))


@pytest.mark.parametrize("name", SESSIONS)
def test_one_rank_busy_time_from_columns_equals_the_interval_union(name):
    s = Session.load(DATA / name)
    r = summarize_ranks(s, analyze_collectives(s)).ranks[0]
    busy, span, kernels = _interval_busy(s)
    assert (r.compute_ns, r.span_ns, r.kernels, r.idle_ns) == (busy, span, kernels, span - busy)


def test_one_rank_busy_time_with_overlaps():
    s = overlapping_session()
    r = summarize_ranks(s, analyze_collectives(s)).ranks[0]
    busy, span, _ = _interval_busy(s)
    assert (r.compute_ns, r.span_ns) == (busy, span) and busy < sum(x.duration_ns for x in s.launches)


@pytest.mark.parametrize("name", SESSIONS)
def test_verdict_split_by_kind_equals_the_timeline_rows(name):
    s = Session.load(DATA / name)
    a = analyze_session(s, Ceilings.none())
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for row in a.timeline.rows:
        if row.kind != "region" and row.on_gpu:
            totals[row.kind][0] += row.duration_ns
            totals[row.kind][1] += 1
    got = {t.name: [t.total_ns, t.count] for t in session_verdict(s, a).by_kind}
    assert got == dict(totals)


@pytest.mark.parametrize("name", ["session_h100_samples.json.gz", "session_h100_mixed.json.gz"])
def test_a_schema_1_session_stays_in_columns_through_a_report(name):
    """A schema-1 file stores launches as a list of objects. Held as that list, every launch_table() call
    rebuilt the columns (14 times per show: 18 s for 48,400 launches), and the per-kernel scans of the list made
    20,000 launches of 5,000 kernels take 16 s. Loaded, it is held as columns; the GPU-stats view and the
    declared-region totals read the columns, so a whole report leaves it there."""
    from kernelscope.analyze.report import build_report

    s = Session.load(DATA / name)
    assert json.loads(gzip.open(DATA / name).read())["schema_version"] == 1
    table = s.launch_table()
    assert table is s.launch_table() and len(table) > 0
    build_report(s, None, None)
    assert s.launch_table() is table  # no code asked for the list of Launch objects
    assert [x.kernel for x in s.launches] == table.kernels()


def test_activities_sorted_by_start_then_each_shared_start_by_end_equal_a_sort_by_both():
    """The program rules' rows are sorted by start (an int key) and then by end where starts are shared; the
    result is a stable sort by (start, end), on random rows with many shared starts and ends."""
    import random
    from operator import itemgetter

    from kernelscope.analyze.breakdown import GpuActivity, _sort_by_time

    rng = random.Random(3)
    for _ in range(2000):
        acts = [GpuActivity(rng.randint(0, 8), rng.randint(0, 8), "kernels", str(i)) for i in range(rng.randint(0, 25))]
        got = list(acts)
        _sort_by_time(got)
        assert got == sorted(acts, key=itemgetter(0, 1))
