"""Trace pass on a real GPU: run on the GPU machine (pytest -m gpu)."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.gpu


def test_python_api_records_kernels_with_config_and_regions():
    import torch

    import kernelscope

    x = torch.randn(2048, 2048, device="cuda", dtype=torch.float16)
    with kernelscope.profile() as s:
        with kernelscope.region("mm"):
            y = x @ x
        z = torch.relu(y)
    assert s.collectors["trace"].status == "ok"
    mm = [x for x in s.launches if "mm" in x.regions]
    assert mm, "the matmul kernel was not attributed to its region"
    assert all(x.duration_ns > 0 and x.blocks > 0 for x in s.launches)
    assert all(isinstance(x.value("registers_per_thread"), int) for x in s.launches)
    relu = [x for x in s.launches if "mm" not in x.regions]
    # outside the region only the trace pass's own step mark (ProfilerStep#N) may be open
    assert relu and all(all(r.startswith("ProfilerStep#") for r in x.regions) for x in relu), [x.regions for x in relu]
    assert float(z.float().sum()) >= 0


def test_device_from_driver_matches_torch():
    import torch

    from kernelscope.collect.driver import query_device

    d = query_device(0)
    p = torch.cuda.get_device_properties(0)
    assert d.name == p.name
    assert d.compute_capability == (p.major, p.minor)
    assert d.value("sm_count") == p.multi_processor_count
    assert d.value("l2_cache_bytes") == p.L2_cache_size
    assert d.value("max_shared_memory_per_sm_bytes") == p.shared_memory_per_multiprocessor
    assert d.value("total_memory_bytes") == p.total_memory


def test_cli_run_then_show_json(tmp_path):
    out = tmp_path / "s.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))  # the checkout's kernelscope, installed or not
    r = subprocess.run([sys.executable, "-m", "kernelscope", "run", "-o", str(out), "--", sys.executable,
                        str(ROOT / "tests/workloads/mixed.py")], capture_output=True, text=True, cwd=ROOT, env=env)
    assert r.returncode == 0, r.stderr
    assert "checksum" in r.stdout  # the workload's stdout passes through
    show = subprocess.run([sys.executable, "-m", "kernelscope", "show", str(out), "--json"],
                          capture_output=True, text=True, check=True, env=env)
    import json

    doc = json.loads(show.stdout)
    names = " ".join(k["name"] for k in doc["kernels"])
    assert "flash" in names and "_scaled_add" in names
