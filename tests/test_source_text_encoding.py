"""Source text in an Nsight Compute report that is not UTF-8 (a Latin-1 comment, invalid bytes): the report is
read, its counters kept, the text drawn with replacement characters and checksummed as the bytes it holds.

The reports are a recorded one (tests/data/source/divergence_defect, H100, ncu 2025.3.1) with one byte of its
embedded source changed in place (the report stores the text as it is, so its length is unchanged)."""
from __future__ import annotations

import lzma
from pathlib import Path

import pytest

from conftest import DATA

COMMENT = b"// The suite's CUDA C++ kernels"
HOT = b"  int t = blockIdx.x * blockDim.x + threadIdx.x;"  # line 66: among the kept hot lines' text


def _report(where: Path, name: str, find: bytes = b"", offset: int = 0, byte: int = 0) -> Path:
    """The recorded report with the byte at ``offset`` into the first ``find`` replaced."""
    pytest.importorskip("ncu_report", reason="the ncu-report package reads .ncu-rep files (pip install ncu-report)")
    raw = bytearray(lzma.decompress((DATA / "source" / "divergence_defect.ncu-rep.xz").read_bytes()))
    if find:
        at = raw.index(find) + offset
        raw[at] = byte
    out = where / f"{name}.ncu-rep"
    out.write_bytes(bytes(raw))
    return out


def _kernel(path: Path):
    from kernelscope.collect.ncu.report_reader import read_report

    (k,) = read_report(path).kernels
    return k


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    return _kernel(_report(tmp_path_factory.mktemp("plain"), "plain"))


def test_a_latin1_comment_keeps_every_counter(tmp_path, plain):
    path = _report(tmp_path, "latin1", COMMENT, COMMENT.index(b"'"), 0xE9)  # é in Latin-1
    k = _kernel(path)
    assert k.metrics == plain.metrics
    assert [(ln.line, ln.counts, ln.stalls) for ln in k.source_lines.lines] == \
        [(ln.line, ln.counts, ln.stalls) for ln in plain.source_lines.lines]
    (f,) = k.source_lines.files
    assert f.sha256 != plain.source_lines.files[0].sha256  # the checksum is of the bytes the report holds
    assert f.line_count == plain.source_lines.files[0].line_count and f.excerpt == plain.source_lines.files[0].excerpt


def test_invalid_utf8_in_a_hot_line_is_drawn_with_a_replacement_character(tmp_path, plain):
    path = _report(tmp_path, "invalid", HOT, HOT.index(b"blockIdx"), 0xFF)
    k = _kernel(path)
    assert [ln.counts for ln in k.source_lines.lines] == [ln.counts for ln in plain.source_lines.lines]
    (f,) = k.source_lines.files
    assert f.excerpt[66] == "  int t = \ufffdlockIdx.x * blockDim.x + threadIdx.x;"
    assert plain.source_lines.files[0].excerpt[66] == HOT.decode()


def test_the_import_writes_a_session_that_loads(tmp_path):
    from kernelscope.cli import main
    from kernelscope.model import Session

    path = _report(tmp_path, "invalid", HOT, HOT.index(b"blockIdx"), 0xFF)
    assert main(["import", str(path), "-o", str(tmp_path / "s.json")]) == 0
    (x,) = Session.load(tmp_path / "s.json").detailed_launches(having="source_lines")
    assert "\ufffd" in x.source_lines.files[0].excerpt[66]
