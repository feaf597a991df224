"""Hot lines over the whole defect suite (issue 39): the reports record_source.sh recorded on an H100 on 2026-11-26
(tests/data/source/: every located case, defect and fixed, a CUDA case built without -lineinfo, one W4A16 launch),
scored by benchmarks/diagnosis/source_score.py; the bad-input sentences; learn marlin's hot lines."""
from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from conftest import DATA, ROOT

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SOURCE = DATA / "source"


@pytest.fixture(scope="module")
def scored():
    pytest.importorskip("ncu_report", reason="the ncu-report package reads .ncu-rep files (pip install ncu-report)")
    from benchmarks.diagnosis.source_score import score_dir

    return score_dir(SOURCE)


def _load(name: str, tmp_path: Path):
    pytest.importorskip("ncu_report")
    from benchmarks.diagnosis.source_score import load_report

    return load_report(SOURCE / f"{name}.ncu-rep.xz", tmp_path)


def _finding(session, rule_id: str):
    from benchmarks.diagnosis.source_score import DEFAULT_CEILINGS
    from kernelscope.analyze.analysis import analyze_session
    from kernelscope.analyze.roofline import Ceilings
    from kernelscope.collect.calibrate.ceilings import load_calibration

    cal = load_calibration(DEFAULT_CEILINGS)
    x = session.detailed_launches()[0]
    a = analyze_session(session, Ceilings.from_metrics(cal.ceilings, DEFAULT_CEILINGS.name)).kernel(x.kernel)
    return next(r.finding for r in a.recommendations.recommendations if r.finding.rule == rule_id)


@pytest.mark.slow
def test_planted_line_is_the_hottest_or_named_in_at_least_90_percent_and_fixed_twins_move_or_fall(scored):
    from benchmarks.diagnosis.source_score import TARGET_HIT_PCT, summary
    from benchmarks.diagnosis.suite.config import CASE_BY_NAME

    rows, facts = scored
    s = summary(rows)
    assert s["defect_cases"] == s["fixed_twins"] == 11
    assert s["planted_line_found_pct"] >= TARGET_HIT_PCT and s["fixed_twin_pass_pct"] >= TARGET_HIT_PCT
    assert all(r.planted and r.error is None for r in rows)  # every case's marker was in the report's own text
    assert {r.case for r in rows} == {c for c in CASE_BY_NAME if (SOURCE / f"{c}_defect.ncu-rep.xz").exists()}
    for r in rows:
        if r.variant == "defect":  # the expected rule fired and the planted lines carry its count
            assert r.fired and r.rule_count_planted > 0, r
    assert facts["devices"] == ["NVIDIA H100 80GB HBM3"] and facts["dates"] == ["2026-11-26"]


@pytest.mark.slow
def test_results_md_holds_the_table_the_scorer_writes(scored):
    from benchmarks.diagnosis.source_score import BEGIN, END, RESULTS, table_md

    text = RESULTS.read_text()
    assert f"{BEGIN}\n{table_md(*scored)}{END}\n" in text


def test_divergence_finding_names_both_paths_with_half_the_lanes_active(tmp_path):
    session, texts, _ = _load("divergence_defect", tmp_path)
    f = _finding(session, "thread-divergence")
    named = [(k, v) for k, v in f.evidence if k.startswith("32 x inst_executed - thread_inst_executed at ")]
    assert [k.rsplit(":", 1)[1] for k, _ in named[:2]] in (["71", "73"], ["73", "71"])
    assert "// planted: divergence` (50% of the idle lane slots, 16.0 active threads per instruction" in f.message
    src = session.detailed_launches()[0].source_lines
    paths = [ln for ln in src.lines if ln.line in (71, 73)]
    from kernelscope.analyze.source_lines import active_threads, rule_count

    for ln in paths:  # the formula, from the line's own counts
        assert rule_count(ln, "thread-divergence") == 32 * ln.counts["inst_executed"] - ln.counts[
            "thread_inst_executed"]
        assert active_threads(ln.counts) == 16.0
    from kernelscope.analyze.source_lines import rank_lines
    from kernelscope.render.source_view import excess_text

    kl = rank_lines("parity_paths", 0, src)
    shown = {r.line.line: excess_text(r) for r in kl.hot}
    assert shown[71] == shown[73] == "16.0 of 32 lanes active"  # what show --source and the HTML report draw
    assert all("lanes active" not in t for n, t in shown.items() if n not in (71, 73))
    fixed, _, _ = _load("divergence_fixed", tmp_path)
    same = [ln for ln in fixed.detailed_launches()[0].source_lines.lines if ln.line in (71, 73)]
    assert same and all(rule_count(ln, "thread-divergence") == 0 for ln in same)


def test_a_kernel_without_line_information_says_how_to_get_lines_and_names_sass(tmp_path, capsys):
    session, texts, _ = _load("bank_conflicts_defect_nolineinfo", tmp_path)
    src = session.detailed_launches()[0].source_lines
    assert texts == {} and [(ln.file, ln.line) for ln in src.lines] == [(None, 0)]
    assert "no line information" in src.note and "-lineinfo" in src.note
    f = _finding(session, "shared-bank-conflicts")
    assert "Instructions (the kernel has no line information; build it with -lineinfo to see source lines): +" in (
        f.message)
    assert "`LDS " in f.message
    session.save(tmp_path / "n.json")
    from kernelscope.cli import main

    assert main(["show", str(tmp_path / "n.json"), "--source", "--sass", "--width", "140", "--no-color"]) == 0
    out = capsys.readouterr().out
    one = " ".join(out.split())
    assert "this kernel has no line information (a CUDA binary needs -lineinfo;" in one
    assert "(SASS only)" in out and "LDS R7, [R10]" in out


def test_a_source_file_changed_since_the_run_is_said_and_the_stored_text_drawn(tmp_path, capsys):
    session, _, _ = _load("uncoalesced_defect", tmp_path)
    src = session.detailed_launches()[0].source_lines
    here = tmp_path / "triton_kernels.py"
    here.write_text("# edited since the run\n")
    src.files[0].path = str(here)  # the kernel's file, as if on this machine, now with other text
    session.save(tmp_path / "u.json")
    from kernelscope.cli import main

    assert main(["show", str(tmp_path / "u.json"), "--source", "--width", "200", "--no-color", "--read-sources"]) == 0
    out = capsys.readouterr().out
    assert f"{here} changed since the run (its checksum differs): the text shown is the run's" in out
    assert "x = tl.load(x_ptr + off, mask=mask)  # planted: uncoalesced" in out
    assert main(["show", str(tmp_path / "u.json"), "--read-sources", "--json"]) == 0  # show --json's hot lines
    notes = json.loads(capsys.readouterr().out)["source_lines"][0]["notes"]
    assert any(n.startswith(f"{here} changed since the run") for n in notes)


def _named_paths_session(tmp_path: Path):
    """A session whose source files are named as a hostile sender could: a FIFO, /dev/zero, a file over the
    input limit (sparse: no disk used), and a regular file edited since the run."""
    import os

    session, _, _ = _load("uncoalesced_defect", tmp_path)
    files = session.detailed_launches()[0].source_lines.files
    fifo, big, edited = tmp_path / "fifo.py", tmp_path / "big.py", tmp_path / "edited.py"
    os.mkfifo(fifo)
    with open(big, "wb") as f:
        f.truncate(3 << 20)
    edited.write_text("# edited since the run\n")
    paths = [str(fifo), "/dev/zero", str(big), str(edited)]
    files[:] = [type(files[0])(path, files[0].sha256, files[0].line_count, dict(files[0].excerpt)) for path in paths]
    session.save(tmp_path / "named.json")
    return tmp_path / "named.json", paths


def test_no_command_opens_a_path_the_session_names_without_read_sources(tmp_path, capsys, monkeypatch):
    """show (plain, --json, --brief, --source) and report of a session naming a FIFO, /dev/zero, a large
    file and an edited one open none of them (an open of one is recorded and refused, so the old code cannot
    hang here)."""
    import builtins
    import os
    import pathlib

    session_path, paths = _named_paths_session(tmp_path)
    opened: list[str] = []

    def spy(real):
        def open_(file, *a, **k):
            if str(file) in paths:
                opened.append(str(file))
                raise PermissionError(13, "refused by the test", str(file))
            return real(file, *a, **k)
        return open_

    monkeypatch.setattr(os, "open", spy(os.open))
    monkeypatch.setattr(builtins, "open", spy(builtins.open))
    monkeypatch.setattr(pathlib.Path, "open", lambda self, *a, **k: spy(io.open)(self, *a, **k))
    from kernelscope.cli import main

    s = str(session_path)
    for argv in (["show", s], ["show", s, "--json"], ["show", s, "--brief"], ["show", s, "--source"],
                 ["report", s, "-o", str(tmp_path / "r.html")]):
        assert main(argv) == 0, argv
        assert "changed since the run" not in capsys.readouterr().out, argv
    assert opened == []


def test_read_sources_reads_only_regular_files_within_the_input_limit(tmp_path, capsys, monkeypatch):
    """Time: one show of a 1-launch session; memory: the 3 MiB file is refused from its stat, never read."""
    monkeypatch.setenv("KERNELSCOPE_MAX_INPUT_MB", "1")
    session_path, paths = _named_paths_session(tmp_path)
    from kernelscope.cli import main

    assert main(["show", str(session_path), "--source", "--read-sources", "--width", "300", "--no-color"]) == 0
    got = capsys.readouterr()
    out, err = " ".join(got.out.split()), " ".join(got.err.split())
    assert f"{paths[3]} changed since the run (its checksum differs)" in out
    assert f"{paths[0]} is a FIFO (named pipe), not a regular file" in err
    assert "/dev/zero is a character device, not a regular file" in err
    assert f"{paths[2]} holds more than 1 MiB, the input limit" in err
    assert err.count("it was not read") == 3 and "changed since" not in out.replace(paths[3] + " changed", "")


def test_learn_hot_lines_without_a_gpu_are_the_bundled_h100_pass(tmp_path):
    """The bundled file is `kernelscope import` of the checked-in W4A16 report; its hot lines carry the unpack,
    the MMA and the loads, labelled by their SASS."""
    pytest.importorskip("torch")
    from kernelscope.cli.learn_hot_lines import bundled_session, hot_lines_parts
    from kernelscope.kernels.marlin.walkthrough import GemmPlan
    from kernelscope.render.console import make_console

    recorded, _, _ = _load("w4a16_learn", tmp_path)
    bundled = bundled_session()
    got, want = bundled.detailed_launches()[0].source_lines, recorded.detailed_launches()[0].source_lines
    assert got.lines == want.lines and [f.sha256 for f in got.files] == [f.sha256 for f in want.files]
    import hashlib

    import kernelscope

    gemm = Path(kernelscope.__file__).parent / "kernels" / "marlin" / "gemm.py"
    kernel_file = next(f for f in got.files if f.path.endswith("gemm.py"))
    assert Path(kernel_file.path).resolve() == gemm.resolve()  # this installation's copy of the shipped kernel
    changed = hashlib.sha256(gemm.read_bytes()).hexdigest() != kernel_file.sha256
    plan = GemmPlan(16, 8192, 8192)
    buf = io.StringIO()
    console = make_console(width=200, file=buf, color=False)
    for part in hot_lines_parts(plan, live=False, bundled_plan=plan):
        console.print(part)
    out = buf.getvalue()
    assert out.startswith("Hot lines below: an Nsight Compute counter pass of one launch of this kernel at this "
                          "shape, recorded on NVIDIA H100 80GB HBM3 on 2026-11-26 and bundled with kernelscope.")
    assert (f"{kernel_file.path} changed since the run (its checksum differs)" in " ".join(out.split())) == changed
    for phase, code in (("MMA (HGMMA)", "tl.dot("), ("unpack (LOP3", "inline_asm_elementwise(_UNPACK"),
                        ("loads (UTMALDG)", "b_ptr.load(")):
        assert any(phase in row and code in row for row in out.splitlines()), phase
    other = hot_lines_parts(GemmPlan(32, 8192, 8192), live=False, bundled_plan=plan)
    assert len(other) == 1 and "the bundled counter pass is of m=16, k=8192, n=8192 only." in str(other[0])


def test_learn_live_pass_that_cannot_run_falls_back_with_one_sentence(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    from kernelscope.cli import learn_hot_lines
    from kernelscope.kernels.marlin.walkthrough import GemmPlan

    monkeypatch.setenv("PATH", str(tmp_path))  # no ncu here: the pass fails before anything runs
    plan = GemmPlan(16, 8192, 8192)
    parts = learn_hot_lines.hot_lines_parts(plan, live=True, bundled_plan=plan)
    note = str(parts[0])
    assert note.endswith(").") and "; the live pass did not run (ncu (Nsight Compute) is not on PATH" in note


def test_show_source_json_names_the_divergence_count_metric(tmp_path, capsys):
    session, _, _ = _load("divergence_lane4_defect", tmp_path)
    session.save(tmp_path / "d.json")
    from kernelscope.cli import main

    assert main(["show", str(tmp_path / "d.json"), "--source", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)["source_lines"][0]
    assert doc["count_metrics"]["thread_inst_executed"] == "thread_inst_executed"
    hot = {h["line"]: h["counts"] for h in doc["hot"]}
    paths = [n for n in (225, 228, 231, 234) if n in hot]  # the four paths, each run with 8 of 32 lanes
    assert len(paths) >= 2 and all(hot[n]["thread_inst_executed"] / hot[n]["inst_executed"] == 8.0 for n in paths)
