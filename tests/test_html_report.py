"""`kernelscope report`: the HTML page holds the numbers `show` prints, escapes every session string,
stays aggregated on 100,000 launches, and follows the output-file conventions. (In a real browser:
test_html_browser.py.)"""
from __future__ import annotations

import html
import re

import pytest

from conftest import run_cli
from html_fixtures import DATA, SCRIPT, hostile, many_launches, recorded
from kernelscope.analyze.report import build_report
from kernelscope.render.html import render_html

RANKS = DATA / "ranks" / "session_h200x2_run_torchrun.json.gz"
BANK = DATA / "diagnosis" / "bank_conflicts_defect.json.gz"  # one finding without a kernel-time estimate

NUM = re.compile(r"\d(?:[\d,]*\d)?(?:\.\d+)?")
# what only the terminal's character pictures print: axis labels of the text roofline, the width of one text
# column, how much of a long name or of the timeline it left out (the page shows the full name; its table says
# "first N of M")
TERMINAL_ONLY = ("more characters: show --json", "FLOP/s │", "one column =", "more rows (show --timeline")
SESSIONS = sorted(p.name for p in DATA.glob("session_h100_*.json.gz")) + ["ranks/session_h200x2_run_torchrun.json.gz"]



def page_text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


@pytest.mark.parametrize("name", SESSIONS)
def test_every_number_show_prints_is_in_the_page(name: str) -> None:
    term = run_cli("show", str(DATA / name), "--no-color", "--width", "250", "--timeline", "200").stdout
    numbers = set(NUM.findall(page_text(render_html(build_report(recorded(name))))))
    missing = [(n, line.strip()[:120]) for line in term.splitlines() if not any(t in line for t in TERMINAL_ONLY)
               for n in NUM.findall(line) if n not in numbers and len(n) < 20]  # longer: the SM strips' digits
    assert not missing, missing[:10]


def test_multi_rank_report_has_the_ranks_and_collectives_panels() -> None:
    """A two-rank session's page holds the Ranks and Collectives sections show draws, with their numbers and the
    run's straggler, and links to them; a one-rank session's page has neither."""
    name = "ranks/session_h200x2_run_torchrun.json.gz"
    term = run_cli("show", str(DATA / name), "--no-color", "--width", "250", "--all-kernels").stdout
    page = render_html(build_report(recorded(name)))
    text = page_text(page)
    assert 'id="ranks"' in page and 'id="collectives"' in page
    assert 'href="#ranks"' in page and 'href="#collectives"' in page
    panels = term[term.index("Ranks ("):]
    assert "Collectives (24)" in panels and "Collectives (24)" in text
    numbers = set(NUM.findall(text))
    missing = [(n, line.strip()[:120]) for line in panels.splitlines() for n in NUM.findall(line) if n not in numbers]
    assert not missing, missing[:10]
    straggler = next(line for line in panels.splitlines() if "straggler of the run" in line)
    assert "straggler of the run: rank 1, last to arrive at 7 of 24 collectives" in straggler
    assert "straggler of the run: rank 1, last to arrive at 7 of 24 collectives" in text
    one = render_html(build_report(recorded("session_h100_samples.json.gz")))
    assert 'id="ranks"' not in one and 'id="collectives"' not in one


def test_session_strings_are_text_never_markup() -> None:
    page = render_html(build_report(hostile()))
    assert "<script" not in page.lower()
    assert html.escape(SCRIPT) in page  # shown, as text
    assert page.count(html.escape(SCRIPT)) >= 3  # the kernel table, the kernel's panels, the command


def test_escaping_inside_attributes_and_svg() -> None:
    s = hostile()
    quote = 'a"b\' onmouseover="x'
    import dataclasses

    s = dataclasses.replace(s, launches=[dataclasses.replace(x, kernel=x.kernel.replace(SCRIPT, quote))
                                         for x in s.launches])
    page = render_html(build_report(s))
    assert 'onmouseover="x' not in page and "&quot;" in page


def _elements(page: str) -> int:
    return page.count("<")


@pytest.mark.slow
def test_page_is_aggregated_on_100k_launches() -> None:
    small, big = many_launches(10_000), many_launches(100_000)
    page = render_html(build_report(big))
    assert len(big.launches) == 100_000
    assert "100,000 launches" in page_text(page)  # the table's title counts them all
    # no element per launch: per-kernel rows, lanes of at most TIMELINE_COLUMNS runs, the timeline table's first
    # rows; ten times the launches add only the runs a busier lane breaks into (3,948 and 5,588 elements measured)
    from kernelscope.render.html.session import TIMELINE_COLUMNS, TIMELINE_LANES

    bound = 4_000 + (TIMELINE_LANES + 2) * TIMELINE_COLUMNS
    assert _elements(render_html(build_report(small))) < bound and _elements(page) < bound
    assert len(page) < 1_000_000


def test_cli_writes_refuses_and_overwrites_with_f(tmp_path) -> None:
    out = tmp_path / "r.html"
    src = str(DATA / "session_h100_proton.json.gz")
    r = run_cli("report", src, "-o", str(out))
    assert r.returncode == 0, r.stderr
    assert out.read_text().startswith("<!DOCTYPE html>")
    first = out.stat().st_mtime_ns
    r = run_cli("report", src, "-o", str(out))
    assert r.returncode == 2 and "exists" in r.stderr and "Traceback" not in r.stderr
    assert out.stat().st_mtime_ns == first
    r = run_cli("report", src, "-o", str(out), "-f", "--panels", "1")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("args, said", [
    (["--kernel", "("], "not a valid regular expression"),
    (["--kernel", "no_such_kernel_xyz"], "no kernel matches"),
])
def test_cli_bad_selection_is_one_sentence(tmp_path, args, said) -> None:
    r = run_cli("report", str(DATA / "session_h100_proton.json.gz"), "-o", str(tmp_path / "r.html"), *args)
    assert r.returncode == 2 and said in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "r.html").exists()


def test_cli_never_overwrites_its_input(tmp_path) -> None:
    src = tmp_path / "s.json.gz"
    src.write_bytes((DATA / "session_h100_proton.json.gz").read_bytes())
    r = run_cli("report", str(src), "-o", str(src), "-f")
    assert r.returncode == 2 and "Traceback" not in r.stderr


def test_svg_strip_labels_are_whole_up_to_the_label_column_limit() -> None:
    """The label column is as wide as its longest label (the SM layout's '… 121 more full waves' was clipped at
    the left edge); past MAX_LABEL_PX a label is cut and its whole text kept as the tooltip."""
    from kernelscope.render.html.charts import MAX_LABEL_PX, strips, text_px

    short = "… 121 more full waves"
    page = strips([(short, [], ""), ("wave 1", [1, 1], "2,112 of 2,112 slots")], {1: "#000"})
    assert f">{short}</text>" in page
    name = "sm90_xmma_gemm_" + "x" * 100
    assert text_px(name) > MAX_LABEL_PX
    page = strips([(name, [1], "")], {1: "#000"})
    assert f"<title>{name}</title>" in page and f">{name}</text>" not in page and "…</text>" in page


def test_roofline_draws_every_roof_inside_the_plot() -> None:
    """A roof far under the top one (fp32 FMA under the tensor-core roofs) was drawn below the plot's frame."""
    from kernelscope.render.html.charts import roofline

    page = roofline([("1", 500.0, 5e14)], 3e12, [("bf16 matmul", 7.9e14), ("fp16 matmul", 7.5e14),
                                                 ("fp32 FMA", 6.6e13)], lambda v, u: f"{v:g} {u}")
    frame = re.search(r'<rect x="(\d+)" y="(\d+)" width="(\d+)" height="(\d+)"', page)
    top, bottom = int(frame[2]), int(frame[2]) + int(frame[4])
    roof_line = r'<line x1="[\d.]+" x2="[\d.]+" y1="([\d.]+)" y2="\1" stroke="#344054"'
    roofs = [float(y) for y in re.findall(roof_line, page)]
    assert len(roofs) == 3 and all(top <= y <= bottom for y in roofs), (roofs, top, bottom)
    labels = sorted(float(y) for y in re.findall(r'<text x="[\d.]+" y="([\d.]+)" text-anchor="end">\w+ matmul', page))
    assert len(labels) == 2 and labels[1] - labels[0] >= 11  # two close roofs: their labels do not overlap


def test_html_sections_carry_no_panel_numbers(tmp_path):
    out = tmp_path / "r.html"
    assert run_cli("report", str(BANK), "-o", str(out)).returncode == 0
    page = out.read_text()
    titles = re.findall(r"<h2[^>]*>([^<]*)</h2>", page)
    assert any(t.startswith("Kernel configuration") for t in titles)
    assert not [t for t in titles if re.match(r"\d+ · ", t)], titles


def test_html_verdict_names_are_text_not_numbers(tmp_path):
    # '15 other kernels' starts with a digit: as a number cell it was right-aligned and never wrapped, and ran
    # past the card on a phone-wide page
    out = tmp_path / "r.html"
    assert run_cli("report", str(RANKS), "-o", str(out), "--panels", "0").returncode == 0
    page = out.read_text()
    assert "<td>15 other kernels</td>" in page and "<td>7 other regions</td>" in page
    assert 'class="n">15 other kernels' not in page
