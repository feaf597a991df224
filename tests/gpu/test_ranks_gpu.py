"""`kernelscope run -- torchrun` on 2 GPUs: every rank recorded, the planted straggler named, rank 0's
wait per all-reduce within 10% of the planted delay (the straggler's spin kernel, measured in its trace)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = ROOT / "tests" / "workloads" / "ddp_straggler.py"

pytestmark = [pytest.mark.gpu, pytest.mark.multigpu]


def _ks(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "kernelscope", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=240)


def test_torchrun_records_every_rank_and_names_the_straggler(tmp_path: Path) -> None:
    torchrun = shutil.which("torchrun") or "torchrun"
    out = tmp_path / "s.json"
    r = _ks("run", "-o", str(out), "--", torchrun, "--nproc-per-node", "2", "--master-port", "29541",
            str(WORKLOAD), "--steps", "5", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(_ks("show", str(out), "--json", cwd=tmp_path).stdout)
    assert [x["rank"] for x in doc["ranks"]] == [0, 1]
    assert doc["ranks_summary"]["straggler_rank"] == 1
    from kernelscope.model import Session

    s = Session.load(out)
    delays = [x.duration_ns for x in s.launches if x.rank == 1 and "spin_kernel" in x.kernel]  # in time order
    waited = [c for c in doc["collectives"] if c["name"] == "allreduce" and c["straggler_rank"] == 1
              and c["ranks"]["0"]["wait_ns"] > 1e5]  # the first all-reduce of each step, in time order
    assert delays and len(waited) == len(delays) >= 4  # one planted delay per step
    for c, delay in zip(waited, delays):
        assert abs(c["ranks"]["0"]["wait_ns"] - delay) <= 0.1 * delay
    text = _ks("show", str(out), "--width", "140", "--panels", "0", cwd=tmp_path).stdout
    assert "straggler of the run: rank 1" in text and "GPU0 waits for GPU1" in text
