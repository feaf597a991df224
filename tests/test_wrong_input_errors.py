"""Errors that point the way (issue 36, item 5): a file given to the wrong command names the command that reads it,
and export takes --chrome as the format flag it looks like."""
from __future__ import annotations

import gzip
import lzma
import shutil
import struct
import zlib

import pytest

from conftest import DATA, one_sentence_error, run_cli

SESSION = DATA / "session_h100_mixed.json.gz"


def _png(path):
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
                     + chunk(b"IDAT", zlib.compress(b"\0\0\0\0")) + chunk(b"IEND", b""))
    return path


@pytest.fixture
def ncu_rep(tmp_path):
    path = tmp_path / "report.ncu-rep"
    path.write_bytes(lzma.decompress((DATA / "ncu_h100_region.ncu-rep.xz").read_bytes()))
    return path


@pytest.mark.parametrize("command", ["show", "export", "diff"])
def test_a_report_given_as_a_session_says_use_import(ncu_rep, command, tmp_path):
    extra = {"show": [], "export": ["-o", str(tmp_path / "t.json")], "diff": [str(SESSION)]}[command]
    err = one_sentence_error(run_cli(command, str(ncu_rep), *extra))
    assert "is an Nsight Compute report" in err and f"kernelscope import {ncu_rep}" in err
    assert "damaged" not in err


def test_a_profiler_trace_given_as_a_session_says_use_import(tmp_path):
    trace = tmp_path / "trace.pt.trace.json.gz"
    shutil.copy(DATA / "ranks" / "node0_rank0.pt.trace.json.gz", trace)
    err = one_sentence_error(run_cli("show", str(trace)))
    assert "is a PyTorch profiler trace" in err and f"kernelscope import {trace}" in err
    plain = tmp_path / "trace.json"  # the same, not compressed
    plain.write_bytes(gzip.decompress(trace.read_bytes()))
    assert "kernelscope import" in one_sentence_error(run_cli("show", str(plain)))


def test_an_exported_chrome_trace_given_as_a_session_says_where_it_opens(tmp_path):
    out = tmp_path / "t.json"
    assert run_cli("export", str(SESSION), "-o", str(out)).returncode == 0
    err = one_sentence_error(run_cli("show", str(out)))
    assert "Chrome / Perfetto trace" in err and "ui.perfetto.dev" in err


def test_a_damaged_session_still_says_damaged(tmp_path):
    bad = tmp_path / "s.json"
    bad.write_text("{not json")
    assert "damaged or not JSON" in one_sentence_error(run_cli("show", str(bad)))


def test_import_of_a_png_says_what_import_reads_without_asking_for_the_reader(tmp_path, monkeypatch, capsys):
    pic = _png(tmp_path / "pic.json")
    err = one_sentence_error(run_cli("import", str(pic), "-o", str(tmp_path / "s.json")))
    assert "neither an Nsight Compute report" in err and "install" not in err and "damaged" not in err
    # the report reader (which asks to install ncu-report where it is missing) is never reached
    from kernelscope.cli import main
    from kernelscope.collect.ncu import report_reader

    def no_reader(*a, **k):
        raise AssertionError("the report reader was asked to read a PNG")

    monkeypatch.setattr(report_reader, "read_report", no_reader)
    monkeypatch.setattr(report_reader, "load_module", no_reader)
    with pytest.raises(SystemExit) as e:
        main(["import", str(pic), "-o", str(tmp_path / "s.json")])
    assert e.value.code == 2 and "neither an Nsight Compute report" in capsys.readouterr().err


def test_import_of_a_report_still_works(ncu_rep, tmp_path):
    r = run_cli("import", str(ncu_rep), "-o", str(tmp_path / "s.json"))
    assert r.returncode == 0, r.stderr


def test_export_takes_chrome_as_the_format_flag(tmp_path):
    out = tmp_path / "t.json"
    r = run_cli("export", "--chrome", str(SESSION), "-o", str(out))
    assert r.returncode == 0 and out.is_file(), r.stderr
    err = one_sentence_error(run_cli("export", "--chrome", str(SESSION)))
    assert "arguments are required" not in err and "-o OUT.json" in err
    old = tmp_path / "old.json"  # the older spelling: --chrome OUT after the session
    assert run_cli("export", str(SESSION), "--chrome", str(old)).returncode == 0 and old.is_file()
    assert "give the session" in one_sentence_error(run_cli("export", "-o", str(tmp_path / "x.json")))


def test_export_help_shows_the_output_as_required():
    r = run_cli("export", "--help")
    usage = r.stdout.splitlines()[0]
    assert r.returncode == 0 and " -o OUT.json" in usage and "[-o" not in usage, usage


def test_the_import_advice_can_be_copied_without_the_sentence_period(tmp_path):
    """The command sat at the end of the sentence, so the closing period came with it when copied."""
    from kernelscope.collect.file_kind import not_a_session

    trace = tmp_path / "t.pt.trace.json"
    trace.write_text('{"schemaVersion": 1, "traceEvents": [], "deviceProperties": []}')
    text = not_a_session(trace)
    assert text is not None and f"`kernelscope import {trace}`" in text and not text.endswith(str(trace))
