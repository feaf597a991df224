"""Refusals come before a slow import: a command that will refuse its input says so before it imports
matplotlib or torch (read from Python's own import log, -X importtime, in a process of its own)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import DATA, HANG_S, ROOT, run_cli


def _importing(argv: list[str]) -> subprocess.CompletedProcess:
    """The command with Python's import log on stderr (-X importtime)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-X", "importtime", "-m", "kernelscope", *argv], capture_output=True,
                          text=True, env=env, timeout=HANG_S)


def _imported(stderr: str) -> set[str]:
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def test_plot_refuses_an_existing_output_before_importing_matplotlib(tmp_path):
    pytest.importorskip("matplotlib")
    results = DATA / "bench_attention_h100.json"
    assert run_cli("plot", str(results), "--output-dir", str(tmp_path)).returncode == 0
    r = _importing(["plot", str(results), "--output-dir", str(tmp_path)])
    assert r.returncode == 2 and "already exists" in r.stderr
    assert not {m for m in _imported(r.stderr) if m.split(".")[0] == "matplotlib"}


def test_learn_refuses_a_bad_session_before_importing_torch(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    r = _importing(["learn", "marlin", "--session", str(bad)])
    assert r.returncode == 2 and "not a kernelscope session" in r.stderr
    assert "torch" not in {m.split(".")[0] for m in _imported(r.stderr)}
