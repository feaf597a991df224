"""`kernelscope export --chrome`: the trace loads as JSON, its events are the session's
launches, copies, regions and samples at the session's times, and nothing without a
time on the session clock is placed at a made-up one."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from conftest import DATA, run_cli
from kernelscope.collect.instrument.reader import read_block_buffer
from kernelscope.model import Session
from kernelscope.render.chrome_trace import PID_BLOCKS, PID_GPU, PID_HOST, PID_SAMPLES, session_to_chrome_trace

T0 = 1_795_322_159_289_605_829


ks = run_cli


def ns(us: float) -> int:
    return round(us * 1000)


def export(tmp_path, name: str) -> dict:
    out = tmp_path / "trace.json"
    r = ks("export", str(DATA / name), "--chrome", str(out))
    assert r.returncode == 0, r.stderr
    assert f"wrote {out}" in r.stdout
    return json.loads(out.read_text())


@pytest.mark.parametrize("name", ["session_h100_mixed.json.gz", "session_h100_samples.json.gz",
                                  "session_h100_counters.json.gz"])
def test_events_and_times_equal_the_session(tmp_path, name):
    s = Session.load(DATA / name)
    doc = export(tmp_path, name)
    assert doc["otherData"]["time_origin_ns"] == s.time_origin_ns and doc["otherData"]["notes"] == []
    ev = doc["traceEvents"]
    kernels = [e for e in ev if e["ph"] == "X" and e["cat"] == "kernel"]
    assert len(kernels) == len(s.launches)
    for e, x in zip(kernels, s.launches):
        assert (ns(e["ts"]), ns(e["dur"]), e["tid"], e["args"]["kernel"]) == (x.start_ns, x.duration_ns, x.stream,
                                                                             x.kernel)
        assert e["args"]["grid"] == list(x.grid) and e["pid"] == PID_GPU
    copies = [e for e in ev if e["ph"] == "X" and e["cat"] in ("memcpy", "memset")]
    assert [(e["cat"], ns(e["ts"]), ns(e["dur"]), e["tid"], e["args"]["bytes"]) for e in copies] == \
        [(a.kind, a.start_ns, a.duration_ns, a.stream, a.bytes) for a in s.activities]
    regions = [e for e in ev if e["ph"] == "X" and e["cat"] == "region"]
    cpu = [(e["name"], ns(e["ts"]), ns(e["dur"])) for e in regions if e["pid"] == PID_HOST]
    gpu = [(e["name"], ns(e["ts"]), ns(e["dur"])) for e in regions if e["pid"] == PID_GPU]
    assert cpu == [(r.name, r.cpu_start_ns, r.cpu_duration_ns) for r in s.regions]
    assert gpu == [(r.name, r.gpu_start_ns, r.gpu_duration_ns) for r in s.regions if r.gpu_start_ns is not None]
    counters = [e for e in ev if e["ph"] == "C"]
    numeric = [(smp.t_ns, k) for smp in s.samples for k, m in smp.metrics.items()
               if isinstance(m.value, (int, float)) and not isinstance(m.value, bool)]
    assert len(counters) == len(numeric)
    assert sorted({ns(e["ts"]) for e in counters}) == sorted({t for t, _ in numeric})
    assert all(e["pid"] == PID_SAMPLES for e in counters)
    names = {(e["pid"], e.get("tid")): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
    assert all(names[(PID_GPU, x.stream)] == f"stream {x.stream}" for x in s.launches)


def test_sample_fixture_has_counter_tracks(tmp_path):
    doc = export(tmp_path, "session_h100_samples.json.gz")
    tracks = Counter(e["name"] for e in doc["traceEvents"] if e["ph"] == "C")
    assert tracks["power_w [W]"] == len(Session.load(DATA / "session_h100_samples.json.gz").samples) == 49


def test_counter_pass_only_launches_are_left_out_with_a_note():
    s = Session.load(DATA / "counters_h100_cuda.json.gz")
    assert all(x.start_ns is None for x in s.launches)
    trace = session_to_chrome_trace(s)
    assert not [e for e in trace.events if e["ph"] != "M"]
    assert trace.notes[0].startswith("4 of 4 launches have no start time") and "made-up time" in trace.notes[0]


def _exit_with_nothing_to_draw(tmp_path, session_file, launches: int) -> None:
    out = tmp_path / "t.json"
    r = ks("export", str(session_file), "--chrome", str(out))
    assert r.returncode == 2 and not out.exists()
    assert r.stderr.strip() == (f"kernelscope: error: {session_file} has nothing to draw on a timeline: its "
                                f"{launches} launch(es) came from Nsight Compute, which serialises kernels, so they "
                                "have no start times; run `kernelscope run` for a timeline.")


def test_a_counter_pass_only_session_says_why_there_is_no_timeline(tmp_path):
    _exit_with_nothing_to_draw(tmp_path, DATA / "counters_h100_cuda.json.gz", 4)


def test_an_imported_ncu_report_says_why_there_is_no_timeline(tmp_path):
    from ncu_fixtures import report_file

    rep = report_file("ncu_h100_region", tmp_path)
    imported = tmp_path / "imported.json.gz"
    r = ks("import", str(rep), "-o", str(imported))
    assert r.returncode == 0, r.stderr
    _exit_with_nothing_to_draw(tmp_path, imported, len(Session.load(imported).launches))


def test_a_session_with_nothing_timed_at_all_is_refused(tmp_path):
    s = Session.load(DATA / "session_h100_mixed.json.gz")
    s.launches, s.activities, s.regions, s.samples = [], [], [], []
    empty = tmp_path / "empty.json.gz"
    s.save(empty)
    r = ks("export", str(empty), "--chrome", str(tmp_path / "t.json"))
    assert r.returncode == 2 and "no launch, copy, region or sample in it has a time" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def _partial_overlaps(events: list[dict]) -> list[tuple]:
    """Pairs of X events on one (pid, tid) that overlap but do not nest (viewers cannot draw them)."""
    tracks: dict[tuple, list[tuple[int, int, str]]] = {}
    for e in events:
        if e["ph"] == "X":
            start = ns(e["ts"])
            tracks.setdefault((e["pid"], e["tid"]), []).append((start, start + ns(e["dur"]), e["name"]))
    bad = []
    for key, spans in tracks.items():
        spans.sort(key=lambda t: (t[0], -t[1]))
        open_spans: list[tuple[int, int, str]] = []
        for span in spans:
            while open_spans and open_spans[-1][1] <= span[0]:
                open_spans.pop()
            if open_spans and span[1] > open_spans[-1][1]:
                bad.append((key, open_spans[-1], span))
            open_spans.append(span)
    return bad


SESSION_FIXTURES = sorted(p.name for p in DATA.glob("*.json.gz") if p.name.startswith(("session_", "counters_")))


def test_every_session_fixture_is_covered():
    assert len(SESSION_FIXTURES) >= 10 and "session_h100_instrumented.json.gz" in SESSION_FIXTURES


@pytest.mark.parametrize("name", SESSION_FIXTURES)
def test_events_on_one_track_nest_or_are_disjoint(name):
    trace = session_to_chrome_trace(Session.load(DATA / name))
    assert _partial_overlaps(trace.events) == []
    named = {(e["pid"], e.get("tid")) for e in trace.events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {(e["pid"], e["tid"]) for e in trace.events if e["ph"] == "X"} <= named  # every track has a name


def test_the_overlap_check_finds_a_partial_overlap():
    x = {"ph": "X", "pid": 1, "tid": 7, "name": "a", "ts": 1.0, "dur": 2.0}
    assert _partial_overlaps([x, {**x, "name": "b", "ts": 2.0}])  # 1-3 and 2-4 µs: neither nests
    assert not _partial_overlaps([x, {**x, "name": "b", "ts": 3.0}, {**x, "name": "c", "ts": 1.5, "dur": 0.5}])


def test_two_resident_blocks_per_sm_get_one_slot_track_each():
    s = Session.load(DATA / "session_h100_instrumented.json.gz")
    x = next(x for x in s.launches if x.block_records is not None)
    before = Counter(x.block_records.smid)
    trace = session_to_chrome_trace(s)
    blocks = [e for e in trace.events if e.get("cat") == "block" and e["pid"] == PID_BLOCKS + s.launches.index(x)]
    assert Counter(e["args"]["smid"] for e in blocks) == before  # every record drawn, on its own SM
    assert {e["args"]["slot"] for e in blocks} == {0, 1}  # two blocks at once per SM, as recorded
    names = {e["tid"]: e["args"]["name"] for e in trace.events
             if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == blocks[0]["pid"]}
    for e in blocks:
        assert names[e["tid"]] == f"SM {e['args']['smid']} · slot {e['args']['slot']}"
    assert not any("overlap" in n for n in trace.notes)


def test_overlapping_kernels_on_one_stream_go_to_a_named_extra_track():
    s = Session.load(DATA / "session_h100_mixed.json.gz")
    a, b = s.launches[0], s.launches[1]
    assert a.stream == b.stream
    b.start_ns = a.start_ns + a.duration_ns // 2  # overlaps a in part: not drawable on one track
    b.duration_ns = a.duration_ns
    trace = session_to_chrome_trace(s)
    assert _partial_overlaps(trace.events) == []
    kernels = [e for e in trace.events if e.get("cat") == "kernel"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in trace.events
             if e["ph"] == "M" and e["name"] == "thread_name"}
    assert names[(PID_GPU, kernels[0]["tid"])] == f"stream {a.stream}"
    assert names[(PID_GPU, kernels[1]["tid"])] == f"stream {a.stream} · overlap 1"
    assert any(n.startswith(f"1 event(s) on track 'stream {a.stream}' overlap others") for n in trace.notes)


def test_block_records_become_one_track_per_sm(tmp_path):
    s = Session.load(DATA / "session_h100_sweep.json.gz")
    i, x = next((i, x) for i, x in enumerate(s.launches) if x.grid == (128, 1, 1))
    buf: list[int] = []
    for b in range(128):
        buf += [b, (b % 4) | (132 << 32), T0 + 100 * (b // 4), T0 + 100 * (b // 4) + 90]
    x.block_records = read_block_buffer(buf, x.grid)
    trace = session_to_chrome_trace(s)
    blocks = [e for e in trace.events if e["ph"] == "X" and e["cat"] == "block"]
    assert len(blocks) == 128 and {e["tid"] for e in blocks} == {0, 1000, 2000, 3000}  # SM * 1000 + slot 0
    assert {(e["args"]["smid"], e["args"]["slot"]) for e in blocks} == {(0, 0), (1, 0), (2, 0), (3, 0)}
    assert {e["pid"] for e in blocks} == {PID_BLOCKS + i}
    assert min(ns(e["ts"]) for e in blocks) == x.start_ns  # aligned to the launch: offset not measured
    assert ns(blocks[5]["ts"]) - x.start_ns == 100 and ns(blocks[5]["dur"]) == 90
    assert blocks[5]["args"]["block_xyz"] == [5, 0, 0] and blocks[5]["args"]["start_ns_raw"] == T0 + 100
    assert any("aligned to the launch" in n for n in trace.notes)
    x.block_records.clock_offset_ns = 50 - T0  # measured offset: records placed by it, no note
    trace = session_to_chrome_trace(s)
    assert min(ns(e["ts"]) for e in trace.events if e.get("cat") == "block") == 50 and not trace.notes
    json.loads(json.dumps(trace.to_dict()))
    x.block_records.start_ns[7] = 0  # a row written only in part has no place on the clock
    trace = session_to_chrome_trace(s)
    assert sum(1 for e in trace.events if e.get("cat") == "block") == 127
    assert trace.notes == [f"1 block record(s) of launch {i} have a zero time or end before they start and were "
                           "left out"]


def test_bad_input_is_one_sentence(tmp_path):
    r = ks("export", str(tmp_path / "nope.json"), "--chrome", str(tmp_path / "t.json"))
    missing = tmp_path / "nope.json"
    assert r.returncode == 2 and r.stderr.strip() == f"kernelscope: error: {missing}: no such session file."
    r = ks("export", str(DATA / "session_h100_mixed.json.gz"), "--chrome", str(tmp_path / "no" / "t.json"))
    assert r.returncode == 2 and r.stderr.startswith("kernelscope: error: cannot write") and "Traceback" not in r.stderr


class _CountedInt(int):
    """An int that counts the comparisons made of it (the cost of laying spans on lanes, without a clock)."""

    compared = 0

    def _count(op):  # noqa: N805 (a factory of methods)
        def method(self, other):
            _CountedInt.compared += 1
            return op(int(self), int(other) if isinstance(other, int) else other)
        return method

    import operator as _op

    __lt__, __le__, __gt__, __ge__ = _count(_op.lt), _count(_op.le), _count(_op.gt), _count(_op.ge)
    __hash__ = int.__hash__


def test_lanes_cost_n_log_n_comparisons_for_any_overlap():
    """Comparisons counted: 4,000 spans sharing one start (block records, no nesting) and 4,000 each overlapping the
    next in part (regions, nesting) take O(n log n) of them (a first fit over every lane per span took n^2 / 2).
    The lanes are those of the first fit. Time < 1 s; memory < 10 MiB."""
    import math

    from kernelscope.render.chrome_trace import assign_lanes

    n = 4000
    c = _CountedInt
    for spans, nest, want in (([(c(0), c(10 + i)) for i in range(n)], False, list(range(n - 1, -1, -1))),
                              ([(c(i), c(i + n)) for i in range(n)], True, list(range(n)))):
        _CountedInt.compared = 0
        assert assign_lanes(spans, nest) == want
        assert _CountedInt.compared <= 30 * n * math.log2(n), (nest, _CountedInt.compared)


def test_lanes_nest_where_allowed_and_never_overlap_in_part():
    from kernelscope.render.chrome_trace import assign_lanes

    spans = [(0, 100), (10, 20), (50, 150), (100, 200), (120, 130)]
    # blocks (no nesting): each takes the first slot free at its start (10-20 has left slot 1 by 50;
    # 0-100 has left slot 0 by 100); 120-130 finds both taken (100-200, 50-150) and opens a third
    assert assign_lanes(spans, nest=False) == [0, 1, 1, 0, 2]
    # slices (nesting allowed): 10-20 nests in 0-100; 50-150 overlaps it in part; 120-130 nests in 100-200
    assert assign_lanes(spans, nest=True) == [0, 0, 1, 0, 0]
