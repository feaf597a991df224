"""Names from a profiled program or a session file print as plain text: no markup applied, no control
sequence reaching the terminal, in every command that draws a session."""
from __future__ import annotations

import gzip
import shutil
import json
from pathlib import Path

import pytest

from conftest import DATA
from conftest import run_cli

HOSTILE = "[bold red]PWNED[/] \x1b[31mRED\x1b[0m [link=http://x]click[/link]"
SHOWN = r"[bold red]PWNED[/] \x1b[31mRED\x1b[0m [link=http://x]click[/link]"  # what the reader must see


@pytest.fixture
def hostile_session(tmp_path: Path) -> Path:
    d = json.loads(gzip.decompress((DATA / "session_h100_counters.json.gz").read_bytes()))
    for x in d["launches"]:
        x["kernel"] = HOSTILE + x["kernel"]
        x["regions"] = [HOSTILE]
        for f in x.get("findings", []):
            f["title"], f["message"] = HOSTILE, HOSTILE + f["message"]
    for r in d["regions"]:
        r["name"] = HOSTILE
    d["command"] = [HOSTILE]
    d["device"]["name"] = HOSTILE
    p = tmp_path / "hostile.json"
    p.write_text(json.dumps(d))
    return p


@pytest.mark.parametrize("extra", [["--no-color"], []])
def test_show_prints_hostile_names_literally(hostile_session, extra, monkeypatch):
    if not extra:
        monkeypatch.setenv("FORCE_COLOR", "1")  # colour on: Rich's own escapes are expected, the name's are not
    code, out, err = run_cli("show", str(hostile_session), "--width", "250", "--timeline", *extra)
    assert code == 0, err
    assert "\x1b[31mRED" not in out and "\x1b]8;" not in out  # no colour or hyperlink from the name
    assert SHOWN in out  # device, command and kernel lines show the whole name as typed
    assert out.count("PWNED") >= 5
    assert out.count("[bold red]PWNED[/]") == out.count("PWNED")  # never styled: each one literal
    assert "\\[" not in out  # and never escaped twice (a backslash on screen)
    if extra:
        assert "\x1b" not in out


def test_diff_prints_hostile_names_literally(hostile_session):
    code, out, err = run_cli("diff", str(hostile_session), str(hostile_session), "--width", "250", "--no-color")
    assert code == 0, err
    assert "\x1b" not in out and "[bold red]PWNED[/]" in out
    assert out.count("[bold red]PWNED[/]") == out.count("PWNED") and "\\[" not in out


def test_json_output_keeps_names_exactly(hostile_session):
    code, out, err = run_cli("show", str(hostile_session), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["kernels"][0]["name"].startswith(HOSTILE)


def test_chrome_trace_shows_control_characters_as_text(hostile_session, tmp_path):
    out = tmp_path / "t.json"
    code, _, err = run_cli("export", str(hostile_session), "-o", str(out))
    assert code == 0, err
    doc = json.loads(out.read_text())
    names = [e["name"] for e in doc["traceEvents"] if "PWNED" in str(e.get("name"))]
    assert names and all("\x1b" not in n and SHOWN in n for n in names)


# -- issue 37 item 3: escapes on stderr, in keys, in repr, invisible and bidi characters ---------------------------
TERMINAL_ATTACK = "\x1b]0;PWNED\x07\x1b[2K\rkernelscope: all good"  # sets the window title, fakes a line
RAW = ("\x1b", "\x07", "\r", "\x9b", "\x00", "\x08", "\u202e", "\u200b", "\u200d", "\u200f", "\ufeff")


def _no_raw(text: str) -> None:
    bad = [repr(c) for c in RAW if c in text]
    assert not bad, f"raw {bad} in {text[-2000:]!r}"


def _expanded(name: str = "session_h100_instrumented.json.gz") -> dict:
    return json.loads(gzip.decompress((DATA / name).read_bytes()))  # a recorded schema-1 file: one object a launch


def _put_key(d: dict, where: str) -> None:
    """A key that is a terminal attack, with a value the schema refuses, so the load error or note names it."""
    if where == "launches[0].metrics":
        d["launches"][0]["metrics"][TERMINAL_ATTACK] = {"value": "x", "source": "cupti", "raw_name": "m"}
    elif where == "collectors":
        d["collectors"][TERMINAL_ATTACK] = {"status": "bogus"}
    elif where == "device.attributes":
        d["device"]["attributes"][TERMINAL_ATTACK] = {"value": [1], "source": "device-spec", "raw_name": "a"}
    elif where == "environment":
        d["environment"][TERMINAL_ATTACK] = {"x": "NAN"}
    elif where == "declared_work.units":
        d["declared_work"] = [{"region": "r", "occurrence": 0, "units": {TERMINAL_ATTACK: -1}}]
    elif where == "ranks[].process_groups":
        d["ranks"] = [{"rank": 0, "world_size": 1, "process_groups": [{TERMINAL_ATTACK: "NAN"}]}]


@pytest.mark.parametrize("where", ["launches[0].metrics", "collectors", "device.attributes", "environment",
                                   "declared_work.units", "ranks[].process_groups"])
def test_json_keys_in_load_errors_are_escaped(tmp_path, where):
    d = _expanded()
    _put_key(d, where)
    p = tmp_path / "keys.json"
    p.write_text(json.dumps(d).replace('"NAN"', "NaN"))
    code, out, err = run_cli("show", str(p), "--json")
    assert code in (0, 2) and "Traceback" not in err and "internal error" not in err, err
    assert "PWNED" in err, (where, err)  # the path is named...
    _no_raw(err)  # ...escaped: no title set, no line erased
    assert "\\x1b]0;PWNED\\x07" in err


def test_export_notes_escape_kernel_names(tmp_path):
    d = _expanded()
    for x in d["launches"]:
        x["kernel"] = "\x1b[2K\rmatmul\x07\x08\x9b\u202e\u200b" + x["kernel"]
    p = tmp_path / "s.json"
    p.write_text(json.dumps(d))
    code, out, err = run_cli("export", str(p), "-o", str(tmp_path / "t.json"))
    assert code == 0, err
    assert "kernelscope: note:" in err and "matmul" in err
    _no_raw(err)
    _no_raw(out)


def test_import_dir_escapes_skipped_file_names(tmp_path):
    d = tmp_path / "traces"
    d.mkdir()
    (d / "\x1b]0;PWNED\x07\u202egnp.json").write_text("{}")  # JSON, not a trace: left out, with its name
    shutil.copy(DATA / "ranks" / "job2_rank0.pt.trace.json.gz", d / "rank0.pt.trace.json.gz")
    code, out, err = run_cli("import", str(d), "-o", str(tmp_path / "s.json"))
    assert code == 0, err
    assert "PWNED" in err and "\\u202egnp.json" in err
    _no_raw(err)


def test_repr_of_a_loaded_session_escapes_the_device_name(tmp_path):
    import kernelscope

    d = _expanded("session_h100_mixed.json.gz")
    d["device"]["name"] = TERMINAL_ATTACK + "\u202e"
    p = tmp_path / "s.json"
    p.write_text(json.dumps(d))
    text = repr(kernelscope.load(p))
    assert "PWNED" in text
    _no_raw(text)


def test_invisible_and_bidi_characters_are_shown():
    from kernelscope.model.escape import visible
    from kernelscope.render.html.markup import esc

    assert visible("ge\u200bmm") == "ge\\u200bmm" != visible("gemm")
    for c in ("\u200b", "\u200c", "\u200d", "\u200e", "\u200f", "\ufeff", "\u202a", "\u202e", "\u2066", "\u2069",
              "\u061c", "\u00ad", "\U000e0041"):
        assert c not in visible(f"a{c}b") and "\\" in visible(f"a{c}b")
    assert visible("tab\tnew\nline é ü 中文") == "tab\tnew\nline é ü 中文"  # printable text untouched
    assert "\u202e" not in esc("evil\u202etxt.exe") and "\\u202e" in esc("evil\u202etxt.exe")
    assert esc("<b>") == "&lt;b&gt;"


def test_two_names_that_differ_by_a_zero_width_space_print_differently(tmp_path):
    d = _expanded("session_h100_mixed.json.gz")
    first = d["launches"][0]["kernel"]
    for x in d["launches"]:
        if x["kernel"] == first:
            x["kernel"] = "gemm_kernel"
        else:
            x["kernel"] = "gemm\u200b_kernel"
    p = tmp_path / "s.json"
    p.write_text(json.dumps(d))
    code, out, err = run_cli("show", str(p), "--width", "200", "--no-color", "--panels", "0")
    assert code == 0, err
    assert "gemm\\u200b_kernel" in out and "gemm_kernel" in out
    _no_raw(out)


def test_html_report_shows_bidi_overrides_as_escapes(tmp_path):
    d = _expanded("session_h100_mixed.json.gz")
    for x in d["launches"]:
        x["kernel"] = "evil\u202ecod.exe\u200b" + x["kernel"]
    p = tmp_path / "s.json"
    p.write_text(json.dumps(d))
    code, _, err = run_cli("report", str(p), "-o", str(tmp_path / "r.html"))
    assert code == 0, err
    page = (tmp_path / "r.html").read_text()
    assert "\u202e" not in page and "\u200b" not in page and "evil\\u202ecod.exe" in page


def test_display_copy_keeps_the_rank_of_regions_of_a_schema_2_session(tmp_path):
    """Issue 37 item 10: the copy rebuilt regions without ``rank`` when the launches were columns (schema 2, what
    save() writes), so `show --timeline` drew rank-1 regions as rank 0. A recorded two-rank torchrun session,
    as recorded (schema 1) and as saved again (schema 2), must give the same timeline rows."""
    from kernelscope.analyze.timeline import build_timeline
    from kernelscope.model import Session
    from kernelscope.render.text import display_copy

    one = Session.load(DATA / "ranks" / "session_h200x2_run_torchrun.json.gz")
    one.save(tmp_path / "again.json.gz")
    two = Session.load(tmp_path / "again.json.gz")
    assert two.launch_table() is two.__dict__.get("_launches_table")  # held as columns: the path that lost rank
    assert [r.rank for r in display_copy(two).regions] == [r.rank for r in one.regions]
    assert {r.rank for r in one.regions} == {0, 1}

    def rows(s):
        return [(r.name, r.rank, r.start_ns, r.on_gpu) for r in build_timeline(display_copy(s)).rows]

    region_rows = [r for r in rows(one) if not r[3] or r[0] in {g.name for g in one.regions}]
    assert any(rank == 1 for _, rank, _, _ in region_rows)
    assert rows(two) == rows(one)


def test_diff_device_warning_prints_names_without_escaping_backslashes(tmp_path):
    """Issue 37 item 11: the warning was built from the terminal copies (Rich markup escaped), so stderr showed
    `\\[bold red]`; it is built from the stored names and escaped for the terminal only."""
    paths = []
    for i, name in enumerate(["[bold red]GPU A\x1b[31m", "GPU B\u202e"]):
        d = _expanded("session_h100_mixed.json.gz")
        d["device"]["name"] = name
        paths.append(tmp_path / f"{i}.json")
        paths[-1].write_text(json.dumps(d))
    code, out, err = run_cli("diff", *map(str, paths), "--width", "200", "--no-color")
    assert code == 0, err
    warning = next(ln for ln in err.splitlines() if ln.startswith("kernelscope: warning:"))
    assert "[bold red]GPU A\\x1b[31m" in warning and "GPU B\\u202e" in warning and "\\[" not in warning
    _no_raw(err)


def test_free_form_details_of_the_wrong_type_and_markup_in_na_reasons(tmp_path):
    """Collector details are free-form JSON: a string where the sampler wrote a number was an internal error
    (ValueError from a format spec) in show and report; an N/A reason with markup showed `\\[bold red]`."""
    d = _expanded("session_h100_samples.json.gz")
    d["collectors"]["sampler"]["details"].update(read_ms_mean="x", interval_ms="y", gpm="[bold red]on[/]")
    for sample in d["samples"]:
        for m in sample["metrics"].values():
            if m.get("value") is None:
                m["missing_reason"] = "[bold red]not supported[/] here\x1b[2K"
    d["collectors"]["ranks"] = {"status": "ok", "reason": None, "details": {"notes": 5}}
    d["collectors"].setdefault("instrument", {"status": "ok", "reason": None, "details": {}})
    d["collectors"]["instrument"]["details"]["unattached"] = 7
    p = tmp_path / "s.json"
    p.write_text(json.dumps(d))
    code, out, err = run_cli("show", str(p), "--no-color", "--width", "200")
    assert code == 0 and "internal error" not in err, err
    assert "every N/A ms" in out and "GPM: [bold red]on[/]" in out
    assert "[bold red]not supported[/] here\\x1b[2K" in out and "\\[bold" not in out
    _no_raw(out)
    code, _, err = run_cli("report", str(p), "-o", str(tmp_path / "r.html"))
    assert code == 0 and "internal error" not in err, err


def test_load_errors_raised_to_python_callers_are_escaped_too(tmp_path):
    """kernelscope.load() in a notebook raises SessionFileError: its message (shown in a traceback, not through
    the command line's fail()) names the field path with the key escaped."""
    import kernelscope
    from kernelscope.model import SessionFileError

    d = _expanded("session_h100_mixed.json.gz")
    d["ranks"] = [{"rank": 0, "world_size": 1, "process_groups": [{TERMINAL_ATTACK: "NAN"}]}]
    p = tmp_path / "s.json"
    p.write_text(json.dumps(d).replace('"NAN"', "NaN"))
    with pytest.raises(SessionFileError) as e:
        kernelscope.load(p)
    assert "PWNED" in str(e.value)
    _no_raw(str(e.value))
    d = _expanded("session_h100_mixed.json.gz")
    d["schema_version"] = TERMINAL_ATTACK
    p.write_text(json.dumps(d))
    with pytest.raises(SessionFileError) as e:
        kernelscope.load(p)
    _no_raw(str(e.value))


def test_the_fast_path_of_visible_skips_nothing_it_must_escape():
    """visible() returns printable strings unchanged: that is exact only while no character it escapes is
    printable, over every code point."""
    import unicodedata

    from kernelscope.model.escape import ESCAPED_CATEGORIES, visible

    every = [chr(i) for i in range(0x110000)]
    escaped = [c for c in every if visible(c) != c]
    assert len(escaped) > 2000 and not [hex(ord(c)) for c in escaped if c.isprintable()]
    assert {unicodedata.category(c) for c in escaped} == ESCAPED_CATEGORIES


def _escape_by_category(c: str) -> str:
    """What visible() must make of one character: the Unicode category decides, with tab and newline kept."""
    import unicodedata

    if unicodedata.category(c) not in ("Cc", "Cf", "Cs", "Zl", "Zp") or c in "\t\n":
        return c
    code = ord(c)
    return f"\\x{code:02x}" if code < 0xA0 else f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def test_visible_escapes_every_format_control_and_separator_character_by_category():
    """Every character of categories Cc, Cf, Cs, Zl, Zp is escaped, not only those of a list: U+1D173 (musical
    symbol begin beam), U+0600 (Arabic number sign), U+13430 (Egyptian hieroglyph joiner) and the others passed raw;
    every other character (printable non-ASCII text, private use, unassigned) is kept, in one string or alone."""
    from kernelscope.model.escape import visible

    missed = [0x1D173, 0x1D17A, 0x0600, 0x0605, 0x06DD, 0x070F, 0x0890, 0x0891, 0x08E2, 0x110BD, 0x110CD,
              0x13430, 0x13438, 0x1BCA0, 0x1BCA3, 0xE0001]
    for code in missed:
        assert visible(f"a{chr(code)}b") == (f"a\\U{code:08x}b" if code > 0xFFFF else f"a\\u{code:04x}b")
    assert visible("evil\U0001d173\u0600\U00013430name") == "evil\\U0001d173\\u0600\\U00013430name"
    every = "".join(map(chr, range(0x110000)))  # lone surrogates too: a JSON string may hold one
    assert visible(every) == "".join(map(_escape_by_category, every))
    for kept in ("é", "中文", "µs", "│┼─", "😀🚀", "\U0001d11e", "\ue000", "\u00a0", "tab\tnew\nline"):
        assert visible(kept) == kept


def test_show_prints_format_characters_outside_the_old_list_as_escapes(tmp_path):
    d = _expanded("session_h100_mixed.json.gz")
    d["launches"][0]["kernel"] = "evil\U0001d173\u0600\U00013430\u06dd\U0001bca0name"
    p = tmp_path / "cf.json"
    p.write_text(json.dumps(d))
    code, out, err = run_cli("show", str(p), "--width", "250", "--no-color", "--all-kernels")
    assert code == 0, err
    assert "evil\\U0001d173\\u0600\\U00013430\\u06dd\\U0001bca0name" in out
    assert not [c for c in out + err if _escape_by_category(c) != c and c not in "\t\n"]


def test_lone_surrogates_in_names_are_shown_as_escapes(tmp_path):
    """A JSON string may hold a lone surrogate ("\\udc1b"): show printed 'internal error: UnicodeEncodeError', and
    "\\udc9b" would reach the terminal as the byte 0x9b (stdout's surrogateescape), a one-byte CSI."""
    d = json.loads(gzip.decompress((DATA / "session_h100_mixed.json.gz").read_bytes()))
    d["launches"][0]["kernel"] = "\udc9b[31mRED\udc1b"
    p = tmp_path / "s.json"
    p.write_text(json.dumps(d))
    code, out, err = run_cli("show", str(p), "--width", "200", "--all-kernels")
    assert code == 0 and "internal error" not in err, err
    assert "\\udc9b[31mRED\\udc1b" in out and not any("\ud800" <= c <= "\udfff" for c in out + err)


@pytest.mark.parametrize("cached", [False, True])
def test_the_roofs_line_escapes_the_ceilings_file_strings_and_path(tmp_path, monkeypatch, cached):
    """The "Roofs (...)" line names the calibration's date, device and path: text from a file (and a directory
    name), printed raw, with markup applied, before the fix."""
    c = json.loads((DATA / "ceilings_h100.json").read_text())
    c["measured_utc"] = "\x1b[31mRED"
    here = tmp_path / "dir\x1b]0;PWNED\x07"
    here.mkdir()
    if cached:  # the cached calibration of the session's GPU, found by its key: the date and path are shown
        name = "ceilings-NVIDIA-H100-80GB-HBM3-580.159.04-1980MHz.json"
        (here / name).write_text(json.dumps(c))
        monkeypatch.setenv("KERNELSCOPE_CACHE_DIR", str(here))
        argv, shown = [], ["\\x1b[31mRED", "dir\\x1b]0;PWNED\\x07"]
    else:
        c["key"]["device_name"] = "EVIL\u202e[bold]B[/]"
        (here / "c.json").write_text(json.dumps(c))
        argv, shown = ["--ceilings", str(here / "c.json")], ["\\x1b[31mRED", "EVIL\\u202e[bold]B[/]",
                                                             "dir\\x1b]0;PWNED\\x07"]
    code, out, err = run_cli("show", str(DATA / "session_h100_analysis.json.gz"), "--width", "400", "--no-color",
                              *argv)
    assert code == 0, err
    roofs = next(line for line in out.splitlines() if "Roofs (" in line)
    assert all(s in roofs for s in shown), roofs
    _no_raw(out + err)
    assert "\x07" not in out + err and "\\[" not in out


ARG_ATTACK = "--\x1b]0;PWNED\x07\x1b[31mX\u202e"


@pytest.mark.parametrize("argv", [["export", str(DATA / "session_h100_mixed.json.gz"), "-o", "x.json", ARG_ATTACK],
                                  ["show", str(DATA / "session_h100_mixed.json.gz"), ARG_ATTACK],
                                  ["bench", ARG_ATTACK],
                                  ["occupancy", "--arch", "sm_90", "--block", "\x1b[31m\u202e", "--regs", "32"],
                                  [ARG_ATTACK], ["sh\x1b[1mow\u202e"], ["show", "--sort", ARG_ATTACK, "x"]])
def test_argparse_errors_escape_the_arguments_they_quote(argv, tmp_path, monkeypatch):
    """argparse's own errors ("unrecognized arguments", "invalid choice", "expected one argument") quote what was
    typed: usage, then one escaped sentence, exit 2."""
    monkeypatch.chdir(tmp_path)
    code, out, err = run_cli(*argv)
    assert code == 2 and not out and not (tmp_path / "x.json").exists()
    assert err.startswith("usage: kernelscope") and err.count("error:") == 1, err
    last = err.splitlines()[-1]
    assert last.startswith("kernelscope") and ": error: " in last, err
    _no_raw(err)
    assert "\x07" not in err and "\x1b" not in err and ("\\x1b" in last or "\\u202e" in last), err
