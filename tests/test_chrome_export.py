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


def test_counter_pass_only_launches_are_left_out_with_a_note(tmp_path):
    s = Session.load(DATA / "counters_h100_cuda.json.gz")
    assert all(x.start_ns is None for x in s.launches)
    out = tmp_path / "t.json"
    r = ks("export", str(DATA / "counters_h100_cuda.json.gz"), "--chrome", str(out))
    assert r.returncode == 0
    assert "kernelscope: note: 4 of 4 launches have no start time" in r.stderr
    doc = json.loads(out.read_text())
    assert not [e for e in doc["traceEvents"] if e["ph"] != "M"]
    assert "made-up time" in doc["otherData"]["notes"][0]


def test_block_records_become_one_track_per_sm(tmp_path):
    s = Session.load(DATA / "session_h100_sweep.json.gz")
    i, x = next((i, x) for i, x in enumerate(s.launches) if x.grid == (128, 1, 1))
    buf: list[int] = []
    for b in range(128):
        buf += [b, (b % 4) | (132 << 32), T0 + 100 * (b // 4), T0 + 100 * (b // 4) + 90]
    x.block_records = read_block_buffer(buf, x.grid)
    trace = session_to_chrome_trace(s)
    blocks = [e for e in trace.events if e["ph"] == "X" and e["cat"] == "block"]
    assert len(blocks) == 128 and {e["tid"] for e in blocks} == {0, 1, 2, 3}
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
