"""Narrow terminals (80 columns is Rich's width when output is piped): no number is ever cut
or folded. Every command and panel that draws numbers is rendered from the recorded fixtures
at 80, 120 and 160 columns, watched for Rich's cuts and folds (tests/narrow_check.py), and
kept as snapshots; also the kernel names told apart, the +N footnote and --ceilings FILE."""
from __future__ import annotations

import contextlib
import io
import json

import pytest
from rich.table import Table
from rich.text import Text

from conftest import assert_snapshot, DATA, draw, one_sentence_error, ROOT, run_cli
from kernelscope.cli import main as cli_main
from kernelscope.model import Session
from kernelscope.model.names import distinct_short_names
from narrow_check import text_problems, watch_rich

WIDTHS = (80, 120, 160)
CEILINGS = DATA / "ceilings_h100.json"  # measured by kernelscope calibrate on the H100 the sessions ran on
RUN1 = DATA / "session_h100_counters.json.gz"  # tests/workloads/counters_small.py, as tests/test_diff.py uses
RUN2 = DATA / "counters_h100_region.json.gz"  # ... recorded again
ANALYSIS = DATA / "session_h100_analysis.json.gz"
PROTON = DATA / "session_h100_proton.json.gz"  # a Triton kernel with Proton phase scopes
MARLIN = ROOT / "src" / "kernelscope" / "data" / "marlin_session_h100.json.gz"  # what learn shows without a GPU
SESSIONS = sorted(DATA.glob("session_h100_*.json.gz")) + sorted(DATA.glob("counters_h100_*.json.gz"))


def cli(*args: str, width: int) -> tuple[str, str]:
    """The command in this process (so Rich can be watched), as plain text at ``width`` columns."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli_main([*args, "--width", str(width), "--no-color"])
    assert code == 0, err.getvalue()
    return out.getvalue(), err.getvalue()


def assert_nothing_cut(text: str, watch, width: int) -> None:
    problems = watch.cuts + watch.splits + text_problems(text, width)
    assert not problems, f"{len(problems)} problems at {width} columns:\n" + "\n".join(problems[:20])


# -- the watcher itself catches what it is for ------------------------------------------------

def test_the_watch_sees_a_cut_number_a_folded_number_and_a_glued_ellipsis():
    t = Table(box=None)
    t.add_column("Requests", no_wrap=True, max_width=5)
    t.add_row("524,288")
    with watch_rich() as w:
        text = draw(t, 80)
    assert any("524,288" in c for c in w.cuts) and "524," in text and "…" in text
    assert text_problems(text, 80)  # "524,…" is an ellipsis glued to a cut number
    with watch_rich() as w:
        draw(Text("sectors 8,388,608,123,456", overflow="fold"), 14)
    assert w.splits and "8,388,608,123,456" in w.splits[0]
    with watch_rich() as w:
        text = draw(Text("a sentence of words that wraps at its spaces, 1,234 and 5.67%"), 20)
    assert not w.cuts and not w.splits and not text_problems(text, 20)
    assert text_problems("x" * 81, 80) and not text_problems("… and 3 more kernels", 80)


# -- every command and panel that draws numbers, from every fixture session -------------------

@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("path", SESSIONS, ids=[p.name for p in SESSIONS])
def test_show_cuts_no_number(path, width):
    with watch_rich() as w:
        text, _ = cli("show", str(path), "--timeline", "--all-kernels", "--ceilings", str(CEILINGS), width=width)
    assert_nothing_cut(text, w, width)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("args", [
    ("diff", str(RUN1), str(RUN2)),
    ("diff", str(DATA / "session_h100_mixed.json.gz"), str(DATA / "session_h100_sweep.json.gz")),
    ("learn", "marlin", "--session", str(MARLIN)),
], ids=["diff_two_recordings", "diff_mixed_sweep", "learn_marlin"])
def test_commands_cut_no_number(args, width):
    if args[0] == "learn":  # packing the real layer's weights needs torch and numpy
        pytest.importorskip("torch")
        pytest.importorskip("numpy")
    with watch_rich() as w:
        text, _ = cli(*args, width=width)
    assert_nothing_cut(text, w, width)


def _roofline():
    from kernelscope.analyze.analysis import analyze_session
    from kernelscope.analyze.roofline import Ceilings
    from kernelscope.collect.calibrate.ceilings import load_calibration
    from kernelscope.render.roofline_term import RooflineChart

    a = analyze_session(Session.load(ANALYSIS), Ceilings.from_metrics(load_calibration(CEILINGS).ceilings,
                                                                     "tests/data/ceilings_h100.json"))
    return RooflineChart(tuple(k.roofline for k in a.kernels) + a.regions, a.ceilings)


def _kernel_timeline():
    from kernelscope.analyze.phases import scoped_view
    from kernelscope.render.kernel_phases import KernelPhasesPanel

    x = next(x for x in Session.load(PROTON).launches if x.scopes is not None)
    return KernelPhasesPanel(scoped_view(x), x.kernel)


def _memory_transactions():
    from kernelscope.analyze.counters import transactions
    from kernelscope.render.counter_panels import MemoryTransactionsPanel

    x = next(x for x in Session.load(RUN1).launches if x.counters and x.kernel == "matmul_kernel")
    return MemoryTransactionsPanel(transactions(x), "matmul_kernel")


def _occupancy():
    from kernelscope.analyze.occupancy import theoretical_occupancy
    from kernelscope.render.occupancy_view import OccupancyView

    return OccupancyView(theoretical_occupancy("sm_90", 384, 168, 232448))  # the cuDNN attention kernel's launch


def _top():
    from kernelscope.collect.nvml.sampler import Monitor
    from kernelscope.render.top_view import History, TopView
    from test_nvml_sampler import FakeNvml

    mon = Monitor(FakeNvml(processes=[(1234, 2 * 2**30)]))
    mon.open()
    hist = History()
    for _ in range(3):
        readings = mon.read()
        hist.add(readings)
    mon.close()
    return TopView(readings, hist)


PANELS = {"roofline_h100_analysis": _roofline, "kernel_timeline_h100_proton": _kernel_timeline,
          "memory_transactions_h100_counters": _memory_transactions, "occupancy_sm90_attention": _occupancy,
          "top_fake_nvml": _top}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", PANELS)
def test_panel_snapshots(name, width):
    panel = PANELS[name]()
    with watch_rich() as w:
        text = draw(panel, width)
    assert_nothing_cut(text, w, width)
    assert_snapshot(f"narrow_{name}.w{width}.txt", text, width)


COMMANDS = {
    "show_h100_counters": ("show", str(RUN1), "--kernel", "^matmul_kernel$", "--ceilings", str(CEILINGS)),
    "show_h100_analysis_timeline": ("show", str(ANALYSIS), "--top", "0", "--timeline", "30",
                                    "--ceilings", str(CEILINGS)),
    "diff_h100_two_recordings": ("diff", str(RUN1), str(RUN2)),
    "learn_marlin_h100": ("learn", "marlin", "--session", str(MARLIN)),
}


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("name", COMMANDS)
def test_command_snapshots(name, width, monkeypatch):
    if name.startswith("learn"):  # packing the real layer's weights needs torch and numpy
        pytest.importorskip("torch")
        pytest.importorskip("numpy")
    monkeypatch.chdir(ROOT)  # the paths the output names are relative to the checkout
    args = [a.replace(str(ROOT) + "/", "") for a in COMMANDS[name]]
    text, _ = cli(*args, width=width)
    assert_snapshot(f"narrow_{name}.w{width}.txt", text, width)


def test_the_numbers_cut_before_are_whole_at_80_columns():
    """The cuts the issue reported: memory transactions, diff, roofline intensity, kernel phases, learn's hex words."""
    text, _ = cli("show", str(RUN1), "--kernel", "^matmul_kernel$", width=80)
    assert "524,288" in text and "8,388,608" in text  # requests and sectors of the matmul's global loads
    diff, _ = cli("diff", str(RUN1), str(RUN2), width=80)
    assert "29.49 µs" in diff and "-0.2%" in diff and "memory → unknown" in diff
    roof = draw(_roofline(), 80)
    assert " 585 " in roof  # the cuDNN attention kernel's FLOP/byte


def test_learn_hex_words_are_whole_at_80_columns():
    pytest.importorskip("torch")  # packing the real layer's weights needs torch and numpy
    pytest.importorskip("numpy")
    learn, _ = cli("learn", "marlin", "--session", str(MARLIN), width=80)
    assert "0xca76976b" in learn and "0x000f000f" in learn  # the word followed, and the LO mask


# -- kernels that share a short name, the +N of Grid / Block ------------------------------------

def test_kernels_with_the_same_short_name_are_told_apart_only_when_needed():
    s = Session.load(RUN1)
    labels = distinct_short_names(x.kernel for x in s.launches)
    reduce = sorted(v for k, v in labels.items() if "reduce_kernel" in k)
    assert reduce == ["reduce_kernel (MaxNanFunctor)", "reduce_kernel (sum_functor)"]
    assert labels[next(k for k in labels if "matmul_kernel" in k)] == "matmul_kernel"  # unique: no suffix
    assert len(set(labels.values())) == len(labels)
    text, _ = cli("show", str(RUN1), "--all-kernels", width=160)
    table = text[text.index("Kernels by total GPU time"):text.index("Kernel configuration")]
    assert "reduce_kernel (MaxNanFunctor)" in table and "reduce_kernel (sum_functor)" in table
    assert "matmul_kernel (" not in table


def test_names_that_differ_only_in_numbers_or_not_at_all_in_words():
    a = "void k<128, float>(float*)"
    b = "void k<256, float>(float*)"
    assert distinct_short_names([a, b]) == {a: "k (128)", b: "k (256)"}
    c, d = "k(int)", "k(int) "  # the same words: told apart by their order
    assert distinct_short_names([c, d]) == {c: "k (#1)", d: "k (#2)"}


def test_plus_n_in_grid_block_is_explained_when_it_appears():
    text, _ = cli("show", str(ANALYSIS), width=120)  # three kernels ran with two launch configurations
    assert "16384 / 128 +1" in text
    assert "+N: the kernel also ran with N other launch configurations" in text
    plain, _ = cli("show", str(RUN1), width=120)  # one configuration per kernel: no +N, no footnote
    assert " +1" not in plain and "+N:" not in plain


# -- show / diff --ceilings FILE ------------------------------------------------------------------

def test_show_with_a_ceilings_file_uses_it_without_a_cache(tmp_path):
    r = run_cli("show", str(ANALYSIS), "--kernel", "cudnn", "--ceilings", str(CEILINGS), "--width", "120",
                "--no-color", env={"KERNELSCOPE_CACHE_DIR": str(tmp_path)})  # an empty cache
    assert r.returncode == 0, r.stderr
    assert "of the compute roof" in r.stdout and "ceilings_h100.json" in r.stdout
    assert "warning" not in r.stderr  # the same GPU, driver and clock as the session
    none = run_cli("show", str(ANALYSIS), "--kernel", "cudnn", "--width", "120", "--no-color",
                   env={"KERNELSCOPE_CACHE_DIR": str(tmp_path)})
    assert "of the compute roof" not in none.stdout


def test_a_ceilings_file_of_another_gpu_is_used_with_a_visible_note(tmp_path):
    doc = json.loads(CEILINGS.read_text())
    doc["key"]["device_name"] = "NVIDIA A100-SXM4-80GB"
    other = tmp_path / "a100.json"
    other.write_text(json.dumps(doc))
    r = run_cli("show", str(ANALYSIS), "--ceilings", str(other), "--width", "120", "--no-color",
                env={"KERNELSCOPE_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    said = "measured on NVIDIA A100-SXM4-80GB, but the session ran on NVIDIA H100 80GB HBM3"
    assert said in r.stderr and "warning" in r.stderr
    assert said in " ".join(line.strip("│ ") for line in r.stdout.splitlines())  # in the roofs' source too
    doc["key"]["device_name"], doc["key"]["driver_version"] = "NVIDIA H100 80GB HBM3", "550.54.15"
    other.write_text(json.dumps(doc))
    d = run_cli("diff", str(RUN1), str(RUN2), "--ceilings", str(other), "--no-color")
    assert d.returncode == 0 and "driver 550.54.15 vs the session's 580.159.04" in d.stderr


@pytest.mark.parametrize("content,phrase", [
    (None, "no such ceilings file"),
    ("not json", "is not a kernelscope ceilings file"),
    ('{"format": "something-else"}', "is not a version-1 kernelscope ceilings file"),
    ('{"format": "kernelscope-ceilings", "version": 1, "key": {}}', "is a damaged ceilings file"),
])
@pytest.mark.parametrize("command", ["show", "diff"])
def test_a_bad_ceilings_file_is_one_sentence_and_exit_2(tmp_path, content, phrase, command):
    path = tmp_path / "c.json"
    if content is not None:
        path.write_text(content)
    files = [str(ANALYSIS)] if command == "show" else [str(RUN1), str(RUN2)]
    r = run_cli(command, *files, "--ceilings", str(path))
    assert phrase in one_sentence_error(r)
