"""`kernelscope bench w4a16` on a real GPU (pytest -m gpu on the GPU machine): a tiny sweep, every row correct."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.gpu


def test_tiny_sweep_rows_are_ok_and_correct():
    from kernelscope.bench.w4a16 import IMPLEMENTATIONS, W4A16Settings, make_cases, run_w4a16_sweep

    results = run_w4a16_sweep(make_cases([1, 16], [(4096, 4096)]), IMPLEMENTATIONS,
                              W4A16Settings(warmup=2, repeats=5), command=["test"])
    assert len(results.rows) == 2 * len(IMPLEMENTATIONS)  # two m values, every implementation
    assert results.settings["copy_bandwidth_bytes_per_s"] > 1e11  # any HBM GPU copies faster than 100 GB/s
    for r in results.rows:
        assert r.status == "ok", f"{r.impl} m={r.params['m']}: {r.error}"
        assert r.get("relative_error") < 1e-2, (r.impl, r.params, r.get("relative_error"))
        assert r.get("median_ms") > 0 and r.get("pct_of_floor") > 0
        assert r.get("speedup_vs_cublas") > 0 and r.get("speedup_vs_tinygemm") > 0


def test_cli_end_to_end(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    out = tmp_path / "r.json"
    r = subprocess.run([sys.executable, "-m", "kernelscope", "bench", "w4a16", "--shapes", "4096x4096", "--m", "1",
                        "--repeats", "3", "--warmup", "1", "--no-progress", "--no-color", "--width", "120",
                        "-o", str(out)], capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr
    assert "W4A16 GEMM k=4096 n=4096 groupsize 128" in r.stdout and "w4a16 vs cublas" in r.stdout
    p = subprocess.run([sys.executable, "-m", "kernelscope", "plot", str(out), "--output-dir", str(tmp_path / "p"),
                        "--baseline", "cublas"],
                       capture_output=True, text=True, cwd=ROOT, env=env)
    assert p.returncode == 0 and "w4a16_time.png" in p.stdout, p.stderr
