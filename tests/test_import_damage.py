"""Damage in an imported Nsight Compute report that its reader does not see, found when the session it makes is
checked before writing: said as damage of the report (which result, which field), not of the session file
that was not written. Time ~3 s (one import in a child process); memory ~100 MiB."""
from __future__ import annotations

import lzma

import pytest

from conftest import DATA, one_sentence_error, run_cli


def test_a_report_with_a_damaged_kernel_name_names_the_result_and_the_field(tmp_path):
    pytest.importorskip("ncu_report", reason="the ncu-report package reads .ncu-rep files (pip install ncu-report)")
    data = bytearray(lzma.decompress((DATA / "ncu_h100_region.ncu-rep.xz").read_bytes()))
    data[114931] ^= 1  # one bit of the result's function name (found by flipping bits, as the fuzz tests do)
    report = tmp_path / "flipped.ncu-rep"
    report.write_bytes(bytes(data))
    out = tmp_path / "f.json"
    error = one_sentence_error(run_cli("import", str(report), "-o", str(out)))
    assert error == (f"kernelscope: error: nothing was written: {report} is damaged: result 0: its kernel name is "
                     "unreadable (expected a string, found null).")
    assert not out.exists()
