"""Provenance of an imported Nsight Compute report: when ncu captured it (read from the
.ncu-rep itself), when it was imported, and which collector gave each launch's grid and
block. Checked on the reports recorded on the H100."""
from __future__ import annotations

import datetime as dt
import gzip
import json
import lzma
import re

import pytest

from conftest import DATA, run_cli
from kernelscope.analyze.kernel_table import NCU_BLOCK, NCU_GRID, dims_source, summarize
from kernelscope.collect.ncu.rep_times import read_report_times
from kernelscope.model import Session
from ncu_fixtures import report_file

REPORTS = ["ncu_h100_access_patterns", "ncu_h100_handmade_default", "ncu_h100_region"]


def _t(iso: str) -> dt.datetime:
    return dt.datetime.fromisoformat(iso)


@pytest.mark.parametrize("name", REPORTS)
def test_capture_times_come_from_the_report(tmp_path, name):
    """One session creation time, then one time per kernel result, in profiling order and no
    earlier than the session; as many results as ncu_report reads."""
    from kernelscope.collect.ncu.report_reader import read_report

    path = report_file(name, tmp_path)
    times = read_report_times(path)
    assert times.missing_reason is None and times.session_created_utc is not None
    session = _t(times.session_created_utc)
    results = [_t(x) for x in times.result_created_utc]
    assert len(results) == len(read_report(path).kernels)
    assert results == sorted(results) and session <= results[0]
    assert results[-1] - session < dt.timedelta(minutes=10)  # one short ncu run per report
    assert read_report(path).times == times


def test_capture_time_agrees_with_the_recording_script(tmp_path):
    """scripts/record.sh counters runs `kernelscope run --counters` (session_h100_counters, whose
    created_utc is kernelscope's own clock) and then `ncu -o handmade_cuda` (this report): the
    report's creation time must fall shortly after that session began. Needs no ncu_report."""
    path = tmp_path / "r.ncu-rep"
    path.write_bytes(lzma.decompress((DATA / "ncu_h100_handmade_default.ncu-rep.xz").read_bytes()))
    captured = _t(read_report_times(path).session_created_utc)
    run_began = _t(json.loads(gzip.decompress((DATA / "session_h100_counters.json.gz").read_bytes()))["created_utc"])
    assert dt.timedelta(0) < captured - run_began < dt.timedelta(minutes=10)


def test_damaged_or_foreign_files_give_a_reason_not_an_exception(tmp_path):
    good = report_file("ncu_h100_access_patterns", tmp_path).read_bytes()
    cases = {"text": b"not a report", "empty": b"", "header only": good[:12], "truncated": good[:5000],
             "garbled": good[:8] + bytes(range(256)) * 4}
    for label, data in cases.items():
        p = tmp_path / "x.ncu-rep"
        p.write_bytes(data)
        t = read_report_times(p)
        assert t.session_created_utc is None and t.result_created_utc == (), label
        assert t.missing_reason and "\n" not in t.missing_reason, label
    assert "could not be read" in read_report_times(tmp_path / "missing.ncu-rep").missing_reason


def test_imported_session_says_captured_and_imported_and_ncu_gave_grid_and_block(tmp_path):
    rep = report_file("ncu_h100_handmade_default", tmp_path)
    out = tmp_path / "imported.json"
    before = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
    r = run_cli("import", str(rep), "-o", str(out))
    assert r.returncode == 0, r.stderr
    s = Session.load(out)
    details = s.collectors["counters"].details
    assert details["imported"] is True
    assert details["report_created_utc"] == read_report_times(rep).session_created_utc
    assert _t(s.created_utc) >= before  # created_utc is the import, not the capture
    assert all(dims_source(x) == (NCU_GRID, NCU_BLOCK) for x in s.launches)
    assert {(c.grid_source, c.block_source) for k in summarize(s).kernels for c in k.configs} == {(NCU_GRID, NCU_BLOCK)}

    shown = run_cli("show", str(out), "--width", "140", "--no-color")
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    captured = re.search(r"Captured \(ncu report\)\s+(\S+) · kernel results (\S+) to (\S+)", text)
    assert captured and captured.group(1) == details["report_created_utc"]
    assert re.search(r"Imported\s+" + re.escape(s.created_utc), text)
    assert "Recorded" not in text and "cupti: grid" not in text and "cupti: block" not in text
    assert text.count("ncu: launch__grid_dim_x/y/z") == text.count("ncu: launch__block_dim_x/y/z") >= 1


def test_trace_sessions_keep_recorded_and_cupti_and_merged_counter_launches_keep_cupti():
    """A `run --counters` session: the trace pass made the launches (CUPTI records), the counter
    pass only added metrics, so grid and block stay CUPTI's; the header says Recorded."""
    s = Session.load(DATA / "session_h100_counters.json.gz")
    profiled = [x for x in s.launches if x.counters]
    assert profiled and all(dims_source(x) == ("cupti: grid", "cupti: block") for x in profiled)
    r = run_cli("show", str(DATA / "session_h100_counters.json.gz"), "--width", "140", "--no-color")
    assert r.returncode == 0 and "Recorded" in r.stdout and "Captured (ncu report)" not in r.stdout


def test_a_launch_with_neither_mark_says_its_source_was_not_recorded():
    from kernelscope.model import Launch

    assert dims_source(Launch("k", (1, 1, 1), (32, 1, 1), start_ns=None, duration_ns=1)) == (
        "source not recorded", "source not recorded")
