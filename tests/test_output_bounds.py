"""Output that keeps its bounds whatever the session holds (issue 37): `show --timeline N` draws at most N rows,
marks included, in time linear in the marks (a million marks drew a million lines, quadratically); a name of
millions of characters is drawn shortened on the terminal and kept whole in the JSON outputs."""
from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

from conftest import DATA, draw, run_cli
from kernelscope.model import Session
from kernelscope.model.memory import Mark


@pytest.fixture(scope="module")
def marked(tmp_path_factory) -> tuple[Path, int]:
    s = Session.load(DATA / "session_h100_mixed.json.gz")
    first = min(x.start_ns for x in s.launches if x.start_ns is not None)
    last = max(x.start_ns + x.duration_ns for x in s.launches if x.start_ns is not None)
    n = 50_000
    s.marks = [Mark(f"m{i}", wall_time_ns=i, t_ns=first + (last - first) * i // n, values={"i": i})
               for i in range(n)]
    p = tmp_path_factory.mktemp("sizes") / "marks.json.gz"
    s.save(p)
    return p, len(s.launches)


@pytest.mark.slow
@pytest.mark.parametrize("limit", [20, 200])
def test_timeline_rows_and_marks_stay_within_the_limit(marked, limit):
    path, launches = marked
    code, out, err = run_cli("show", str(path), "--timeline", str(limit), "--whole-run", "--panels", "0", "--width",
                              "160", "--no-color")
    assert code == 0, err
    drawn = [ln for ln in out.splitlines() if "◆ m" in ln]
    assert 0 < len(drawn) <= limit
    more = next(ln for ln in out.splitlines() if "more rows (show --timeline N" in ln)
    assert int(more.split("…")[1].split()[0].replace(",", "")) >= 50_000 - limit  # what was left out is counted


@pytest.mark.slow
def test_the_timeline_opened_on_the_window_counts_the_marks_before_it(marked):
    """Opened on the window (the run's last few ms here), the marks before it are counted among the earlier rows,
    not dropped from every count."""
    path, _ = marked
    code, out, err = run_cli("show", str(path), "--timeline", "20", "--panels", "0", "--width", "160", "--no-color")
    assert code == 0, err
    flat = " ".join(ln.strip("│ ") for ln in out.splitlines())
    earlier = int(re.search(r"([\d,]+) earlier rows not drawn", flat).group(1).replace(",", ""))
    more = re.search(r"… ([\d,]+) more rows", flat)
    later = int(more.group(1).replace(",", "")) if more else 0
    drawn = sum(1 for ln in out.splitlines() if "◆ m" in ln)
    assert earlier + drawn + later >= 50_000  # every mark is drawn or counted


@pytest.mark.slow
def test_a_command_of_many_arguments_is_drawn_cut(tmp_path):
    """`show --brief` laid out every argument of the command: 10^7 of them took 154 s."""
    s = Session.load(DATA / "session_h100_mixed.json.gz")
    s.command = [f"arg{i}" for i in range(300_000)]
    p = tmp_path / "cmd.json.gz"
    s.save(p)
    code, out, err = run_cli("show", str(p), "--brief", "--no-color", "--width", "120")
    assert code == 0, err
    assert "more arguments)" in out and len(out) < 100_000
    from kernelscope.render.header import COMMAND_CHARS, command_text

    assert len(command_text(s.command)) < COMMAND_CHARS + 40
    assert command_text(["python", "train.py", "--lr", "3e-4"]) == "python train.py --lr 3e-4"
    assert command_text(["x" * 5000]).endswith("… (3,000 more characters)")


@pytest.mark.slow
def test_the_html_timeline_keeps_its_row_bound_with_many_marks(marked, tmp_path):
    """`report` with a million marks wrote a 153 MB page though the README bounds it to the first 200 rows."""
    from kernelscope.render.html.session import TIMELINE_ROWS

    path, _ = marked
    out = tmp_path / "r.html"
    code, _, err = run_cli("report", str(path), "-o", str(out), "--panels", "0")
    assert code == 0, err
    page = out.read_text()
    assert 0 < page.count("◆ m") <= TIMELINE_ROWS and len(page) < 3_000_000
    earlier = re.search(r"([\d,]+) earlier rows not drawn", page)  # the page opens on the window, near the run's end
    assert earlier is not None and int(earlier.group(1).replace(",", "")) + page.count("◆ m") >= 50_000


@pytest.fixture(scope="module")
def long_name(tmp_path_factory) -> tuple[Path, str]:
    """A session whose first launch's kernel name is a million characters, the middle unlike the ends."""
    d = json.loads(gzip.open(DATA / "session_h100_mixed.json.gz").read())
    name = "k" * 400_000 + "middle" * 33_334 + "k" * 400_000
    d["launches"][0]["kernel"] = name  # schema 1: launches as objects
    p = tmp_path_factory.mktemp("names") / "long_name.json"
    p.write_text(json.dumps(d))
    return p, name


@pytest.mark.parametrize("argv", [["show", "--no-color", "--width", "100"], ["show", "--brief", "--no-color"],
                                  ["diff", str(DATA / "session_h100_mixed.json.gz"), "--no-color"]])
def test_a_long_name_is_drawn_shortened_with_the_count_of_what_is_left_out(long_name, argv):
    """Rich laid out a cell of a 10 MB kernel name for 70 s (1 MB: 2.5 s), printing it 3.5 times."""
    from kernelscope.render.text import DISPLAY_CHARS

    path, name = long_name
    code, out, err = run_cli(argv[0], str(path), *argv[1:])
    assert code == 0, err
    assert len(out) < 200_000  # was 3.5 MB for show, 5 MB for diff: the whole name, several times
    if argv[1] != "--brief":  # the brief view names no kernel
        unwrapped = "".join(ch for ch in out if ch not in " │\n")
        left_out = f"…[{len(name) - (DISPLAY_CHARS - 60) // 2 * 2:,}morecharacters,blake2b"
        assert left_out in unwrapped


def test_the_kernel_panel_gives_no_count_for_a_name_the_display_shortened(long_name):
    """The panel cuts long names to a few lines with a count of what it left out; of a name the display copy
    had shortened already, that count would be of the copy (3,671 for a name missing 4,674), so it gives none."""
    path, name = long_name
    code, out, err = run_cli("show", str(path), "--kernel", "^kkk", "--no-color", "--width", "100")
    assert code == 0, err
    unwrapped = "".join(ch for ch in out if ch not in " │\n")
    assert "…(show--jsonhasthefullname)" in unwrapped
    assert "morecharacters:show--jsonhasthefullname" not in unwrapped


def test_the_json_outputs_keep_the_whole_name(long_name, tmp_path):
    path, name = long_name
    code, out, err = run_cli("show", str(path), "--json")
    assert code == 0, err
    assert name in out
    code, _, err = run_cli("export", str(path), "-o", str(tmp_path / "t.trace.json"))
    assert code == 0, err
    assert name in (tmp_path / "t.trace.json").read_text()


def test_shortened_keeps_short_strings_and_tells_long_ones_apart():
    from kernelscope.render.text import DISPLAY_CHARS, plain, shortened

    real = "void at::native::elementwise_kernel<128, 4>(int)"
    assert shortened(real) is real and plain(real) == real
    half = DISPLAY_CHARS
    a, b = "x" * half + "a" + "x" * half, "x" * half + "b" + "x" * half
    sa, sb = shortened(a), shortened(b)
    assert len(sa) <= DISPLAY_CHARS and sa.startswith("x" * 1000) and sa.endswith("x" * 1000)
    kept = (DISPLAY_CHARS - 60) // 2 * 2
    assert f"…[{2 * half + 1 - kept:,} more characters, blake2b " in sa
    assert sa != sb and len(sa) == len(sb)  # same length, same ends: only the digest of the middle differs
    assert plain("\x1b" * 2 * half).count("\\x1b") == kept  # shortened first, then escaped: one escaping path


def _base() -> dict:
    return json.loads(gzip.open(DATA / "session_h100_mixed.json.gz").read())


@pytest.mark.slow
def test_a_million_bad_items_are_named_ten_times_and_counted(tmp_path):
    """`"launches": [0, 0, ...]` of 3 million items took 10-16 s and 506 MB in `show`: one message per item, kept
    and copied for the terminal."""
    from kernelscope.model.schema import SKIPPED_KEPT, skipped_count

    n = 1_000_000
    p = tmp_path / "zeros.json"
    p.write_text('{"format":"kernelscope-session","schema_version":1,"launches":[' + ",".join(["0"] * n) + "]}")
    s = Session.load(p)
    assert len(s.skipped_on_load) == SKIPPED_KEPT + 1 and skipped_count(s.skipped_on_load) == n
    assert s.skipped_on_load[0] == "skipped launches[0] (launches[0]: expected an object, found the number 0)"
    assert s.skipped_on_load[-1] == f"… and {n - SKIPPED_KEPT:,} more damaged parts of launches skipped"
    code, out, err = run_cli("show", str(p), "--no-color")
    assert code == 0, err
    notes = err.splitlines()
    assert len(notes) == 6 and notes[-1].endswith(f": {n - 5:,} more damaged parts skipped.")


def test_good_items_among_many_bad_ones_are_kept_and_every_bad_one_counted():
    from kernelscope.model.schema import SKIPPED_KEPT, skipped_count

    d = _base()
    good = d["launches"]
    bad = [0, "x", None, [1], {"kernel": 5}]  # the last is an object: checked field by field, not by type alone
    good[1]["metrics"].update({f"bad{i}": {"value": "?"} for i in range(40)})  # a part inside a part
    d["launches"] = [x for g in good for x in (g, *bad)]
    s = Session.from_dict(d)
    assert len(s.launches) == len(good) and len(s.launches[1].metrics) == 10
    assert skipped_count(s.skipped_on_load) == len(good) * len(bad) + 40
    # five launches, then ten metrics of launches[6] (good[1]) and their count line; these lines count towards the
    # launches' ten, so every later launch is counted
    assert len(s.skipped_on_load) == 5 + SKIPPED_KEPT + 1 + 1
    assert s.skipped_on_load[15] == "… and 30 more damaged parts of launches[6].metrics skipped"
    assert s.skipped_on_load[-1] == f"… and {(len(good) - 1) * len(bad):,} more damaged parts of launches skipped"


def test_the_notes_count_what_the_count_lines_stand_for(tmp_path, capsys):
    """The first five lines are named; the note after them counts every part left out, a count line as its count."""
    from kernelscope.cli.common import load_session

    d = _base()
    d["activities"] = [0] * 12
    d["regions"] = [0] * 12
    p = tmp_path / "two.json"
    p.write_text(json.dumps(d))
    s = load_session(str(p))
    assert len(s.skipped_on_load) == 22 and s.skipped_on_load[10].startswith("… and 2 more damaged parts of ")
    assert capsys.readouterr().err.splitlines()[-1].endswith(": 19 more damaged parts skipped.")


@pytest.mark.slow
def test_short_names_of_huge_names_jump_from_bracket_to_bracket():
    """show --json, report and export name kernels short: walked one character at a time, a 10 MB name took
    most of their 2.5 s."""
    from kernelscope.model.names import short_kernel_name

    assert short_kernel_name("void at::native::(anonymous namespace)::foo_kernel<float, (4)>(int)") == "foo_kernel"
    assert short_kernel_name("a<b>(c))d(") == "ad"  # a close with none open is dropped; an open never closed ends it
    huge = "void ns::" + "k" * 5_000_000 + "<" + "t" * 1_000_000 + ">(int)"
    assert short_kernel_name(huge) == "k" * 5_000_000


# -- the Ranks and Collectives panels of sessions with many rank records --------------------------------------

RUN = DATA / "ranks" / "session_h200x2_run_torchrun.json.gz"


def _many_ranks(path: Path, n: int) -> Path:
    """The recorded 2-rank torchrun session with ``n`` rank records (the launches stay those of ranks 0 and 1)."""
    doc = json.loads(gzip.decompress(RUN.read_bytes()))
    doc["ranks"] = [dict(doc["ranks"][i % 2], rank=i, world_size=n, pid=i) for i in range(n)]
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.slow
def test_show_of_2000_ranks_draws_a_bounded_ranks_panel(tmp_path):
    """The Ranks panel drew a row per rank and the Collectives panel a column pair per rank: `show` of 2,000 rank
    records took 6.7 s (100k: over 60 s)."""
    path = _many_ranks(tmp_path / "r2000.json", 2000)
    code, out, err = run_cli("show", str(path), "--no-color", "--width", "120")
    assert code == 0, err
    panel = out[out.index("Ranks (2000)"): out.index("Collectives (")]
    drawn = [ln for ln in panel.splitlines() if ln[2:].split()[:1] and ln[2:].split()[0].isdigit()]
    assert len(drawn) == 16 and "… and 1,984 more ranks (show --json has every rank)" in panel
    assert "start and wait of the first 16 ranks, the straggler and the first to arrive" in out
    assert len(out.splitlines()) < 800
    code, out, _ = run_cli("show", str(path), "--json")
    assert code == 0 and len(json.loads(out)["ranks"]) == 2000


@pytest.mark.slow
def test_the_report_of_2000_ranks_draws_the_ranks_the_terminal_draws(tmp_path):
    """The HTML report's Ranks table had a row per rank (2,000 ranks: a 575 KiB page); it draws the terminal's
    selection, with the same line for the ranks left out."""
    path = _many_ranks(tmp_path / "r2000.json", 2000)
    code, _, err = run_cli("report", str(path), "-o", str(tmp_path / "r.html"))
    assert code == 0, err
    page = (tmp_path / "r.html").read_text()
    ranks = page[page.index('id="ranks"'):page.index('id="collectives"')]
    assert ranks.count("<tr") == 16 + 1  # the header and the first 16 ranks (none past them matters here)
    assert "… and 1,984 more ranks (show --json has every rank)" in ranks


def _summary_of(n: int, compute_ns: dict[int, int], wait_ns: dict[int, int]):
    from dataclasses import replace

    from kernelscope.analyze.ranks import RanksSummary, ranks_report
    base = ranks_report(Session.load(RUN)).summary
    ranks = tuple(replace(base.ranks[i % 2], info=replace(base.ranks[i % 2].info, rank=i),
                          compute_ns=compute_ns.get(i, base.ranks[0].compute_ns),
                          wait_ns=wait_ns.get(i, base.ranks[0].wait_ns), idle_ns=base.ranks[0].idle_ns)
                  for i in range(n))
    return RanksSummary(ranks, base.compute_imbalance_pct, base.notes)


def _panel_text(panel, width: int = 200) -> str:
    return draw(panel, width)


def test_past_16_ranks_the_panel_adds_the_ranks_that_matter_and_counts_the_rest():
    from kernelscope.render.ranks_panel import RanksPanel, rank_selection
    s = _summary_of(40, {30: 10**12, 35: 1}, {37: 10**12})
    shown, line = rank_selection(s, 16, straggler_rank=25)
    assert shown == [*range(16), 25, 30, 35, 37]
    assert line == ("… and 20 more ranks (show --json has every rank); past the first 16: rank 25 (the run's "
                    "straggler), rank 30 (most compute), rank 35 (least compute), rank 37 (longest wait)")
    text = _panel_text(RanksPanel(s, straggler_rank=25))
    rows = [ln.split()[1] for ln in text.splitlines() if len(ln.split()) > 1 and ln.split()[1].isdigit()]
    assert rows == [str(r) for r in [*range(16), 25, 30, 35, 37]] and line in text.replace("\n│ ", " ")
    for n in (2, 16):  # up to 16 ranks: every rank, nothing said about the others
        shown, line = rank_selection(_summary_of(n, {1: 1}, {}))
        assert shown == list(range(n)) and line is None
        assert "more rank" not in _panel_text(RanksPanel(_summary_of(n, {1: 1}, {})))


@pytest.mark.slow
@pytest.mark.parametrize("n", [2000, 100_000])
def test_the_collectives_panel_draws_the_first_ranks_of_each_collective_and_its_straggler(n):
    from dataclasses import replace

    from kernelscope.analyze.ranks import ranks_report
    from kernelscope.render.ranks_panel import CollectivesPanel
    a = ranks_report(Session.load(RUN)).collectives
    row = a.rows[0]
    late = replace(row.ranks[0], rank=n - 1, wait_ns=0)
    timings = tuple(replace(row.ranks[1], rank=i) for i in range(n - 1)) + (late,)
    many = replace(a, rows=(replace(row, ranks=timings, straggler_rank=n - 1, first_rank=0),), ranks=tuple(range(n)))
    text = _panel_text(CollectivesPanel(many, limit=20), 120)
    assert f"r{n - 1} " in text and "r15 " in text and "r16 " not in text
    assert f"… {n - 17:,} more ranks" in text and f"… {n - 21:,} more waits" in text and len(text.splitlines()) < 50
