"""Hot lines (issue 39): per-source-line counters read from recorded Nsight Compute reports (H100, ncu 2025.3.1,
SourceCounters + WarpStateStats, source imported; tests/data/source/), saved in the session, ranked, drawn."""
from __future__ import annotations

import io
import json
import lzma
import sys
import types
from pathlib import Path

import pytest

from conftest import DATA, run_cli
from kernelscope.analyze.source_lines import rank_lines
from kernelscope.model import Session

CASES = ("uncoalesced_defect", "uncoalesced_fixed", "bank_conflicts_defect", "bank_conflicts_fixed",
         "local_memory_defect", "fma_matmul_defect")


def _rep(name: str, where: Path) -> Path:
    out = where / f"{name}.ncu-rep"
    out.write_bytes(lzma.decompress((DATA / "source" / f"{name}.ncu-rep.xz").read_bytes()))
    return out


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    pytest.importorskip("ncu_report", reason="the ncu-report package reads .ncu-rep files (pip install ncu-report)")
    from kernelscope.collect.ncu.report_reader import read_report

    where = tmp_path_factory.mktemp("source")
    return {name: read_report(_rep(name, where)).kernels[0] for name in CASES}


def _line(k, text: str):
    """The line of the kernel's source whose kept text contains ``text`` (found by text, not by number)."""
    src = k.source_lines
    found = [ln for ln in src.lines if text in (src.text(ln) or "")]
    assert len(found) == 1, [src.text(ln) for ln in src.lines]
    return found[0]


def test_uncoalesced_load_has_the_most_excess_sectors_and_the_fixed_twin_none(reports):
    k = reports["uncoalesced_defect"]
    kl = rank_lines(k.name, 0, k.source_lines)
    load = _line(k, "x = tl.load(x_ptr + off, mask=mask)")
    assert kl.by_excess[0].line is load  # tied with the store (also column order), the load ranks first
    assert load.counts["global_sectors"] == 33_554_432 and load.counts["global_sectors_ideal"] == 4_194_304
    assert load.counts["global_sectors_excessive"] == 29_360_128 == max(r.excess_sectors or 0 for r in kl.hot)
    # the two column-order lines hold 95% of the warp samples: the store 49.7%, the load 45.4%
    assert [r.line.line for r in kl.hot[:2]] == [26, 25]
    assert round(kl.hot[1].sample_share, 3) == 0.454 and round(kl.hot[0].sample_share, 3) == 0.497
    fixed = _line(reports["uncoalesced_fixed"], "x = tl.load(x_ptr + off, mask=mask)")
    assert fixed.counts["global_sectors_excessive"] == 0
    assert fixed.counts["global_sectors"] == fixed.counts["global_sectors_ideal"] == 4_194_304


def test_bank_conflicts_the_transposed_shared_read_and_its_padded_twin(reports):
    k = reports["bank_conflicts_defect"]
    kl = rank_lines(k.name, 0, k.source_lines)
    read = _line(k, "= tile[threadIdx.x][threadIdx.y + j]")
    assert [r.line for r in kl.by_excess] == [read]  # the only line with excess traffic
    assert read.counts["shared_conflicts_nway"] == 32
    assert read.counts["shared_wavefronts"] == 67_108_864 and read.counts["shared_wavefronts_ideal"] == 2_097_152
    fixed = _line(reports["bank_conflicts_fixed"], "= tile[threadIdx.x][threadIdx.y + j]")
    assert fixed.counts["shared_conflicts_nway"] == 1 and fixed.counts["shared_wavefronts_excessive"] == 0
    assert fixed.counts["shared_wavefronts"] == fixed.counts["shared_wavefronts_ideal"]


def test_local_memory_lines_are_the_array_writes_and_the_dynamic_read(reports):
    k = reports["local_memory_defect"]
    kl = rank_lines(k.name, 0, k.source_lines)
    local = {r.line.line for r in kl.by_excess}
    write, read = _line(k, "a[j] = x["), _line(k, "a[(j + shift) % LOCAL_K]")
    assert local == {write.line, read.line}
    assert write.counts["local_sectors"] == read.counts["local_sectors"] == 8_388_608
    assert kl.hot[0].line is write and round(kl.hot[0].sample_share, 3) == 0.622
    assert any("LDL" in i.sass for i in read.instructions) and any("STL" in i.sass for i in write.instructions)
    assert kl.hot[0].stalls[0][0] == "long_scoreboard"


def test_fma_matmul_the_ffma_line_is_third_behind_the_operand_loads(reports):
    k = reports["fma_matmul_defect"]
    kl = rank_lines(k.name, 0, k.source_lines)
    ffma = _line(k, "acc += a[:, None] * b[None, :]")
    assert all(i.sass.startswith("FFMA") for i in ffma.instructions)
    assert [round(r.sample_share, 3) for r in kl.hot[:3]] == [0.428, 0.411, 0.126] and kl.hot[2].line is ffma
    assert "tl.load" in kl.hot[0].text and "tl.load" in kl.hot[1].text


def test_every_instruction_sits_under_one_line_and_line_counts_are_their_sums(reports):
    for name, k in reports.items():
        src = k.source_lines
        assert src is not None and src.note is None and len(src.files) == 1, name
        assert src.files[0].sha256 and len(src.files[0].sha256) == 64
        for ln in src.lines:
            assert ln.counts.get("samples", 0) == sum(i.counts.get("samples", 0) for i in ln.instructions)
            assert ln.counts.get("inst_executed", 0) == sum(i.counts.get("inst_executed", 0) for i in ln.instructions)
            assert sum(ln.stalls.values()) <= ln.counts.get("samples", 0) * 1.0001 + 1e-9 or name


def test_source_lines_survive_save_and_load_and_a_bad_part_is_skipped(reports, tmp_path):
    from kernelscope.collect.ncu.merge import launch_from_result

    k = reports["bank_conflicts_defect"]
    s = Session(launches=[launch_from_result(k)])
    s.save(tmp_path / "s.json")
    back = Session.load(tmp_path / "s.json").detailed_launches()[0].source_lines
    assert back == k.source_lines
    doc = json.loads((tmp_path / "s.json").read_text())
    doc["launch_details"][0]["source_lines"]["lines"][0]["file"] = 7  # no such file
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    bad = Session.load(tmp_path / "bad.json")
    assert bad.detailed_launches()[0].source_lines is None
    assert any("source_lines" in p and "file indices" in p for p in bad.skipped_on_load)
    doc["launch_details"][0]["source_lines"]["lines"][0]["file"] = 0
    doc["launch_details"][0]["source_lines"]["files"][0]["excerpt"] = {str(i): "x" for i in range(1, 2002)}
    (tmp_path / "big.json").write_text(json.dumps(doc))
    big = Session.load(tmp_path / "big.json")
    assert big.detailed_launches()[0].source_lines is None and big.detailed_launches()[0].counters


def test_a_kernel_without_line_information_keeps_sass_and_says_why():
    from kernelscope.collect.ncu.source_lines import read_source_lines

    values = {"inst_executed": {0x1000: 4.0, 0x1010: 8.0}, "smsp__pcsamp_sample_count": {0x1000: 3.0, 0x1010: 1.0}}
    assert read_source_lines(types.SimpleNamespace(metric_by_name=lambda n: None)) is None

    class Metric:
        def __init__(self, d):
            self.pcs, self.v = list(d), list(d.values())

        def num_instances(self):
            return len(self.v)

        def correlation_ids(self):
            return types.SimpleNamespace(as_uint64=lambda i: self.pcs[i])

        def as_double(self, i):
            return self.v[i]

    action = types.SimpleNamespace(
        metric_by_name=lambda n: Metric(values[n]) if n in values else None, metric_names=lambda: list(values),
        source_files=lambda: {}, source_info=lambda pc: None, sass_by_pc=lambda pc: f"  IADD3 R{pc:x}")
    src = read_source_lines(action)
    assert [(ln.file, ln.line, ln.counts) for ln in src.lines] == [(None, 0, {"inst_executed": 12.0, "samples": 4.0})]
    assert [(i.pc_offset, i.sass) for i in src.lines[0].instructions] == [(0, "IADD3 R1000"), (16, "IADD3 R1010")]
    assert "no line information" in src.note and "-lineinfo" in src.note


def _cli(*argv) -> str:
    r = run_cli(*argv)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_import_and_show_source_at_a_fixed_width(tmp_path):
    pytest.importorskip("ncu_report")
    rep = _rep("uncoalesced_defect", tmp_path)
    _cli("import", str(rep), "-o", str(tmp_path / "u.json"))
    out = _cli("show", str(tmp_path / "u.json"), "--source", "--kernel", "scale", "--width", "140",
               "--no-color")
    rows = [r for r in out.splitlines() if "x = tl.load(x_ptr + off, mask=mask)" in r]
    assert len(rows) == 2  # among the hottest lines and first of the excess-traffic lines
    assert all("   25    45.4%  lg_throttle 51%, mio_throttle 45%," in r for r in rows)
    assert all("29,360,128 sectors (8.0x ideal)" in r for r in rows)
    assert "6 lines with counters; warp samples: 107,719" in out
    sass = _cli("show", str(tmp_path / "u.json"), "--source", "--sass", "--width", "140", "--no-color")
    assert "STG.E" in sass and "+0000" in sass and len(sass.splitlines()) > len(out.splitlines()) + 200
    doc = json.loads(_cli("show", str(tmp_path / "u.json"), "--source", "--json"))
    hot = doc["source_lines"][0]["hot"]
    assert hot[1]["line"] == 25 and hot[1]["counts"]["global_sectors_excessive"] == 29_360_128
    assert _cli("show", str(tmp_path / "u.json"), "--source", "--kernel", "nomatch").startswith("no launch")
    whole = json.loads(_cli("show", str(tmp_path / "u.json"), "--json"))  # plain show --json carries it
    text = whole["source_lines"][0]["hot"][1]["text"].strip()
    assert text == "x = tl.load(x_ptr + off, mask=mask)  # planted: uncoalesced"
    assert "instructions" not in whole["source_lines"][0]["hot"][0]


def test_a_source_file_changed_since_the_run_gets_one_sentence(tmp_path):
    import hashlib

    from kernelscope.analyze.source_lines import file_notes
    from kernelscope.model.source_lines import SourceFile, SourceLines

    f = tmp_path / "k.py"
    same = SourceFile(str(f), hashlib.sha256(b"x = 1\n").hexdigest(), 1, {1: "x = 1"})
    gone = SourceFile(str(tmp_path / "gone.py"), same.sha256, 1)
    read = {str(f): same.sha256}
    assert file_notes(SourceLines([same, gone]), read) == []  # unchanged, or not on this machine: nothing to say
    read[str(f)] = hashlib.sha256(b"x = 2\n").hexdigest()
    assert file_notes(SourceLines([same]), read) == [f"{f} changed since the run (its checksum differs): the text "
                                                     "shown is the run's"]
    f.write_text("x = 2\n")
    assert file_notes(SourceLines([same])) == []  # no file is read by the analysis: the caller passes what it read


def test_a_report_without_source_counters_imports_as_before_and_show_source_says_so(tmp_path):
    pytest.importorskip("ncu_report")
    from ncu_fixtures import report_file

    rep = report_file("ncu_h100_access_patterns", tmp_path)
    _cli("import", str(rep), "-o", str(tmp_path / "a.json"))
    s = Session.load(tmp_path / "a.json")
    assert s.detailed_launches() and all(x.source_lines is None for x in s.detailed_launches())
    out = _cli("show", str(tmp_path / "a.json"), "--source", "--width", "120", "--no-color")
    one = " ".join(out.split())  # one sentence, wrapped at the width
    assert one.startswith("no launch in this session has per-line counters") and one.endswith("--import-source yes")
    assert "Kernel" in _cli("show", str(tmp_path / "a.json"), "--width", "120", "--no-color")


def test_run_source_adds_the_source_sections_and_imports_the_source():
    from kernelscope.collect.ncu.runner import NcuOptions, build_command

    plain = build_command("ncu", Path("r.ncu-rep"), ["prog"], NcuOptions())
    src = build_command("ncu", Path("r.ncu-rep"), ["prog"], NcuOptions(source=True))
    assert "SourceCounters" not in plain and plain[plain.index("--import-source") + 1] == "no"
    assert src[src.index("--import-source") + 1] == "yes"
    sections = [src[i + 1] for i, a in enumerate(src) if a == "--section"]
    assert "SourceCounters" in sections and sections.count("WarpStateStats") == 1


@pytest.mark.parametrize("case,rule_id,text,share", [
    ("uncoalesced", "uncoalesced-global", "x = tl.load(x_ptr + off, mask=mask)", 50),
    ("bank_conflicts", "shared-bank-conflicts", "= tile[threadIdx.x][threadIdx.y + j]", 100),
    ("local_memory", "local-memory", "a[j] = x[", 50),
    ("fma_matmul", "fma-instead-of-tensor", "acc += a[:, None] * b[None, :]", 100),
])
def test_kernel_rule_findings_name_their_lines(reports, case, rule_id, text, share):
    """The defect-suite session recorded on the H100 on 2026-11-23 (the full counter pass, without --source) with
    the per-line counters of the same case's kernel recorded on 2026-11-26 put on its counter launch: the finding
    of the planted rule names the line that causes it, with its share of the rule's count and of the samples."""
    from kernelscope.analyze.analysis import analyze_session
    from kernelscope.analyze.roofline import Ceilings
    from kernelscope.analyze.source_lines import RULE_COUNTS
    from kernelscope.collect.calibrate.ceilings import load_calibration

    diag = DATA / "diagnosis"
    cal = load_calibration(diag / "ceilings.json")
    s = Session.load(diag / f"{case}_defect.json.gz")
    k = reports[f"{case}_defect"]
    profiled = [x for x in s.launches if x.counters and k.function in x.kernel]  # demangled apart: match the base
    assert profiled, [x.kernel for x in s.launches if x.counters]
    for x in profiled:
        x.source_lines = k.source_lines
    a = analyze_session(s, Ceilings.from_metrics(cal.ceilings, "ceilings.json")).kernel(profiled[0].kernel)
    found = next(r.finding for r in a.recommendations.recommendations
                 if r.source == "kernelscope" and r.finding.rule == rule_id)
    line = _line(k, text)
    where = k.source_lines.location(line)
    assert f"{where.rsplit('/', 1)[-1]} `{k.source_lines.text(line).strip()}` ({share}% of the " in found.message
    assert found.message.split(". ", 1)[1].startswith("Lines: ")  # second sentence: views that cut a message keep it
    metric = {"uncoalesced-global": "derived__memory_l2_theoretical_sectors_global_excessive",
              "shared-bank-conflicts": "derived__memory_l1_wavefronts_shared_excessive",
              "local-memory": "memory_l2_theoretical_sectors_local",
              "fma-instead-of-tensor": "inst_executed of FFMA/HFMA2/DFMA"}[rule_id]
    want = line.counts.get(RULE_COUNTS[rule_id][0], line.counts["inst_executed"])  # FFMA line: all its instructions
    assert dict(found.evidence)[f"{metric} at {where}"] == want


def test_source_text_is_drawn_escaped_never_as_markup_or_terminal_codes():
    from kernelscope.analyze.source_lines import rank_lines
    from kernelscope.model.source_lines import SassInstruction, SourceFile, SourceLine
    from kernelscope.model.source_lines import SourceLines as Lines
    from kernelscope.render.console import make_console
    from kernelscope.render.source_view import SourceView

    text = "x = a[bold]b[/bold] \x1b[31m red \u202e"
    src = Lines([SourceFile("k.py", None, 1, {1: text})],
                [SourceLine(0, 1, {"samples": 4.0}, {"long_scoreboard": 3.0},
                            [SassInstruction(0, "LDG.E R2, [R4.64]", {"samples": 4.0}, {"long_scoreboard": 3.0})])])
    out = io.StringIO()
    make_console(width=120, file=out, color=False).print(SourceView([rank_lines("k", 0, src)], sass=True))
    drawn = out.getvalue()
    assert "a[bold]b[/bold] \\x1b[31m red \\u202e" in drawn and "\x1b" not in drawn and "\u202e" not in drawn
    assert "LDG.E R2, [R4.64]" in drawn and "100.0%  long_scoreboard 75%" in drawn


def test_source_flags_need_their_companions(tmp_path):
    r = run_cli("run", "--source", "-o", str(tmp_path / "s.json"), "--", sys.executable, "-c", "pass")
    assert r.returncode == 2 and "--source needs --counters" in r.stderr and "Traceback" not in r.stderr
    s = tmp_path / "e.json"
    Session().save(s)
    r = run_cli("show", str(s), "--sass")
    assert r.returncode == 2 and "--sass needs --source" in r.stderr


def test_html_report_has_the_hot_lines_with_a_heat_column(tmp_path):
    pytest.importorskip("ncu_report")
    rep = _rep("bank_conflicts_defect", tmp_path)
    _cli("import", str(rep), "-o", str(tmp_path / "b.json"))
    from kernelscope.cli import main

    assert main(["report", str(tmp_path / "b.json"), "-o", str(tmp_path / "b.html")]) == 0
    html = (tmp_path / "b.html").read_text()
    part = html[html.index('id="source-lines"'):]
    assert '<a href="#source-lines">hot lines</a>' in html
    row = part[part.index("<td>22</td>"):].split("</tr>")[0]
    assert "<svg" in row and "35.0%" in row and "65,011,712 smem wavefronts (32-way)" in row
    assert "tile[threadIdx.x][threadIdx.y + j];  // planted: bank_conflicts</code>" in row
    assert "j &lt; 32" in row  # escaped, not markup


def test_lines_of_several_files_are_named_with_their_file(tmp_path):
    """A live `run --counters --source --kernel 'matmul_kernel|softmax_kernel'` on an H100 (2026-11-26,
    tests/workloads/counters_small.py): softmax's reductions have hot lines in triton/language/standard.py, whose
    bare numbers (191, 263) read as lines of the kernel's own file; they are drawn as file:line, terminal and HTML.
    matmul's lines are all in tiled.py and keep bare numbers."""
    path = DATA / "source" / "run_source_counters_small_h100.json.gz"
    r = run_cli("show", str(path), "--source", "--width", "160", "--no-color")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    soft = out[out.index("Hot lines: softmax_kernel"):]
    assert "standard.py:191" in soft and "tiled.py:48" in soft
    mm = out[out.index("Hot lines: matmul_kernel"):out.index("Hot lines: softmax_kernel")]
    assert "tiled.py:" not in mm.split("Hottest lines")[1] and "│   26 " in mm
    page = tmp_path / "r.html"
    assert run_cli("report", str(path), "-o", str(page)).returncode == 0
    html = page.read_text()
    assert "<td>standard.py:191</td>" in html.replace('<td class="num">', "<td>")
