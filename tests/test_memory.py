"""run --memory: the allocator snapshot parser and the memory analysis, on a snapshot and a session recorded on an
H100 (tests/data/memory/README.md), held to what torch itself measured at the time; the Memory panel, the HTML
section and the Chrome counter track drawn from them."""
from __future__ import annotations

import gzip
import json

import pytest

from conftest import DATA, run_cli
from kernelscope.analyze.memory import MemoryUnavailable, memory_report
from kernelscope.analyze.report import build_report
from kernelscope.collect.memory.snapshot import SnapshotFormatError, history_from_snapshot
from kernelscope.model import CollectorStatus, Session

MEM = DATA / "memory"


@pytest.fixture(scope="module")
def fixture():
    with gzip.open(MEM / "snapshot.json.gz", "rt") as f:
        doc = json.load(f)
    return doc["snapshot"], doc["measured"]


def _report_of_snapshot(snapshot, measured):
    s = Session()
    s.memory = history_from_snapshot(snapshot, measured["time_origin_ns"], 0, 500_000)
    return s, memory_report(s)


def test_peak_and_state_match_what_torch_measured(fixture):
    snapshot, measured = fixture
    s, r = _report_of_snapshot(snapshot, measured)
    assert r.peak_allocated_bytes == measured["max_memory_allocated_bytes"]  # torch.cuda.max_memory_allocated()
    assert r.baseline_allocated_bytes == measured["allocated_at_start_bytes"]  # memory_allocated() before
    assert s.memory.end_allocated_bytes == measured["memory_allocated_end_bytes"]
    assert s.memory.end_reserved_bytes == measured["memory_reserved_end_bytes"]
    assert r.points[-1].allocated_bytes == measured["memory_allocated_end_bytes"]
    assert r.problems == ()


def test_live_at_peak_adds_up_and_top_is_largest_first(fixture):
    snapshot, measured = fixture
    s, r = _report_of_snapshot(snapshot, measured)
    assert r.live_at_peak_bytes + r.untraced_at_peak_bytes == r.peak_allocated_bytes
    sizes = [a.size_bytes for a in r.top_at_peak]
    assert sizes == sorted(sizes, reverse=True) and len(sizes) <= 10
    stacked = [a for a in r.top_at_peak if a.stack]
    assert stacked and all("/torch/" not in a.stack[0] for a in stacked)  # the program's frame first
    assert any("record_snapshot.py" in f for a in stacked for f in a.stack)
    # events are in time order and on the clock the fixture started (the allocator stamps Unix time)
    assert s.memory.t_ns == sorted(s.memory.t_ns) and 0 <= s.memory.t_ns[0] < 10**9


def test_snapshot_parser_refuses_other_data():
    with pytest.raises(SnapshotFormatError):
        history_from_snapshot({"traceEvents": []}, 0, 0)


def test_truncated_history_says_so(fixture):
    snapshot, measured = fixture
    n = len(snapshot["device_traces"][0])
    h = history_from_snapshot(snapshot, measured["time_origin_ns"], 0, max_entries=n)
    assert any("limit" in p for p in h.problems)


@pytest.fixture(scope="module")
def session():
    return Session.load(MEM / "steps50-52_memory.json.gz")


def test_steps_session_holds_only_the_window(session):
    assert session.steps.recorded_first == 50 and session.steps.recorded_last == 52
    assert sorted({r.name for r in session.regions if r.name.startswith("ProfilerStep")}) == [
        "ProfilerStep#50", "ProfilerStep#51", "ProfilerStep#52"]
    assert [m.step for m in session.marks] == [50, 51, 52]
    assert all(m.allocated_bytes and m.reserved_bytes >= m.allocated_bytes for m in session.marks)
    spans = [(r.cpu_start_ns, r.cpu_start_ns + r.cpu_duration_ns) for r in session.regions
             if r.name.startswith("ProfilerStep")]
    lo, hi = min(s for s, _ in spans), max(e for _, e in spans)
    assert all(lo <= t <= hi for t in session.memory.t_ns)  # the history covers the window, on the same clock


def test_region_peaks_of_the_session(session):
    r = memory_report(session)
    by = {p.name: p for p in r.region_peaks}
    assert max(p.peak_allocated_bytes for p in r.region_peaks) == r.peak_allocated_bytes
    assert by["forward"].occurrences == 3 and by["forward"].peak_allocated_bytes <= r.peak_allocated_bytes
    for m in session.marks:  # a mark's torch.cuda.memory_allocated() lies between the history's extremes
        assert r.baseline_allocated_bytes <= m.allocated_bytes <= r.peak_allocated_bytes


def test_memory_report_absent_or_unavailable():
    s = Session()
    assert memory_report(s) is None
    s.collectors["memory"] = CollectorStatus("not-run", "CUDA is not available to torch here")
    assert memory_report(s) == MemoryUnavailable("CUDA is not available to torch here")


def test_show_draws_the_memory_panel_and_marks(tmp_path):
    r = run_cli("show", str(MEM / "steps50-52_memory.json.gz"), "--width", "120", "--no-color", "--timeline", "60")
    assert r.returncode == 0, r.stderr
    peak = memory_report(Session.load(MEM / "steps50-52_memory.json.gz")).peak_allocated_bytes
    assert "Memory · caching allocator" in r.stdout
    assert f"Peak allocated    {peak / 2**20:.1f} MiB" in r.stdout
    assert "◆ after_forward" in r.stdout and "step 50 · allocated" in r.stdout


def test_html_report_has_the_memory_section(session):
    from kernelscope.render.html import render_html

    session.marks[0].name = "<script>alert(1)</script>"
    page = render_html(build_report(session))
    assert 'id="memory"' in page and "Largest allocations live at the peak" in page
    assert "<script>alert" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_chrome_export_has_a_memory_counter_track_and_mark_instants(session):
    from kernelscope.render.chrome_trace import session_to_chrome_trace

    ev = session_to_chrome_trace(session).events
    counters = [e for e in ev if e.get("ph") == "C" and e.get("cat", "").startswith("memory")]
    assert len(counters) == sum(session.memory.actions[a] in ("alloc", "free_requested", "segment_alloc",
                                                              "segment_free", "segment_map", "segment_unmap")
                                for a in session.memory.action)
    assert counters[-1]["args"]["allocated"] == session.memory.end_allocated_bytes
    assert max(e["args"]["allocated"] for e in counters) == memory_report(session).peak_allocated_bytes
    instants = [e for e in ev if e.get("ph") == "i"]
    assert [e["args"]["step"] for e in instants] == [50, 51, 52]


def test_show_json_carries_the_memory_panels_numbers(tmp_path):
    """show --json's `memory` holds what the panel draws (peak, live allocations with stacks, region peaks), and
    sessions recorded without --memory keep their JSON as it was (no `memory` key)."""
    import json

    from conftest import DATA
    from kernelscope.analyze.memory import memory_report
    from kernelscope.model import Session

    path = DATA / "memory" / "steps50-52_memory.json.gz"

    def run(p):
        r = run_cli("show", str(p), "--json")
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)

    doc = run(path)
    m = memory_report(Session.load(path))
    j = doc["memory"]
    assert j["peak_allocated_bytes"] == m.peak_allocated_bytes > 0
    assert j["peak_reserved_bytes"] == m.peak_reserved_bytes >= m.peak_allocated_bytes
    assert [a["size_bytes"] for a in j["top_at_peak"]] == [a.size_bytes for a in m.top_at_peak]
    assert all(isinstance(a["stack"], list) for a in j["top_at_peak"])
    assert len(j["points"]) == len(m.points) and j["points_columns"] == ["t_ns", "allocated_bytes", "reserved_bytes"]
    assert "memory" not in run(DATA / "session_h100_mixed.json.gz")


def test_events_out_of_time_order_are_read_in_time_order(session):
    """A history whose events come out of time order (an edited or damaged file) made show and report crash in
    the panel's time columns (IndexError); the analysis reads the events in time order, stably, and says so."""
    from dataclasses import replace

    from kernelscope.model.memory import MemoryHistory
    h = session.memory
    t = h.t_ns
    k = next(i for i in range(len(t) // 2, len(t)) if t[i - 1] < t[i])  # rotating here keeps ties in order

    def rot(col):
        return col[k:] + col[:k]
    moved = replace(h, t_ns=rot(h.t_ns), action=rot(h.action), address=rot(h.address), size=rot(h.size),
                    stack=rot(h.stack))
    back, n = moved.in_time_order()
    assert isinstance(back, MemoryHistory) and n == len(t) and back.to_dict() == h.to_dict()
    assert h.in_time_order() == (h, 0)
    want = memory_report(session)
    session.memory = moved
    got = memory_report(session)
    assert got.problems[-1] == (f"{len(t)} of the allocator's {len(t)} events were out of time order in the file "
                                "(the allocator records them as they happen): they are taken in time order, events "
                                "at one time in file order")
    assert replace(got, problems=got.problems[:-1]) == want


def test_columns_take_points_in_any_order_and_clamp_those_outside():
    from kernelscope.analyze.memory import MemoryPoint
    from kernelscope.render.memory_panel import columns_max
    pts = (MemoryPoint(90, 5, 0), MemoryPoint(0, 1, 0), MemoryPoint(50, 3, 0), MemoryPoint(-40, 7, 0),
           MemoryPoint(500, 2, 0))
    assert columns_max(pts, 0, 100, 10) == [7, 7, 7, 7, 7, 3, 3, 3, 3, 5]
    assert columns_max(tuple(reversed(pts)), 0, 100, 10) == columns_max(pts, 0, 100, 10)
    assert columns_max(pts, 100, 0, 4) == [7, 7, 7, 2]  # start after end: each point at the nearer end, no IndexError


@pytest.mark.parametrize("command", ["show", "report"])
def test_show_and_report_of_a_history_with_times_reversed(tmp_path, command):
    doc = json.loads(gzip.decompress((MEM / "steps50-52_memory.json.gz").read_bytes()))
    doc["memory"]["t_ns"] = doc["memory"]["t_ns"][::-1]
    path = tmp_path / "memrev.json"
    path.write_text(json.dumps(doc))
    argv = ["show", str(path), "--no-color", "--width", "250"] if command == "show" else [
        "report", str(path), "-o", str(tmp_path / "r.html")]
    r = run_cli(*argv)
    assert r.returncode == 0, r.stderr
    text = r.stdout if command == "show" else (tmp_path / "r.html").read_text()
    assert "events were out of time order in the file" in text
