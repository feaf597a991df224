"""Counts read with their noun in the right number, in every command's output: one launch, one block, one
sample, one finding; never '1 launches' nor 'wave(s)'."""
from __future__ import annotations

import re

import pytest

from conftest import DATA, ROOT, run_cli, shown

SESSIONS = sorted(DATA.glob("*.json.gz")) + [DATA / "ranks" / "session_h200x2_run_torchrun.json.gz"]
SESSIONS = [p for p in SESSIONS if "session" in p.name or p.name.startswith("counters_")]
# in the panels of every recorded session
WRONG_NUMBER_PANELS = re.compile(r"(?<![\d.,])1 (launches|warps|threads|samples|ranks|kernels|waves|rows)\b|= 1 blocks|"
                                 r"\b1 blocks /|wave: 1 blocks|wave\(s\)")
DEMO = ROOT / "src" / "kernelscope" / "data" / "demo_session.json.gz"
RANKS = DATA / "ranks" / "session_h200x2_run_torchrun.json.gz"
SPIN = DATA / "cuda_scopes" / "session_h100_spin.json.gz"  # one launch of one kernel
STRAGGLER_N4 = DATA / "diagnosis" / "programs" / "straggler_allreduce_n4_fixed.json.gz"  # a rank last at one collective
BANK = DATA / "diagnosis" / "bank_conflicts_defect.json.gz"  # one finding without a kernel-time estimate
CONTROL = DATA / "diagnosis" / "programs" / "control_bf16_train_control.json.gz"  # one finding under 0.5%
# A count of one with a plural noun, or a noun with '(s)', in show and report. Rule texts from analyze/ are not
# checked here.
WRONG_NUMBER = re.compile(r"\b1 (launches|kernels|samples|collectives|findings|slots|waves|warm-up collectives)\b"
                          r"|\b1 blocks (resident|/SM)|\b1 more \w+s\b|\w\(s\)")


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.name)
def test_counts_have_their_noun_in_the_right_number(path):
    r = run_cli("show", str(path), "--width", "160", "--no-color", "--panels", "20", "--timeline", "40")
    assert r.returncode == 0, r.stderr
    bad = [line.strip() for line in r.stdout.splitlines() if WRONG_NUMBER_PANELS.search(line)]
    assert bad == [], bad[:5]


def test_a_one_block_kernel_reads_one_block_one_thread_one_warp():
    r = run_cli("show", str(DATA / "ranks" / "session_h200x2_run_torchrun.json.gz"), "--kernel", "spin_kernel",
                "--width", "160", "--no-color")
    assert r.returncode == 0, r.stderr
    assert "(1, 1, 1) = 1 block " in r.stdout and "= 1 thread, 1 warp " in r.stdout
    assert "→ 1 wave " in r.stdout and "Last (tail) wave: 1 block," in r.stdout


def test_import_of_one_kernel_result_says_result(tmp_path):
    import lzma

    rep = tmp_path / "r.ncu-rep"
    rep.write_bytes(lzma.decompress((DATA / "ncu_h100_region.ncu-rep.xz").read_bytes()))
    r = run_cli("import", str(rep), "-o", str(tmp_path / "s.json"))
    assert r.returncode == 0 and "1 kernel result from" in r.stderr, r.stderr


@pytest.mark.parametrize("path", [DEMO, RANKS, SPIN, STRAGGLER_N4, BANK, CONTROL], ids=lambda p: p.name)
def test_counts_of_one_read_in_the_singular(path, tmp_path):
    for width in ("80", "160"):
        text = shown(path, "--width", width)
        assert not WRONG_NUMBER.search(text), WRONG_NUMBER.search(text).group(0)
    out = tmp_path / "r.html"
    r = run_cli("report", str(path), "-o", str(out))
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert not WRONG_NUMBER.search(page), WRONG_NUMBER.search(page).group(0)
    assert "(s)" not in r.stdout


def test_one_launch_of_one_kernel_and_one_unestimated_finding():
    assert "in 1 launch of 1 kernel" in shown(SPIN, "--brief", "--width", "160")
    assert "1 more finding has no kernel-time estimate" in shown(BANK, "--brief", "--width", "160")
    text = shown(CONTROL, "--width", "160")
    assert "Recommendations across the session" not in text  # one list: the verdict's


def test_gpu_stats_clock_line_with_one_sample_while_kernels_ran():
    text = shown(DEMO, "--width", "160")
    assert "in 1 sample taken while kernels ran" in text
