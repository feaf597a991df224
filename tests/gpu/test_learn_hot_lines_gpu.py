"""`learn marlin` on a GPU with ncu: the W4A16 kernel's hot lines come from a live counter pass with the source
sections (not the bundled H100 pass), each labelled by its SASS."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.gpu


def test_learn_marlin_shows_hot_lines_from_a_live_counter_pass():
    if shutil.which("ncu") is None and not os.path.isfile("/usr/local/cuda/bin/ncu"):
        pytest.skip("ncu (Nsight Compute) is not installed here")
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    r = subprocess.run([sys.executable, "-m", "kernelscope", "learn", "marlin", "--width", "200", "--no-color"],
                       capture_output=True, text=True, cwd=ROOT, env=env, timeout=400)
    assert r.returncode == 0, r.stderr
    assert "profiling one W4A16 launch under ncu for its hot lines" in r.stderr
    assert "Hot lines · _w4a16_kernel" in r.stdout
    assert "Hot lines below:" not in r.stdout  # that sentence comes only with the bundled pass
    hot = r.stdout.split("Hot lines · _w4a16_kernel")[1]
    for phase in ("MMA (", "unpack (", "loads ("):
        assert phase in hot, phase
