"""Small things a reader notices (issue 36, item 10): counts with their noun in the right number, waits and clock
offsets in a unit that shows them, panel titles that do not read as out of order, and refusals that come before
a slow import."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import DATA, ROOT, run_cli

SESSIONS = sorted(DATA.glob("*.json.gz")) + [DATA / "ranks" / "session_h200x2_run_torchrun.json.gz"]
SESSIONS = [p for p in SESSIONS if "session" in p.name or p.name.startswith("counters_")]
WRONG_NUMBER = re.compile(r"(?<![\d.,])1 (launches|warps|threads|samples|ranks|kernels|waves|rows)\b|= 1 blocks|"
                          r"\b1 blocks /|wave: 1 blocks|wave\(s\)")


def _importing(argv: list[str]) -> subprocess.CompletedProcess:
    """The command with Python's import log on stderr (-X importtime)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-X", "importtime", "-m", "kernelscope", *argv], capture_output=True,
                          text=True, env=env, timeout=120)


def _imported(stderr: str) -> set[str]:
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


@pytest.mark.parametrize("path", SESSIONS, ids=lambda p: p.name)
def test_counts_have_their_noun_in_the_right_number(path):
    r = run_cli("show", str(path), "--width", "160", "--no-color", "--panels", "20", "--timeline", "40")
    assert r.returncode == 0, r.stderr
    bad = [line.strip() for line in r.stdout.splitlines() if WRONG_NUMBER.search(line)]
    assert bad == [], bad[:5]


def test_a_one_block_kernel_reads_one_block_one_thread_one_warp():
    r = run_cli("show", str(DATA / "ranks" / "session_h200x2_run_torchrun.json.gz"), "--kernel", "spin_kernel",
                "--width", "160", "--no-color")
    assert r.returncode == 0, r.stderr
    assert "(1, 1, 1) = 1 block " in r.stdout and "= 1 thread, 1 warp " in r.stdout
    assert "→ 1 wave " in r.stdout and "Last (tail) wave: 1 block," in r.stdout


def test_panel_titles_carry_no_out_of_order_numbers():
    r = run_cli("show", str(DATA / "session_h100_samples.json.gz"), "--width", "160", "--no-color", "--timeline", "5")
    titles = [line for line in r.stdout.splitlines() if line.startswith("╭─")]
    assert any("Profiling summary" in t for t in titles) and any("GPU stats" in t for t in titles)
    assert any("─ Timeline" in t for t in titles)
    assert not [t for t in titles if re.match(r"╭─ \d+ · ", t)], titles


def test_waits_and_clock_offsets_in_a_unit_that_shows_them(tmp_path):
    """The two recorded nodes' traces, merged: rank 0's worst wait is 1.41 µs ("0.00 ms" before), and the
    offset found between their clocks is a few hundred ns ("-0.000 ms" before)."""
    parts = []
    for name in ("node0_rank0", "node1_rank1"):
        out = tmp_path / f"{name}.json"
        assert run_cli("import", str(DATA / "ranks" / f"{name}.pt.trace.json.gz"), "-o", str(out)).returncode == 0
        parts.append(str(out))
    merged = tmp_path / "m.json"
    r = run_cli("merge", *parts, "-o", str(merged))
    assert r.returncode == 0, r.stderr
    offset = re.search(r"clock offset (\S+ \S+),", r.stderr).group(1)
    assert re.fullmatch(r"[+-]\d+ ns|[+-]\d+\.\d+ (µs|ms|s)|0 ns", offset), offset
    assert "0.000 ms" not in r.stderr and "2 ranks from 2 sessions" in r.stderr
    shown = " ".join(run_cli("show", str(merged), "--width", "160", "--no-color").stdout.split())
    assert "arrives 1.41 µs after rank 1" in shown and "arrives 0.00 ms" not in shown


def test_straggler_sentence_picks_the_unit():
    from kernelscope.analyze.collectives import _wait

    assert (_wait(1_410), _wait(3_600_000), _wait(800)) == ("1.41 µs", "3.60 ms", "800 ns")


def test_import_of_one_kernel_result_says_result(tmp_path):
    import lzma

    rep = tmp_path / "r.ncu-rep"
    rep.write_bytes(lzma.decompress((DATA / "ncu_h100_region.ncu-rep.xz").read_bytes()))
    r = run_cli("import", str(rep), "-o", str(tmp_path / "s.json"))
    assert r.returncode == 0 and "1 kernel result from" in r.stderr, r.stderr


def test_plot_refuses_an_existing_output_before_importing_matplotlib(tmp_path):
    pytest.importorskip("matplotlib")
    results = DATA / "bench_attention_h100.json"
    assert run_cli("plot", str(results), "--output-dir", str(tmp_path)).returncode == 0
    r = _importing(["plot", str(results), "--output-dir", str(tmp_path)])
    assert r.returncode == 2 and "already exists" in r.stderr
    assert not {m for m in _imported(r.stderr) if m.split(".")[0] == "matplotlib"}


def test_learn_refuses_a_bad_session_before_importing_torch(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = _importing(["learn", "marlin", "--session", str(bad)])
    assert r.returncode == 2 and "not a kernelscope session" in r.stderr
    assert "torch" not in {m.split(".")[0] for m in _imported(r.stderr)}


def test_many_shared_wavefronts_per_instruction_with_few_conflicts_are_explained():
    """The recorded cuDNN attention kernel: 277.14 shared-store wavefronts per instruction, 22,570 of 178,476 of
    them conflicts; the panel says what the rest is (issue 36 item 8), from a derived, named ratio."""
    from kernelscope.analyze.counters import transactions
    from kernelscope.model import Session

    s = Session.load(DATA / "session_h100_analysis.json.gz")
    x = next(x for x in s.launches if x.kernel.startswith("cudnn_generated_fort_native_sdpa")
             and "shared_store_wavefronts" in x.metrics)
    store = transactions(x).shared_access[1]
    assert store.unconflicted_per_instruction.value == pytest.approx((178_476 - 22_570) / 644)
    assert store.unconflicted_per_instruction.formula == "(shared wavefronts - bank conflicts) / shared instructions"
    r = run_cli("show", str(DATA / "session_h100_analysis.json.gz"), "--kernel", "cudnn_generated_fort", "--width",
                "160", "--no-color")
    said = " ".join(r.stdout.split())
    assert "Shared stores: 242.1 wavefronts per instruction without the bank conflicts" in said
    assert "Shared loads:" not in said  # 1 wavefront per instruction: nothing to explain


def test_straggler_sentence_names_ranks_in_the_plural():
    from kernelscope.analyze.collectives import CollectiveRow, RankTiming, straggler_sentence

    def row(waits: list[int]) -> CollectiveRow:
        ranks = tuple(RankTiming(r, 0, 10, w, "ncclKernel") for r, w in enumerate(waits))
        return CollectiveRow(0, "allreduce", "all_reduce", "0", None, "n/a", ranks, len(waits) - 1, 0, 3_600_000,
                             1, None, None, "n/a")

    assert straggler_sentence(row([5, 5, 5, 0])).endswith("; ranks 0, 1, 2 wait")
    assert straggler_sentence(row([5, 0])).endswith("; rank 0 waits")
