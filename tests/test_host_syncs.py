"""Host-blocking CUDA calls: kept by the trace pass (collect/trace/host_syncs.py), stored in the
session (model.HostSync), matched to the GPU gaps they caused (analyze/host_syncs.py) and read
by the host-gaps rule."""
from __future__ import annotations

import copy
import gzip
import json

import pytest

from conftest import DATA
from kernelscope.analyze.host_syncs import sync_waits_by_kernel
from kernelscope.analyze.timeline import build_timeline
from kernelscope.collect.trace.kineto import parse_trace
from kernelscope.model import HostSync, Launch, Session
from kernelscope.model.session import SessionFileError


@pytest.fixture(scope="module")
def doc():
    return json.loads(gzip.decompress((DATA / "trace_h100_mixed.json.gz").read_bytes()))


def test_trace_pass_keeps_the_synchronize_calls_of_a_recorded_trace(doc):
    parsed = parse_trace(doc)
    raw = sorted((e for e in doc["traceEvents"] if e.get("cat") == "cuda_runtime"
                  and e["name"] in ("cudaDeviceSynchronize", "cudaStreamSynchronize")), key=lambda e: e["ts"])
    assert [h.name for h in parsed.host_syncs] == [e["name"] for e in raw] and len(raw) == 5
    assert [h.kind for h in parsed.host_syncs] == ["device", "stream", "stream", "device", "device"]
    origin_us = parsed.time_origin_ns - int(doc.get("baseTimeNanoseconds", 0))
    for h, e in zip(parsed.host_syncs, raw):
        assert h.cpu_duration_ns == round(e["dur"] * 1000)
        assert h.cpu_start_ns == round(e["ts"] * 1000) - origin_us
    # .item() copies into pinned memory (cudaMemcpyAsync): the host waits in the cudaStreamSynchronize after
    # it, not in the copy call, so the copy is not listed
    assert not any(h.kind == "memcpy" for h in parsed.host_syncs)


def test_blocking_copies_and_malformed_calls(doc):
    d = copy.deepcopy(doc)
    ev = d["traceEvents"]
    copy_call = next(e for e in ev if e.get("name") == "cudaMemcpyAsync")
    gpu_copy = next(e for e in ev if e.get("cat") == "gpu_memcpy"
                    and e["args"]["correlation"] == copy_call["args"]["correlation"])
    gpu_copy["name"] = "Memcpy DtoH (Device -> Pageable)"  # into pageable memory the Async call waits
    bad = dict(next(e for e in ev if e.get("name") == "cudaDeviceSynchronize"), ts="soon")
    ev.append(bad)
    parsed = parse_trace(d)
    assert [h.name for h in parsed.host_syncs if h.kind == "memcpy"] == ["cudaMemcpyAsync"]
    assert "1 malformed synchronize event(s) left out" in parsed.problems


def _session(synced: int = 15) -> Session:
    # a constructed timeline: kernel k, 8 µs each, launched 20 times with 30 µs gaps; a synchronize
    # (host blocked 12 µs) returns 5 µs before each of the first ``synced`` launches after the first
    launches = [Launch("k", (1, 1, 1), (32, 1, 1), i * 38_000, 8_000) for i in range(20)]
    syncs = [HostSync("cudaDeviceSynchronize", "device", i * 38_000 - 17_000, 12_000) for i in range(1, synced + 1)]
    return Session(launches=launches, host_syncs=syncs)


def test_session_round_trip_and_schema(tmp_path):
    s = _session()
    back = Session.load(s.save(tmp_path / "s.json.gz"))
    assert back.host_syncs == s.host_syncs
    # sessions written before the field load with none, and save none
    old = Session.load(DATA / "session_h100_mixed.json.gz")
    assert old.host_syncs == [] and "host_syncs" not in old.to_dict()
    d = s.to_dict()
    d["host_syncs"][0]["kind"] = "nap"
    (tmp_path / "bad.json").write_text(json.dumps(d))
    loaded = Session.load(tmp_path / "bad.json")
    assert len(loaded.host_syncs) == 14 and any("host_syncs" in p for p in loaded.skipped_on_load)
    d["host_syncs"] = "all of them"
    (tmp_path / "worse.json").write_text(json.dumps(d))
    with pytest.raises(SessionFileError, match="host_syncs"):
        Session.load(tmp_path / "worse.json")


def test_sync_waits_line_up_with_the_gaps_they_caused():
    s = _session()
    tl = build_timeline(s)
    gaps = tl.gaps_before("k")
    waits = sync_waits_by_kernel(s, tl)["k"]
    assert len(waits) == len(gaps) == 19 and set(gaps) == {30_000}
    assert waits == (12_000,) * 15 + (0,) * 4
    assert sync_waits_by_kernel(Session(launches=s.launches), tl) is None


def test_host_gaps_fires_on_short_gaps_after_a_synchronize_and_launch_bound_does_not():
    from kernelscope.analyze.analysis import analyze_session
    from kernelscope.analyze.roofline import Ceilings

    s = _session(synced=19)
    k = analyze_session(s, Ceilings.none("test")).kernel("k")
    top = k.recommendations.recommendations[0]
    # every gap follows a synchronize: each is a host wait, 30 µs of an 8 + 30 µs launch cycle
    assert top.finding.rule == "host-gaps" and top.gain_pct == pytest.approx(100 * 30 / 38, abs=0.01)
    assert "synchronize" in top.finding.message
    assert dict(top.finding.evidence)["launches after a synchronize call (trace pass: CUDA runtime calls)"] == 19
    assert k.bound.bound != "launch-bound"  # a gap after a synchronize is a host wait, not launch overhead
    # without the synchronize calls the same 30 µs gaps are launch overhead, not host waits
    k2 = analyze_session(Session(launches=s.launches), Ceilings.none("test")).kernel("k")
    assert "host-gaps" not in {r.finding.rule for r in k2.recommendations.recommendations}
    assert k2.bound.bound == "launch-bound"
    # a few synchronize calls (under a quarter of the launches) are not a pattern of the loop
    k3 = analyze_session(_session(synced=4), Ceilings.none("test")).kernel("k")
    assert "host-gaps" not in {r.finding.rule for r in k3.recommendations.recommendations}
