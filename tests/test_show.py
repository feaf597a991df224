"""`show` on sessions recorded with `kernelscope run` on an H100: text snapshots at a
fixed width, and the occupancy it reports checked against ncu on the same kernels."""
from __future__ import annotations

import csv
import json
import re

import pytest

from conftest import assert_snapshot, DATA, draw, run_cli
from kernelscope.analyze.report import build_report
from kernelscope.model import Session
from kernelscope.render.show import ShowView

SESSIONS = sorted(DATA.glob("session_h100_*.json.gz"))


def render(session: Session, width: int = 120, top: int = 3, kernel: str | None = None) -> str:
    """Header, verdict (no measured ceilings: the tests have no calibration cache), table and panels."""
    return draw(ShowView(build_report(session, kernel, top), with_analysis=False), width)


@pytest.mark.parametrize("path", SESSIONS, ids=[p.name for p in SESSIONS])
def test_snapshot_at_120_columns(path):
    text = render(Session.load(path))
    assert_snapshot((path.name.replace(".json.gz", "") + ".w120.txt"), text)
    assert max(len(line) for line in text.splitlines()) <= 120


def test_show_json_occupancy_agrees_with_ncu_on_the_same_kernels():
    """The mixed workload ran under both the trace pass and ncu; match launches by configuration."""
    ncu = {}
    for r in csv.DictReader(open(DATA / "ncu_occupancy_h100_mixed.csv")):
        key = (int(r["block_size"]), int(r["registers_per_thread"]),
               int(r["smem_static_bytes"]) + int(r["smem_dynamic_bytes"]))
        ncu[key] = float(r["theoretical_occupancy_pct"])
    out = run_cli("show", str(DATA / "session_h100_mixed.json.gz"), "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    checked = 0
    for k in doc["kernels"]:
        for c in k["configurations"]:
            m = c["metrics"]
            threads = c["block"][0] * c["block"][1] * c["block"][2]
            key = (threads, m["registers per thread"]["value"], m["shared memory"]["value"])
            assert m["registers per thread"]["source"] == "cupti"
            if key in ncu:
                assert m["kernelscope.theoretical_occupancy_pct"]["value"] == pytest.approx(ncu[key], abs=0.01)
                assert m["kernelscope.theoretical_occupancy_pct"]["source"] == "derived"
                checked += 1
    assert checked >= 10


def test_panels_say_what_is_missing_and_why():
    text = render(Session.load(DATA / "session_h100_mixed.json.gz"), kernel="flash")
    text = " ".join(text.replace("│", " ").split())  # panel cells wrap: compare the words
    assert "Achieved occupancy" in text and "needs the counter pass (ncu)" in text
    assert "static + dynamic shared memory combined" in text
    assert "flash_fwd_kernel" in text and "12.5%" in text  # ncu: sm__maximum_warps_per_active_cycle_pct = 12.5


def test_failed_workload_session_keeps_its_kernels():
    s = Session.load(DATA / "session_h100_raises.json.gz")
    assert s.outcome == "workload-failed" and s.exit_code == 1
    assert s.launches, "launches made before the failure must be kept"
    text = render(s)
    assert "workload-failed, exit code 1" in text


def test_panel_titles_carry_no_out_of_order_numbers():
    r = run_cli("show", str(DATA / "session_h100_samples.json.gz"), "--width", "160", "--no-color", "--timeline", "5")
    titles = [line for line in r.stdout.splitlines() if line.startswith("╭─")]
    assert any("Profiling summary" in t for t in titles) and any("GPU stats" in t for t in titles)
    assert any("─ Timeline" in t for t in titles)
    assert not [t for t in titles if re.match(r"╭─ \d+ · ", t)], titles
