"""Names from a profiled program or a session file print as plain text: no markup applied, no control
sequence reaching the terminal, in every command that draws a session."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from conftest import DATA
from test_fuzz_readers import run_cli

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
    code, out, err = run_cli(["show", str(hostile_session), "--width", "250", "--timeline", *extra])
    assert code == 0, err
    assert "\x1b[31mRED" not in out and "\x1b]8;" not in out  # no colour or hyperlink from the name
    assert SHOWN in out  # device, command and kernel lines show the whole name as typed
    assert out.count("PWNED") >= 5
    assert out.count("[bold red]PWNED[/]") == out.count("PWNED")  # never styled: each one literal
    assert "\\[" not in out  # and never escaped twice (a backslash on screen)
    if extra:
        assert "\x1b" not in out


def test_diff_prints_hostile_names_literally(hostile_session):
    code, out, err = run_cli(["diff", str(hostile_session), str(hostile_session), "--width", "250", "--no-color"])
    assert code == 0, err
    assert "\x1b" not in out and "[bold red]PWNED[/]" in out
    assert out.count("[bold red]PWNED[/]") == out.count("PWNED") and "\\[" not in out


def test_json_output_keeps_names_exactly(hostile_session):
    code, out, err = run_cli(["show", str(hostile_session), "--json"])
    assert code == 0, err
    doc = json.loads(out)
    assert doc["kernels"][0]["name"].startswith(HOSTILE)


def test_chrome_trace_shows_control_characters_as_text(hostile_session, tmp_path):
    out = tmp_path / "t.json"
    code, _, err = run_cli(["export", str(hostile_session), "-o", str(out)])
    assert code == 0, err
    doc = json.loads(out.read_text())
    names = [e["name"] for e in doc["traceEvents"] if "PWNED" in str(e.get("name"))]
    assert names and all("\x1b" not in n and SHOWN in n for n in names)
