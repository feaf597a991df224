"""`kernelscope demo` without a GPU (issue 36, item 7): -o writes what it names, --brief stops after the verdict,
and a missing library is named with the command that installs it."""
from __future__ import annotations

import importlib.util
import sys

import pytest

from conftest import one_sentence_error, run_cli
from kernelscope.collect.driver import gpu_available
from kernelscope.model import Session

pytestmark = pytest.mark.skipif(gpu_available()[0], reason="this machine has a GPU: the demo profiles for real")
PACKING = "Data packing · Marlin INT4"


def test_demo_with_output_writes_the_bundled_session_there(tmp_path):
    from kernelscope.bundled_session import bundled_session

    out = tmp_path / "d.json"
    r = run_cli("demo", "-o", str(out), "--brief", "--no-color")
    assert r.returncode == 0, r.stderr
    assert out.is_file() and "nothing was profiled" in r.stderr and str(out) in r.stderr
    bundled, _ = bundled_session()
    written = Session.load(out)
    assert len(written.launches) == len(bundled.launches) and written.created_utc == bundled.created_utc
    assert "already exists" in one_sentence_error(run_cli("demo", "-o", str(out), "--brief"))
    assert run_cli("demo", "-o", str(out), "-f", "--brief").returncode == 0


def test_demo_without_output_writes_nothing(tmp_path):
    r = run_cli("demo", "--brief", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert list(tmp_path.iterdir()) == []


def test_demo_brief_stops_after_the_verdict():
    r = run_cli("demo", "--brief", "--no-color", "--width", "100")
    assert r.returncode == 0, r.stderr
    assert "Verdict" in r.stdout and PACKING not in r.stdout and "packing panel" not in r.stdout
    assert "Kernels by total GPU time" not in r.stdout


@pytest.mark.parametrize("gpu", [False, True])
def test_the_packing_line_names_the_install_command(monkeypatch, gpu):
    from kernelscope.collect import driver

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "torch" else real(n, *a))
    monkeypatch.setitem(sys.modules, "kernelscope.kernels.marlin.explain", None)  # its import fails, as without torch
    monkeypatch.setattr(driver, "driver_gpu", lambda: (gpu, "" if gpu else "no driver"))
    monkeypatch.setattr(driver, "gpu_available", lambda also_needs=(): (False, "no driver"))
    code, out, err = run_cli("demo", "--no-color", "--width", "200")
    last = " ".join(out.rsplit("╯", 1)[1].split())  # the line after the last panel, however it wrapped
    assert code == 0 and "needs torch and numpy" in last and "pip install torch" in last, last
    assert ("--index-url https://download.pytorch.org/whl/cpu" in last) == (not gpu), last
