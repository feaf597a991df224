"""What a walk through every command and recorded session found, drawn from the recorded sessions: counts with
their noun in the right number, lines that say something, a finding's rank kept in the terminal, panels titled
alike in the terminal and the HTML report, and messages that say what was written."""
from __future__ import annotations

import re

import pytest

from conftest import DATA, draw, ROOT, run_cli
from kernelscope.analyze.analysis import analyze_session
from kernelscope.analyze.occupancy import theoretical_occupancy
from kernelscope.analyze.verdict import session_verdict
from kernelscope.model import Session
from kernelscope.render.occupancy_view import OccupancyView
from kernelscope.render.verdict import VerdictPanel, gain_text, window_text

DEMO = ROOT / "src" / "kernelscope" / "data" / "demo_session.json.gz"
RANKS = DATA / "ranks" / "session_h200x2_run_torchrun.json.gz"
SPIN = DATA / "cuda_scopes" / "session_h100_spin.json.gz"  # one launch of one kernel
STRAGGLER_N2 = DATA / "diagnosis" / "programs" / "straggler_allreduce_n2_defect.json.gz"  # launch-bound on rank 1
STRAGGLER_N4 = DATA / "diagnosis" / "programs" / "straggler_allreduce_n4_fixed.json.gz"  # a rank last at one collective
BANK = DATA / "diagnosis" / "bank_conflicts_defect.json.gz"  # one finding without a kernel-time estimate
CONTROL = DATA / "diagnosis" / "programs" / "control_bf16_train_control.json.gz"  # one finding under 0.5%

# A count of one with a plural noun, or a noun with '(s)'. Rule texts from analyze/ are not checked here.
WRONG_NUMBER = re.compile(r"\b1 (launches|kernels|samples|collectives|findings|slots|waves|warm-up collectives)\b"
                          r"|\b1 blocks (resident|/SM)|\b1 more \w+s\b|\w\(s\)")


def show(path, *args: str) -> str:
    r = run_cli("show", str(path), *args)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.parametrize("path", [DEMO, RANKS, SPIN, STRAGGLER_N4, BANK, CONTROL], ids=lambda p: p.name)
def test_counts_of_one_read_in_the_singular(path, tmp_path):
    for width in ("80", "160"):
        text = show(path, "--width", width)
        assert not WRONG_NUMBER.search(text), WRONG_NUMBER.search(text).group(0)
    out = tmp_path / "r.html"
    r = run_cli("report", str(path), "-o", str(out))
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert not WRONG_NUMBER.search(page), WRONG_NUMBER.search(page).group(0)
    assert "(s)" not in r.stdout


def test_one_launch_of_one_kernel_and_one_unestimated_finding():
    assert "in 1 launch of 1 kernel" in show(SPIN, "--brief", "--width", "160")
    assert "1 more finding has no kernel-time estimate" in show(BANK, "--brief", "--width", "160")
    assert "Recommendations across the session: 1 finding, under 0.5%" in show(CONTROL, "--width", "160")


def test_gpu_stats_clock_line_with_one_sample_while_kernels_ran():
    text = show(DEMO, "--width", "160")
    assert "in 1 sample taken while kernels ran" in text


def test_a_tail_wave_with_a_block_for_every_sm_says_so_not_at_least_zero():
    text = show(DEMO, "--width", "160")
    assert "at least 0 of" not in text
    # the fill kernel: 122,880 blocks in waves of 2,112; the last wave's 384 blocks outnumber the 132 SMs
    assert "Last (tail) wave: 384 blocks, 1,728 slots idle, enough for each of the 132 SMs to get a block" in text
    assert "at least 0 of" not in (ROOT / "tests").joinpath("snapshots").joinpath(
        "narrow_show_h100_counters.w160.txt").read_text()


def test_a_grid_far_below_one_wave_shows_its_waves_not_zero():
    text = show(RANKS, "--width", "160", "--kernel", "spin_kernel")
    assert "0.00 waves" not in text
    assert "1 block / (32 resident per SM × 132 SMs = 4,224 at once) = 0.00024 waves → 1 wave" in text


def test_occupancy_that_fits_no_block_says_a_launch_fails():
    text = draw(OccupancyView(theoretical_occupancy("sm_90", 1024, 255, 0)), 100)
    assert "0 blocks × 32 warps" in text
    assert "No block of this configuration fits on one SM (registers allow 0): a launch with it fails." in text
    assert "fails" not in draw(OccupancyView(theoretical_occupancy("sm_90", 256, 64, 0)), 100)


def test_ranks_with_the_same_window_are_named_once():
    s = Session.load(RANKS)
    v = session_verdict(s, analyze_session(s))
    text = window_text(v)
    assert text.startswith("ranks 0, 1: 16.810 ms of wall time each, from the end of the first launch")
    assert text.count("no steps marked") == 1


def test_a_finding_of_one_rank_names_it_in_the_terminal_and_not_in_a_one_rank_session(tmp_path):
    s = Session.load(STRAGGLER_N2)
    v = session_verdict(s, analyze_session(s))
    (f,) = [g for g in v.gains if g.rule == "launch-bound"]
    assert f.rank == 1
    assert gain_text(f, 2).endswith("(rank 1)")
    assert "launch each kernel (rank 1)" in draw(VerdictPanel(v), 160)  # not eaten as a markup tag
    demo = Session.load(DEMO)
    dv = session_verdict(demo, analyze_session(demo))
    assert all("rank" not in gain_text(g, 1) for g in dv.gains)
    out = tmp_path / "d.html"
    assert run_cli("report", str(DEMO), "-o", str(out)).returncode == 0
    assert "[rank 0]" not in out.read_text()


def test_kernel_time_and_the_gpu_time_the_kinds_share():
    text = show(DEMO, "--brief", "--width", "160")
    # 463.96 µs of kernels + 359.04 µs of copies = 823.00 µs; 463.96 / 823.00 = 56.4%
    assert "463.96 µs of kernel time in 10 launches of 2 kernels; 823.00 µs of GPU time with the copies" in text
    assert re.search(r"by kind\s+56\.4%\s+463\.96 µs\s+kernels", text)


def test_a_kernel_no_rule_could_run_on_says_so():
    text = show(RANKS, "--width", "160", "--kernel", "AllReduce")
    assert "0 kernelscope rules" not in text and "looked" not in text
    assert "Recommendations: none: no kernelscope rule could run on this kernel's data (the reasons are below)." in text
    demo = show(DEMO, "--width", "160")
    assert "none: the 5 kernelscope rules that could run on the data collected found nothing." in demo


def test_html_sections_carry_no_panel_numbers(tmp_path):
    out = tmp_path / "r.html"
    assert run_cli("report", str(BANK), "-o", str(out)).returncode == 0
    page = out.read_text()
    titles = re.findall(r"<h2[^>]*>([^<]*)</h2>", page)
    assert any(t.startswith("Kernel configuration") for t in titles)
    assert not [t for t in titles if re.match(r"\d+ · ", t)], titles


def test_report_and_import_say_what_they_wrote(tmp_path):
    r = run_cli("report", str(DATA / "counters_h100_region.json.gz"), "-o", str(tmp_path / "a.html"))
    assert "panels for 3 of 9 kernels (--panels N or --kernel REGEX for others)" in r.stdout
    r = run_cli("report", str(DEMO), "-o", str(tmp_path / "b.html"))
    assert "panels for both kernels" in r.stdout
    r = run_cli("import", str(DATA / "ranks" / "job2_rank0.pt.trace.json.gz"), "-o", str(tmp_path / "s.json"))
    assert r.returncode == 0, r.stderr
    assert "96 kernel launches from 1 trace file written to" in r.stderr


def test_ranks_panel_explains_waiting_and_counts_collectives():
    text = show(STRAGGLER_N4, "--width", "160")
    assert "at 1 collective," in text
    flat = " ".join(line.strip("│ ") for line in text.splitlines())
    assert "waiting = the rank's waits for the last rank to arrive, summed over the collectives it took part in" in flat


def test_html_verdict_names_are_text_not_numbers(tmp_path):
    # '15 other kernels' starts with a digit: as a number cell it was right-aligned and never wrapped, and ran
    # past the card on a phone-wide page
    out = tmp_path / "r.html"
    assert run_cli("report", str(RANKS), "-o", str(out), "--panels", "0").returncode == 0
    page = out.read_text()
    assert "<td>15 other kernels</td>" in page and "<td>7 other regions</td>" in page
    assert 'class="n">15 other kernels' not in page


def test_shared_wavefronts_per_instruction_na_says_why(tmp_path):
    # copy_strided runs no shared-memory instruction: 0 instructions, so no ratio, and the panel says so
    counters = DATA / "counters_h100_cuda.json.gz"
    flat = " ".join(line.strip("│ ") for line in show(counters, "--width", "160").splitlines())
    assert ("N/A shared load: wavefronts/inst: no shared-memory load instruction ran "
            "(smsp__inst_executed_op_shared_ld.sum = 0)") in flat
    out = tmp_path / "c.html"
    assert run_cli("report", str(counters), "-o", str(out)).returncode == 0
    assert "N/A shared store: wavefronts/inst: no shared-memory store instruction ran" in out.read_text()


def test_measured_layout_with_every_sm_used_says_so(tmp_path):
    text = show(DATA / "session_h100_instrumented.json.gz", "--width", "160")
    assert "SMs used            132; every SM ran a block" in text
    assert "0 of 132 ran no block" not in text
    out = tmp_path / "i.html"
    assert run_cli("report", str(DATA / "session_h100_instrumented.json.gz"), "-o", str(out)).returncode == 0
    assert "132; every SM ran a block" in out.read_text()


def test_multi_rank_timeline_gaps_say_they_sum_over_ranks(tmp_path):
    # two ranks' host waits add up to more than the run's span (1.990 s of a 1.094 s span): the line says why
    flat = " ".join(line.strip("│ ") for line in show(RANKS, "--timeline", "12", "--panels", "0", "--width", "160")
                    .splitlines())
    assert re.search(r"Host waits +681 totalling 1\.990 s, summed over the ranks, largest 505\.637 ms", flat)
    assert "… 1,440 more rows" in flat
    assert "summed over the ranks" not in show(DEMO, "--timeline", "12", "--panels", "0", "--width", "160")
    out = tmp_path / "r.html"
    assert run_cli("report", str(RANKS), "-o", str(out), "--panels", "0").returncode == 0
    assert "681 totalling 1.990 s, summed over the ranks" in out.read_text()


def test_a_prerequisite_listed_before_a_larger_gain_is_said(tmp_path):
    # the host syncs (5.1%) come before launch-bound (44.3%): a CUDA graph cannot hold them
    path = DATA / "diagnosis" / "programs" / "sync_item_train_defect.json.gz"
    s = Session.load(path)
    v = session_verdict(s, analyze_session(s))
    assert [f.rule for f in v.gains[:2]] == ["sync-in-loop", "launch-bound"]
    assert v.gains[0].gain_pct < v.gains[1].gain_pct
    flat = " ".join(line.strip("│ ") for line in show(path, "--brief", "--width", "160").splitlines())
    assert "largest estimated gain first (share of the window's wall time); a finding whose fix another needs first " \
           "comes before it" in flat
    assert "needs first comes before it" not in show(DEMO, "--brief", "--width", "160")  # in gain order there
    out = tmp_path / "s.html"
    assert run_cli("report", str(path), "-o", str(out), "--panels", "0").returncode == 0
    assert "a finding whose fix another needs first comes before it" in out.read_text()


def test_a_rank_last_only_at_warm_up_gets_no_empty_also_line():
    # rank 1 of this run was last only at a warm-up collective: its warm-up line says so, and no
    # 'also last to arrive: rank 1 at 0 collectives, others waited 0 ns' line says nothing
    text = show(DATA / "diagnosis" / "programs" / "straggler_ddp_n4_defect.json.gz", "--width", "160")
    assert "at 0 collectives" not in text
    assert "warm-up: rank 1 last at 1 warm-up collective, others waited 607.26 µs" in text
    assert "also last to arrive: rank 2 at 3 collectives" in text


def test_the_import_advice_can_be_copied_without_the_sentence_period(tmp_path):
    """The command sat at the end of the sentence, so the closing period came with it when copied."""
    from kernelscope.collect.file_kind import not_a_session

    trace = tmp_path / "t.pt.trace.json"
    trace.write_text('{"schemaVersion": 1, "traceEvents": [], "deviceProperties": []}')
    text = not_a_session(trace)
    assert text is not None and f"`kernelscope import {trace}`" in text and not text.endswith(str(trace))
