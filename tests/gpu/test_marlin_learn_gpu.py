"""`learn marlin` and `demo` on a real GPU: they run the W4A16 kernel and walk through its launch."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT

pytestmark = pytest.mark.gpu


def ks(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "kernelscope", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env, timeout=240)


def test_learn_marlin_records_a_launch_and_walks_through_it(tmp_path):
    from kernelscope.kernels.marlin.workload import CALLS
    from kernelscope.kernels.marlin.walkthrough import GemmPlan, build_walkthrough, find_calls, plan_of
    from kernelscope.model import Session

    out = tmp_path / "marlin.json"
    r = ks("learn", "marlin", "--m", "16", "--k", "4096", "--n", "4096", "-o", str(out), "--width", "120",
           "--no-color")
    assert r.returncode == 0, r.stderr
    assert "No CUDA GPU" not in r.stdout and "Walkthrough · _w4a16_kernel" in r.stdout
    s = Session.load(out)
    plan = plan_of(s)
    assert plan == GemmPlan(16, 4096, 4096)
    calls = find_calls(s, plan)
    assert len(calls.launches) == CALLS and all(x.duration_ns > 0 for x in calls.launches)
    assert all(x.grid == plan.grid and x.block == (plan.threads, 1, 1) for x in calls.launches)
    assert isinstance(calls.launches[0].value("registers_per_thread"), int)
    assert plan.split_k > 1 and plan.fused_split_sum and not any(calls.epilogues), \
        "split_k > 1 is summed inside the launch: no kernel follows the GEMM in its region"
    walk = build_walkthrough(s, plan)
    copy = walk.figure("device-to-device copy bandwidth")
    assert not copy.is_missing and copy.value > 1e11  # bytes/s: an HBM copy, far above PCIe
    assert s.environment["w4a16_relative_error"] < 1e-2
    assert s.environment["w4a16_compiled"].get("mma_instructions"), s.environment["w4a16_compiled"]


def test_demo_profiles_the_w4a16_kernel_end_to_end(tmp_path):
    r = ks("demo", "-f", "-o", str(tmp_path / "demo.json"), "--width", "120", "--no-color")
    assert r.returncode == 0, r.stderr
    assert "relative error vs the fp32 reference" in r.stderr  # one line on stderr, before the panels
    assert "Kernel configuration · _w4a16_kernel" in r.stdout
    # the trace pass marks its step too (ProfilerStep#0), so the region is one of those listed
    regions = next(line for line in r.stdout.splitlines() if "regions:" in line)
    assert "w4a16_gemm" in regions, regions
    assert "Data packing · Marlin INT4 (real weights)" in r.stdout
