"""In-kernel instrumentation as RECORDED on an NVIDIA H100 80GB HBM3 (driver 580.159.04,
torch 2.11, Triton 3.6, 2026-11-22, scripts/record.sh instrumented): the block recorder
session (tests/workloads/instrumented_example.py), the Proton scopes session
(tests/workloads/proton_phases.py) and Proton's raw trace of that launch. No GPU needed."""
from __future__ import annotations

import gzip
import statistics

import pytest
from conftest import DATA, assert_snapshot, one_sentence_error, run_cli

from kernelscope.analyze.sm_layout import (
    OVERHEAD_FORMULA,
    instrumentation_overhead,
    measured_layout,
    plain_duration_spread,
)
from kernelscope.collect.instrument.proton_trace import (
    ProtonTraceError,
    read_proton_trace,
)
from kernelscope.model import Session

BLOCKS, PHASES = "matmul_blocks_kernel", "matmul_phases_kernel"
INST, PROTON = DATA / "session_h100_instrumented.json.gz", DATA / "session_h100_proton.json.gz"
RAW = DATA / "proton_h100_phases.chrome_trace.gz"


@pytest.fixture(scope="module")
def inst() -> Session:
    return Session.load(INST)


@pytest.fixture(scope="module")
def raw_text() -> str:
    return gzip.decompress(RAW.read_bytes()).decode()


def _recorded(s: Session):
    return [x for x in s.launches if x.kernel == BLOCKS and x.block_records is not None]


# -- the block recorder -----------------------------------------------------------------------------------
def test_every_block_of_every_instrumented_launch_recorded_once_on_a_real_sm(inst):
    recorded = _recorded(inst)
    assert len(recorded) == 6  # warm-up + 5 timed
    assert inst.collectors["instrument"].status == "ok"
    sm_count = inst.device.value("sm_count")
    assert sm_count == 132
    for x in recorded:
        r = x.block_records
        assert r.grid == x.grid == (32, 32, 1) and r.problems == [] and r.buffer_rows == 1024
        assert sorted(r.block_id) == list(range(1024))  # each block of the grid exactly once
        assert r.nsmid == 132 and all(0 <= sm < r.nsmid for sm in r.smid)
        assert len(set(r.smid)) == sm_count  # 1,024 blocks reach every SM
        assert all(0 < s <= e for s, e in zip(r.start_ns, r.end_ns))
        m = measured_layout(x, sm_count)
        assert all(c.ok for c in m.checks), [c for c in m.checks if not c.ok]
        assert m.span_ns <= x.duration_ns  # %globaltimer span inside the CUPTI duration
        assert m.timer_step_ns == 32 and m.waves == 4
        assert max(s.max_resident_blocks for s in m.sms) == 2  # the occupancy calculator's 2 blocks per SM


def test_block_times_lie_inside_each_launchs_cupti_span_with_one_clock_offset(inst):
    """The session holds no measured clock offset (clock_offset_ns is None), so the inside-the-span check
    cannot run as recorded. Estimate the offset from the first instrumented launch (its CUPTI start minus its
    earliest %globaltimer block start) and apply it to the other five: every block then lies inside its own
    launch's CUPTI span, within 2 us, which only holds if the two clocks keep one offset over ~11 ms."""
    recorded = _recorded(inst)
    assert all(x.block_records.clock_offset_ns is None for x in recorded)
    offsets = [inst.time_origin_ns + x.start_ns - min(x.block_records.start_ns) for x in recorded]
    assert max(offsets) - min(offsets) < 1_000  # ns: the same offset to within a microsecond
    off = offsets[0]
    for x in recorded[1:]:
        r = x.block_records
        lo, hi = inst.time_origin_ns + x.start_ns, inst.time_origin_ns + x.start_ns + x.duration_ns
        assert min(r.start_ns) + off >= lo - 2_000 and max(r.end_ns) + off <= hi + 2_000


def test_overhead_is_present_and_derived_from_measured_durations(inst):
    x = _recorded(inst)[-1]
    o = instrumentation_overhead(inst, x)
    assert not o.is_missing and o.unit == "%" and o.source == "derived" and o.formula == OVERHEAD_FORMULA
    assert o.raw_name == "instrumented vs plain duration (6 vs 7 launches)"
    same = [y for y in inst.launches if y.kernel == BLOCKS]
    inst_ns = statistics.median(y.duration_ns for y in same if y.block_records is not None)
    plain_ns = statistics.median(y.duration_ns for y in same if y.block_records is None)
    assert o.value == pytest.approx(100 * (inst_ns / plain_ns - 1)) and o.value == pytest.approx(0.126, abs=0.01)
    spread = plain_duration_spread(inst, x)
    assert spread.value == pytest.approx(3.23, abs=0.01) and abs(o.value) < spread.value


def _flat(panel: str) -> str:
    """A panel's text without borders or line breaks, for phrases the width may wrap."""
    return " ".join(ln.strip("│ ") for ln in panel.splitlines())


def _panel(out: str, title: str) -> str:
    lines = out.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(f"╭─ {title}"))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("╰"))
    return "\n".join(lines[start:end + 1]) + "\n"


def test_show_block_layout_measured_snapshot():
    r = run_cli("show", str(INST), "--kernel", BLOCKS, "--width", "120", "--no-color")
    assert r.returncode == 0, r.stderr
    text = _panel(r.stdout, f"Block → SM layout · {BLOCKS} · measured")
    assert "durations measured by the trace pass (CUPTI)" in _flat(text) and "✗" not in text
    assert "the plain launches alone spread 3.2%: within that, so no slowdown is measured" in _flat(text)
    assert "(occupancy calculator: 2)" in text and "1,024 of 1,024 blocks" in text
    assert_snapshot("recorded_h100_block_layout.w120.txt", text)


# -- Proton scopes ---------------------------------------------------------------------------------------
def test_recorded_proton_file_parses_completely(raw_text):
    kernels = read_proton_trace(raw_text, RAW.name)
    assert list(kernels) == [PHASES]
    s = kernels[PHASES]
    assert s.problems == [] and s.clock == "clock64"
    assert set(s.names) == {"setup", "load", "compute", "store"}
    assert sorted((w.block_id, w.warp) for w in s.warps) == [(b, w) for b in range(64) for w in range(4)]
    assert len({w.smid for w in s.warps}) == 64 and all(0 <= w.smid < 132 for w in s.warps)
    for w in s.warps:
        names = [s.names[i] for i in w.scope]
        assert names[0] == "setup" and names[-1] == "store"
        assert names.count("load") == names.count("compute") == 16  # K=1024 / BLOCK_K=64
        assert all(0 <= a <= b for a, b in zip(w.start_ns, w.end_ns))
        assert all(b <= a2 for b, a2 in zip(w.end_ns, w.start_ns[1:]))  # one warp's scopes do not overlap
    # every block started within the launch's measured CUPTI duration (14,112 ns), on %globaltimer
    assert max(w.block_offset_ns for w in s.warps) <= 14_112


def test_recorded_proton_file_matches_the_session(raw_text):
    s = Session.load(PROTON)
    x = next(y for y in s.launches if y.kernel == PHASES and y.scopes is not None)
    parsed = read_proton_trace(raw_text)[PHASES]
    assert x.scopes.to_dict() == parsed.to_dict()


@pytest.mark.parametrize("fraction", [0.0, 0.0001, 0.01, 0.25, 0.5, 0.77, 0.999])
def test_a_cut_recorded_file_gives_problems_or_one_sentence(raw_text, fraction):
    cut = raw_text[: int(len(raw_text) * fraction)]
    try:
        kernels = read_proton_trace(cut, RAW.name)
    except ProtonTraceError as e:
        assert "\n" not in str(e) and "Traceback" not in str(e)
        return
    s = kernels[PHASES]
    assert any("truncated" in p for p in s.problems)
    assert 0 < len(s.warps) <= 256


def test_show_warp_execution_and_kernel_timeline_snapshots():
    r = run_cli("show", str(PROTON), "--kernel", PHASES, "--width", "120", "--no-color")
    assert r.returncode == 0, r.stderr
    warps = _panel(r.stdout, f"Warp execution · {PHASES}")
    assert "block 0 on SM 128 · 4 warps" in warps and "unscoped" in warps
    timeline = _panel(r.stdout, f"Kernel timeline (inside) · {PHASES}")
    assert "64 blocks, 256 warps recorded" in timeline
    assert ("the last block started 256 ns after the first; the trace pass timed the launch at 14,112 ns"
            in _flat(timeline))
    assert_snapshot("recorded_h100_warp_execution.w120.txt", warps)
    assert_snapshot("recorded_h100_kernel_timeline.w120.txt", timeline)


def test_show_block_picks_the_block_the_warp_panel_draws():
    """--block N draws that block's warps (its own SM); a block without scopes is named, not silently swapped."""
    from kernelscope.model import Session

    scopes = next(x.scopes for x in Session.load(PROTON).launches if x.scopes is not None)
    other = sorted({w.block_id for w in scopes.warps})[5]
    sm = next(w.smid for w in scopes.warps if w.block_id == other)
    r = run_cli("show", str(PROTON), "--kernel", PHASES, "--block", str(other), "--width", "120", "--no-color")
    assert r.returncode == 0, r.stderr
    assert f"block {other} on SM {sm} · 4 warps" in _panel(r.stdout, f"Warp execution · {PHASES}")
    r = run_cli("show", str(PROTON), "--kernel", PHASES, "--block", "100000", "--width", "120", "--no-color")
    warps = _flat(_panel(r.stdout, f"Warp execution · {PHASES}"))
    assert "block 100000 has no recorded scopes; showing block 0 (64 blocks recorded)" in warps
    assert "--block takes a linear block id >= 0" in one_sentence_error(
        run_cli("show", str(PROTON), "--block", "-1"))
