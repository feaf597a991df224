"""Block -> SM layout: waves and tail computed from recorded H100 launches (checked
against arithmetic done here), and the measured view on synthetic block records,
including a truncated buffer and a block that never recorded."""
from __future__ import annotations

import heapq
import statistics
from pathlib import Path

import pytest

from conftest import assert_snapshot, DATA, draw, ROOT, run_cli, shown
from kernelscope.analyze.sm_layout import (
    COMPUTED_LABEL, computed_layout, instrumentation_overhead, measured_layout,
)
from kernelscope.analyze.kernel_table import select_kernels, summarize
from kernelscope.analyze.report import build_report
from kernelscope.analyze.sm_layout import sm_layout_data
from kernelscope.collect.instrument.reader import read_block_buffer
from kernelscope.model import BlockRecords, Launch, Session
from kernelscope.render.show import ShowView
from kernelscope.render.sm_layout import SMLayoutPanel

DEMO = ROOT / "src" / "kernelscope" / "data" / "demo_session.json.gz"
RANKS = DATA / "ranks" / "session_h200x2_run_torchrun.json.gz"

SESSIONS = sorted(DATA.glob("session_h100_*.json.gz"))
T0 = 1_795_322_159_289_605_829


def simulate(blocks: int, sms: int, slots: int, dur, t0: int = T0) -> BlockRecords:
    """Records of an idealised scheduler: each block goes to the slot that frees first (lowest SM on ties)."""
    heap = [(t0, sm, k) for sm in range(sms) for k in range(slots)]
    heapq.heapify(heap)
    rec = BlockRecords(grid=(blocks, 1, 1), buffer_rows=blocks, nsmid=sms)
    for b in range(blocks):
        t, sm, k = heapq.heappop(heap)
        d = dur(b)
        rec.block_id.append(b), rec.smid.append(sm), rec.start_ns.append(t), rec.end_ns.append(t + d)
        heapq.heappush(heap, (t + d, sm, k))
    return rec


def as_buffer(rec: BlockRecords, nsmid: int) -> list[int]:
    rows = sorted(zip(rec.block_id, rec.smid, rec.start_ns, rec.end_ns))
    out: list[int] = []
    for b, sm, s, e in rows:
        out += [b, sm | (nsmid << 32), s, e]
    return out


def launch_with(rec: BlockRecords, duration_ns: int, start_ns: int | None = 1_000_000) -> Launch:
    return Launch("matmul_blocks_kernel", rec.grid, (256, 1, 1), start_ns, duration_ns, stream=7, block_records=rec)


def _panel(session: Session, kernel, sm_count: int | None) -> SMLayoutPanel:
    """The panel as show draws it: the layout computed by analyze, then drawn."""
    return SMLayoutPanel(sm_layout_data(session, kernel, sm_count), kernel.label)


# -- computed from the launch -------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", SESSIONS, ids=[p.name for p in SESSIONS])
def test_computed_figures_are_the_arithmetic_of_grid_occupancy_and_sm_count(path: Path):
    summary = summarize(Session.load(path))
    sms = summary.sm_count
    assert sms == 132  # H100 SXM, from the CUDA driver
    checked = 0
    for k in summary.kernels:
        for c in k.configs:
            lay = computed_layout(c.config.blocks, c.occupancy, c.occupancy_missing_reason, sms)
            if c.occupancy is None:
                assert lay.waves.is_missing and c.occupancy_missing_reason in lay.waves.missing_reason
                continue
            blocks, per_sm = c.config.grid[0] * c.config.grid[1] * c.config.grid[2], c.occupancy.active_blocks_per_sm
            at_once = per_sm * sms
            whole = (blocks + at_once - 1) // at_once
            last = blocks - (whole - 1) * at_once
            assert lay.concurrent_blocks.value == at_once
            assert lay.waves.value == pytest.approx(blocks / at_once) == pytest.approx(c.waves_per_sm)
            assert lay.wave_count.value == whole and 0 < last <= at_once
            assert lay.last_wave_blocks.value == last and lay.last_wave_idle_slots.value == at_once - last
            assert lay.last_wave_idle_sms.value == max(0, sms - last)
            assert lay.slot_use_pct.value == pytest.approx(100 * blocks / (whole * at_once))
            for m in (lay.concurrent_blocks, lay.waves, lay.wave_count, lay.last_wave_blocks, lay.slot_use_pct):
                assert m.source == "derived" and m.formula
            checked += 1
    assert checked >= 2


def test_computed_sweep_matmul_two_waves_with_a_short_tail():
    s = Session.load(DATA / "session_h100_sweep.json.gz")
    k = select_kernels(summarize(s), "^matmul_kernel$", 1)[0]
    c = k.configs[0]
    assert c.config.grid == (64, 64, 1) and c.occupancy.active_blocks_per_sm == 16
    lay = computed_layout(c.config.blocks, c.occupancy, None, 132)
    # 4096 blocks, 16 x 132 = 2112 at once: one full wave, then 1984 blocks; 128 slots idle in the tail.
    assert (lay.wave_count.value, lay.last_wave_blocks.value, lay.last_wave_idle_slots.value) == (2, 1984, 128)
    assert lay.last_wave_idle_sms.value == 0 and lay.slot_use_pct.value == pytest.approx(100 * 4096 / 4224)


def test_missing_inputs_make_every_figure_na_with_the_reason():
    lay = computed_layout(128, None, "registers or shared memory per block were not recorded", 132)
    assert lay.waves.is_missing and "not recorded" in lay.waves.missing_reason
    s = Session.load(DATA / "session_h100_sweep.json.gz")
    occ = summarize(s).kernels[0].configs[0].occupancy
    assert "SM count" in computed_layout(128, occ, None, None).slot_use_pct.missing_reason


def test_computed_panel_is_labelled_not_measured_snapshot():
    s = Session.load(DATA / "session_h100_sweep.json.gz")
    summary = summarize(s)
    text = draw(_panel(s, select_kernels(summary, "Kernel2", 1)[0], summary.sm_count))
    assert COMPUTED_LABEL in text and "Not measured" in text
    assert "128 blocks / (1 resident per SM × 132 SMs = 132 at once) = 0.97 waves" in text
    assert "at least 4 of 132 SMs without a block" in text
    assert_snapshot("sm_layout_computed_kernel2.w120.txt", text)


# -- measured from block records ----------------------------------------------------------------------------------

def test_equal_blocks_two_per_slot_measure_two_waves_and_no_idle_sm():
    rec = simulate(264, 132, 1, lambda b: 10_000)
    m = measured_layout(launch_with(rec, 20_500), 132)
    assert all(c.ok for c in m.checks), m.checks
    assert m.waves == 2 and m.idle_sm_count == 0 and m.idle_sm_ids == ()
    assert all(len(t.block_ids) == 2 and t.max_resident_blocks == 1 for t in m.sms)
    assert m.span_ns == 20_000 and m.idle_ns == 0 and m.tail_idle_ns == 0


def test_residency_waves_and_idle_time_by_hand():
    # SM 0: block 0 [0, 100], block 1 [150, 200]; SM 1: block 2 [0, 300], block 3 [10, 20]; SM 2 runs nothing.
    rec = BlockRecords((4, 1, 1), [0, 1, 2, 3], [0, 0, 1, 1], [T0, T0 + 150, T0, T0 + 10],
                       [T0 + 100, T0 + 200, T0 + 300, T0 + 20], nsmid=3, buffer_rows=4)
    m = measured_layout(launch_with(rec, 300), 3)
    sm0, sm1 = m.sms
    assert (sm0.busy_ns, sm0.head_idle_ns, sm0.gap_idle_ns, sm0.tail_idle_ns) == (150, 0, 50, 100)
    assert (sm1.busy_ns, sm1.max_resident_blocks, sm1.waves) == (300, 2, 1)
    assert sm0.waves == 2 and sm0.block_ids == (0, 1) and sm0.start_ns == (0, 150)
    assert m.idle_sm_count == 1 and m.idle_sm_ids == (2,)
    assert m.idle_ns == 150 + 300 and m.tail_idle_ns == 100  # SM 0's gap and tail, SM 2 the whole span
    assert m.timer_step_ns == 10  # smallest step between distinct recorded times


def test_measured_waves_follow_slot_reuse_with_uneven_blocks():
    rec = simulate(10 * 4 * 3, 4, 3, lambda b: 1_000 + 37 * (b % 11))
    m = measured_layout(launch_with(rec, 10**9), 4)
    assert max(t.max_resident_blocks for t in m.sms) == 3
    assert m.waves >= 10  # 30 blocks per SM through 3 slots: at least 10 in a chain
    assert sum(len(t.block_ids) for t in m.sms) == 120


def test_truncated_buffer_and_a_missing_block_are_reported_as_data():
    rec = simulate(8, 4, 1, lambda b: 500)
    buf = as_buffer(rec, nsmid=4)
    buf[3 * 4:4 * 4] = [0, 0, 0, 0]  # block 3 never recorded
    buf = buf[:-3]  # the last row is cut short
    read = read_block_buffer(buf, (8, 1, 1))
    m = measured_layout(launch_with(read, 2_000), 4)
    failed = {c.name: c.detail for c in m.checks if not c.ok}
    assert set(failed) == {"every block recorded"}
    assert "6 of 8 blocks; missing: 3, 7" in failed["every block recorded"]
    assert len(m.problems) == 3  # truncated, 7 rows for 8 blocks, one row never written
    text = draw(_panel(_session_for(launch_with(read, 2_000)), _kernel_of(read), 4))
    assert "✗ every block recorded" in text and "✗ buffer:" in text and "truncated" in text


def test_duplicates_out_of_range_backwards_and_bad_sm_ids():
    rec = BlockRecords((3, 1, 1), [0, 0, 1, 5, 2], [0, 1, 9, 1, 1], [T0, T0, T0, T0, T0 + 50],
                       [T0 + 10, T0 + 10, T0 + 10, T0 + 10, T0 + 40], nsmid=4, buffer_rows=5)
    m = measured_layout(launch_with(rec, 100), 4)
    failed = {c.name: c.detail for c in m.checks if not c.ok}
    assert "0" in failed["each block recorded once"]
    assert "5" in failed["block ids within the grid"]
    assert "2" in failed["end after start"]
    assert "9" in failed["SM ids below %nsmid"]
    assert m.idle_sm_ids is None and m.idle_sm_count == 1  # SM 9 exists per %smid: ids not nameable


def test_records_longer_than_the_launch_and_outside_its_time_span():
    rec = simulate(4, 4, 1, lambda b: 1_000 + 100 * b)
    too_long = measured_layout(launch_with(rec, 900), 4)
    assert [c.ok for c in too_long.checks if c.name == "records within the launch's duration"] == [False]
    rec.clock_offset_ns = 1_000_000 - T0 + 250  # records start 250 ns after the launch
    m = measured_layout(launch_with(rec, 1_300), 4)
    assert m.timer_step_ns == 100  # the tolerance
    span = next(c for c in m.checks if c.name == "records inside the launch's time span")
    assert not span.ok and span.detail.endswith(": 2, 3")  # they end 1,450 and 1,550 ns in; the launch 1,300 + 100
    ok = measured_layout(launch_with(rec, 1_500), 4)
    assert all(c.ok for c in ok.checks)


def _session_for(*launches: Launch) -> Session:
    s = Session.load(DATA / "session_h100_sweep.json.gz")
    s.launches = list(launches)
    return s


def _kernel_of(rec: BlockRecords):
    return summarize(_session_for(launch_with(rec, 1))).kernels[0]


def test_overhead_is_the_median_ratio_of_instrumented_to_plain_launches():
    rec = simulate(8, 4, 1, lambda b: 500)
    plain = [Launch("matmul_blocks_kernel", rec.grid, (256, 1, 1), i * 10_000, d, stream=7) for i, d in
             enumerate((1000, 1010, 990))]
    inst = [launch_with(rec, d, start_ns=100_000 + i * 10_000) for i, d in enumerate((1100, 1050, 1080))]
    s = _session_for(*plain, *inst)
    o = instrumentation_overhead(s, inst[0])
    assert o.value == pytest.approx(100 * (statistics.median([1100, 1050, 1080]) / 1000 - 1))
    assert o.source == "derived" and "median" in o.formula and "3 vs 3" in o.raw_name
    assert instrumentation_overhead(_session_for(*inst), inst[0]).is_missing


def _measured_session() -> Session:
    rec = simulate(40, 8, 2, lambda b: 2_000 + 150 * (b % 5))
    rec.grid = (40, 1, 1)
    buf = as_buffer(rec, nsmid=10)
    buf[17 * 4:18 * 4] = [0, 0, 0, 0]  # block 17 never recorded
    read = read_block_buffer(buf, (40, 1, 1))
    plain = Launch("matmul_blocks_kernel", (40, 1, 1), (256, 1, 1), 0, 10_000, stream=7)
    return _session_for(plain, launch_with(read, 10_600, start_ns=50_000))


def test_measured_panel_snapshot():
    s = _measured_session()
    summary = summarize(s)
    text = draw(_panel(s, summary.kernels[0], 10))
    assert "measured" in text and COMPUTED_LABEL not in text
    assert "✗ every block recorded: 39 of 40 blocks; missing: 17" in text
    assert "2 of 10 ran no block: 8, 9" in text
    assert_snapshot("sm_layout_measured_synthetic.w120.txt", text)


def test_show_draws_the_panel_after_the_configuration():
    s = _measured_session()
    text = draw(ShowView(build_report(s, None, 1), with_analysis=False))
    assert text.index("Kernel configuration · matmul_blocks_kernel") < text.index("Block → SM layout")
    recorded = Session.load(DATA / "session_h100_mixed.json.gz")
    text = draw(ShowView(build_report(recorded, None, 3), with_analysis=False))
    assert text.count("Block → SM layout") == 3 and text.count(COMPUTED_LABEL) == 3


def test_a_partly_written_row_is_left_out_of_the_timelines():
    rec = BlockRecords((3, 1, 1), [0, 1, 2], [0, 1, 2], [T0, 0, T0 + 10], [T0 + 100, T0 + 50, T0 + 90],
                       nsmid=3, buffer_rows=3)
    m = measured_layout(launch_with(rec, 200), 3)
    assert m.span_ns == 100 and m.timer_step_ns == 10  # the zero start does not stretch the span
    assert {t.smid for t in m.sms} == {0, 2}
    assert [c.detail for c in m.checks if c.name == "end after start"] == [
        "a zero time, or an end before the start (left out of timelines): 1"]


def test_a_tail_wave_with_a_block_for_every_sm_says_so_not_at_least_zero():
    text = shown(DEMO, "--width", "160")
    assert "at least 0 of" not in text
    # the fill kernel: 122,880 blocks in waves of 2,112; the last wave's 384 blocks outnumber the 132 SMs
    assert "Last (tail) wave: 384 blocks, 1,728 slots idle, enough for each of the 132 SMs to get a block" in text
    assert "at least 0 of" not in (ROOT / "tests").joinpath("snapshots").joinpath(
        "narrow_show_h100_counters.w160.txt").read_text()


def test_a_grid_far_below_one_wave_shows_its_waves_not_zero():
    text = shown(RANKS, "--width", "160", "--kernel", "spin_kernel")
    assert "0.00 waves" not in text
    assert "1 block / (32 resident per SM × 132 SMs = 4,224 at once) = 0.00024 waves → 1 wave" in text


def test_measured_layout_with_every_sm_used_says_so(tmp_path):
    text = shown(DATA / "session_h100_instrumented.json.gz", "--width", "160")
    assert "SMs used            132; every SM ran a block" in text
    assert "0 of 132 ran no block" not in text
    out = tmp_path / "i.html"
    assert run_cli("report", str(DATA / "session_h100_instrumented.json.gz"), "-o", str(out)).returncode == 0
    assert "132; every SM ran a block" in out.read_text()
