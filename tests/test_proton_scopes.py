"""Phase scopes (Proton): parsing its trace file, analysis, panels 4 and 8, export, attaching.

The traces here are SYNTHETIC (tests/proton_fixtures.py), shaped exactly as Triton 3.6's
Proton writes them; the trace recorded on an H100 is tested in tests/test_instrumented_sessions.py.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import HANG_S, assert_snapshot, draw, ROOT
from proton_fixtures import proton_trace_text, two_block_pipeline

from kernelscope.analyze.phases import OVERLAP_FORMULA, scoped_view, summarize_phases, warp_idle
from kernelscope.analyze.report import build_report
from kernelscope.collect.instrument import scope_sink
from kernelscope.collect.instrument.proton_scopes import proton_problems
from kernelscope.collect.instrument.proton_trace import (
    ProtonTraceError,
    read_proton_trace,
)
from kernelscope.model import Launch, PhaseScopes, Session
from kernelscope.render.chrome_trace import session_to_chrome_trace
from kernelscope.render.kernel_phases import KernelPhasesPanel
from kernelscope.render.show import ShowView
from kernelscope.render.warp_execution import (
    WarpExecutionPanel,
    phase_letters,
    warp_strip,
)

K = "matmul_phases_kernel"


def parsed() -> PhaseScopes:
    return read_proton_trace(proton_trace_text(K, two_block_pipeline()))[K]


def launch(scopes: PhaseScopes | None, duration_ns: int = 10_000) -> Launch:
    return Launch(K, (2, 1, 1), (64, 1, 1), 1_000_000, duration_ns, stream=7, scopes=scopes)


# -- parsing ----------------------------------------------------------------------------------------------
def test_parses_warps_blocks_sms_and_cycles_back_from_protons_float_us():
    s = parsed()
    assert s.clock == "clock64" and s.time_unit == "cycles" and s.source == "proton"
    assert set(s.names) == {"setup", "load", "compute", "store"}
    assert [(w.block_id, w.warp, w.smid, w.block_offset_ns) for w in s.warps] == [
        (0, 0, 3, 0), (0, 1, 3, 0), (1, 0, 7, 800), (1, 1, 7, 800)]
    w0 = s.warps[0]
    assert [s.names[i] for i in w0.scope] == ["setup", "load", "load", "store"]
    assert list(zip(w0.start_ns, w0.end_ns)) == [(0, 200), (200, 1200), (1400, 2400), (3500, 3800)]
    assert s.warps[2].start_ns == w0.start_ns  # the other block's cycles, without its 800 ns offset
    assert s.problems == []


def test_a_truncated_file_keeps_the_complete_events_and_says_so():
    text = proton_trace_text(K, two_block_pipeline())
    cut = text[: text.index(f'"pid":"{K} Core7') - 200]  # inside block 1's first event
    s = read_proton_trace(cut)[K]
    assert {w.block_id for w in s.warps} == {0}
    assert len(s.warps[0].scope) == 4 and len(s.warps[1].scope) == 4
    assert len(s.problems) == 1 and "truncated" in s.problems[0] and "8 complete events" in s.problems[0]


@pytest.mark.parametrize("text, words", [
    ("", "is empty"),
    ("not json at all\n", "not a Proton trace"),
    ('{"traceEvents": 3}\n', "no traceEvents list"),
    ('{"displayTimeUnit":"ns","traceEvents":[]}\n', "holds no scope events"),
    ('{"displayTimeUnit":"ns","traceEv', "not a Proton trace"),
])
def test_files_that_are_not_proton_traces_raise_one_sentence(text, words):
    with pytest.raises(ProtonTraceError, match=words) as e:
        read_proton_trace(text, "x.chrome_trace")
    assert "\n" not in str(e.value)


def test_foreign_events_are_counted_and_left_out():
    doc = json.loads(proton_trace_text(K, two_block_pipeline()))
    doc["traceEvents"] += [{"ph": "M", "name": "process_name"}, {"ph": "X", "pid": 1, "tid": 2, "ts": 0, "dur": 1}]
    s = read_proton_trace(json.dumps(doc))[K]
    assert any("2 event(s) are not Proton scope events" in p for p in s.problems)
    assert len(s.warps) == 4


def test_merged_launches_show_as_blocks_on_two_sms():
    a = proton_trace_text(K, two_block_pipeline())
    blocks = two_block_pipeline()
    blocks[0] = (9, blocks[0][1], blocks[0][2])  # the same block id, another SM: a second launch
    doc, other = json.loads(a), json.loads(proton_trace_text(K, blocks))
    doc["traceEvents"] += other["traceEvents"]
    s = read_proton_trace(json.dumps(doc))[K]
    assert any("more than one SM" in p and "merges several launches" in p for p in s.problems)


def test_protons_stderr_drop_warnings_become_one_problem():
    lines = ["Warning (cta0, warp2): first 12 events are dropped due to insufficient buffer size (256/268)",
             "Warning (cta1, warp2): first 12 events are dropped due to insufficient buffer size (256/268)",
             "ParserException [offset=4096]: Clock overflow"]
    out = proton_problems(lines)
    assert len(out) == 2
    assert "2 warp(s) lost their first events" in out[0] and "(256/268)" in out[0]
    assert out[1] == "Proton's parser reported: ParserException [offset=4096]: Clock overflow"


def test_scopes_round_trip_through_the_session_file(tmp_path):
    s = Session(launches=[launch(parsed())])
    back = Session.load(s.save(tmp_path / "s.json")).launches[0].scopes
    assert back is not None and back.to_dict() == s.launches[0].scopes.to_dict()
    assert back.warps[3].block_offset_ns == 800 and back.time_unit == "cycles"


# -- analysis ---------------------------------------------------------------------------------------------
def test_durations_idle_gaps_and_overlap_by_hand():
    v = summarize_phases(parsed(), launch(None))
    by = {p.name: p for p in v.phases}
    assert [p.name for p in v.phases] == ["setup", "load", "compute", "store"]
    assert (by["store"].per_warp_median, by["store"].per_warp_min, by["store"].per_warp_max) == (350, 300, 400)
    assert by["load"].warps == 2 and by["load"].scopes == 4 and by["load"].per_warp_median == 2000
    assert v.block_span_median == 3900
    ov = {(o.a, o.b): o.fraction_median for o in v.overlaps}
    assert ov[("load", "compute")] == pytest.approx(800 / 3900)  # [1400, 2200] in both blocks
    assert ov[("setup", "load")] == pytest.approx(20 / 3900)
    i0 = warp_idle(parsed().warps[0])
    assert (i0.span, i0.busy, i0.idle, i0.gaps) == (3800, 2500, 1300, ((1200, 1400), (2400, 3500)))
    assert any("cannot be checked" in c for c in v.checks)


def test_a_block_offset_past_the_launchs_duration_fails_the_check():
    v = summarize_phases(parsed(), launch(None, duration_ns=500))
    assert any("later than the launch's measured duration" in c for c in v.checks)
    assert not any("later than" in c for c in summarize_phases(parsed(), launch(None, 5_000)).checks)


# -- panels -----------------------------------------------------------------------------------------------
def test_letters_are_unique_and_the_strip_shows_phases_and_idle():
    assert phase_letters(["load", "lds", "compute", "l"]) == ["L", "D", "C", "0"]
    w = parsed().warps[0]
    strip = warp_strip(w, 0, 3900, 39)  # 100 cycles a column
    s = parsed()
    text = "".join("." if c is None else s.names[c][0] for c in strip)
    assert text == "ss" + "l" * 10 + ".." + "l" * 10 + "." * 11 + "sss" + "."


def test_warp_execution_panel_snapshot():
    text = draw(WarpExecutionPanel(scoped_view(launch(parsed())), K))
    assert "block 0 on SM 3 · 2 warps · span 3,900 cycles" in text
    assert "Stall reasons: N/A: the counter pass (ncu) did not measure this kernel" in text
    assert_snapshot("warp_execution_synthetic.w120.txt", text)


def test_kernel_timeline_panel_snapshot():
    text = draw(KernelPhasesPanel(scoped_view(launch(parsed())), K))
    assert "load ∥ compute: 20.5% of the block span (median over 2 blocks)" in text
    assert OVERLAP_FORMULA in text.replace("\n", " ") or "overlap =" in text
    assert_snapshot("kernel_phases_synthetic.w120.txt", text)


def test_panels_say_na_without_scopes():
    assert "N/A: the kernel was not instrumented" in draw(WarpExecutionPanel(scoped_view(launch(None)), K))
    assert "N/A: Proton recorded no scopes" in draw(KernelPhasesPanel(scoped_view(launch(PhaseScopes())), K))


def test_show_draws_both_panels_for_a_launch_with_scopes():
    s = Session(launches=[launch(parsed())])
    text = draw(ShowView(build_report(s, None, 1), with_analysis=False))
    assert text.index("Block → SM layout") < text.index("Warp execution") < text.index("Kernel timeline (inside)")


def test_chrome_export_has_one_track_per_warp():
    s = Session(launches=[launch(parsed())])
    t = session_to_chrome_trace(s)
    names = {e["args"]["name"] for e in t.events if e.get("name") == "thread_name" and e["pid"] == 10_000}
    assert names == {"block 0 warp 0 (SM 3)", "block 0 warp 1 (SM 3)", "block 1 warp 0 (SM 7)",
                     "block 1 warp 1 (SM 7)"}
    scopes = [e for e in t.events if e.get("cat") == "scope"]
    assert len(scopes) == 16
    first_b1 = min(e["ts"] for e in scopes if e["args"]["block_id"] == 1)
    assert first_b1 == pytest.approx((1_000_000 + 800) / 1000)  # the block's measured offset from the launch start
    assert any("SM cycles (clock64) drawn as ns" in n for n in t.notes)


# -- attaching to the session ---------------------------------------------------------------------------
def test_scopes_attach_to_the_launch_inside_their_window_and_are_kept_otherwise():
    s = Session(time_origin_ns=1_000_000_000, launches=[launch(None)])
    subs = [scope_sink.ScopeSubmission(K, parsed(), 1_000_900_000, 1_001_100_000),
            scope_sink.ScopeSubmission(K, parsed(), 2_000_000_000, 2_000_100_000)]
    for sub in subs:
        scope_sink.submit(sub)
    scope_sink.attach_pending(s)
    assert s.launches[0].scopes is subs[0].scopes
    st = s.collectors["scopes"]
    assert st.status == "partial" and st.details["attached"] == 1 and len(st.details["unattached"]) == 1
    assert scope_sink.take_pending() == []


def test_workload_kernel_is_correct_in_the_interpreter_with_scopes_off():
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    sys.path.insert(0, str(ROOT / "tests" / "workloads"))
    try:
        from proton_phases import matmul
    finally:
        sys.path.pop(0)
    a, b = torch.randn(48, 40, dtype=torch.float16), torch.randn(40, 24, dtype=torch.float16)
    c = matmul(a, b, 16, 16, 16)
    assert (c.float() - a.float() @ b.float()).abs().max().item() < 0.05


# -- the host side, without a GPU -----------------------------------------------------------------------
def test_reading_protons_output_dir_keeps_the_raw_file_and_adds_stderr_problems(tmp_path):
    import tempfile

    from kernelscope.collect.instrument.proton_scopes import (
        ProtonScopes,
        ProtonScopesError,
    )
    ps = ProtonScopes(K, keep=str(tmp_path / "raw.chrome_trace"))
    ps._dir = tempfile.TemporaryDirectory()
    try:
        with pytest.raises(ProtonScopesError, match="wrote no trace file"):
            ps._read([])
        text = proton_trace_text(K, two_block_pipeline())
        (Path(ps._dir.name) / "scopes.chrome_trace").write_text(text)
        s = ps._read(["Warning (cta0, warp1): first 3 events are dropped due to insufficient buffer size (8/11)"])
        assert len(s.warps) == 4 and "lost their first events" in s.problems[0]
        assert (tmp_path / "raw.chrome_trace").read_text() == text
        ps.kernel = "other_kernel"
        with pytest.raises(ProtonScopesError, match="not other_kernel"):
            ps._read([])
    finally:
        ps._dir.cleanup()


def test_stderr_tee_passes_output_through_and_keeps_protons_lines(capfd):
    import os

    from kernelscope.collect.instrument.proton_scopes import _StderrTee
    tee = _StderrTee()
    os.write(
        2, b"ordinary line\nWarning (cta0, warp0): first 1 events are dropped due to insufficient buffer size (1/2)\n"
    )
    lines = tee.close()
    assert lines == ["Warning (cta0, warp0): first 1 events are dropped due to insufficient buffer size (1/2)"]
    assert "ordinary line" in capfd.readouterr().err


def test_stderr_tee_survives_more_output_than_a_pipe_holds_written_with_the_gil_held():
    """Proton prints one drop warning per warp from C++ with the GIL held; on the first GPU run (H100,
    2026-11-22) a pipe-based tee filled up and the GPU test hung. 2,000 such lines (~190 KB) through
    ctypes.PyDLL, which keeps the GIL during the call, must come through in a few seconds."""
    import subprocess
    import textwrap

    code = textwrap.dedent(f"""
        import ctypes, sys
        sys.path.insert(0, {str(ROOT / "src")!r})
        from kernelscope.collect.instrument.proton_scopes import _StderrTee
        write = ctypes.PyDLL(None).write
        tee = _StderrTee()
        for i in range(2000):
            b = f"Warning (cta{{i}}, warp0): first 52 events are dropped due to insufficient buffer size (16/68)\\n"
            write(2, b.encode(), len(b))
        print(len(tee.close()))
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_S, check=False)
    assert r.returncode == 0 and r.stdout.strip() == "2000", r.stderr[-500:]
    assert r.stderr.count("events are dropped") == 3 and "1,997 more Proton warnings" in r.stderr


def test_interpreter_runs_are_not_recorded():
    from kernelscope.collect.instrument.proton_scopes import ProtonScopes
    with ProtonScopes(K) as ps:
        pass
    assert ps.scopes is None and scope_sink.take_pending() == []


def test_events_with_impossible_times_are_left_out_not_fatal():
    from kernelscope.collect.instrument.proton_trace import _parse_event

    good = {"ph": "X", "pid": "k Core0 CTA0", "tid": "warp 0", "ts": 1.0, "dur": 2.0, "name": "load"}
    assert _parse_event(good) is not None
    for ts, dur in ((1.0, -1e308), (float("inf"), 1.0), (float("nan"), 1.0), (1.0, -5.0)):
        assert _parse_event({**good, "ts": ts, "dur": dur}) is None
