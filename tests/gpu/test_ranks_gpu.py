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
    # torchrun beside this interpreter first: a venv's bin/ need not be on PATH
    torchrun = shutil.which("torchrun", path=os.path.dirname(sys.executable)) or shutil.which("torchrun")
    if torchrun is None:
        pytest.skip("needs torch's torchrun")
    out = tmp_path / "s.json"
    r = _ks("run", "-o", str(out), "--", torchrun, "--nproc-per-node", "2", "--master-port", "29541",
            str(WORKLOAD), "--steps", "5", cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    doc = json.loads(_ks("show", str(out), "--json", cwd=tmp_path).stdout)
    assert [x["rank"] for x in doc["ranks"]] == [0, 1]
    # the run's straggler counts steady collectives only (analyze/collectives.WARMUP_RULE): rank 0's first-step
    # start-up at the first all-reduce does not outweigh rank 1's planted delay at every step
    assert doc["ranks_summary"]["straggler_rank"] == 1, doc["ranks_summary"]
    from kernelscope.model import Session

    s = Session.load(out)
    sys.path.insert(0, str(ROOT / "tests"))  # test_ranks.py's helper, whatever pytest's import mode
    from test_ranks import planted_waits

    print("rank 0's wait, planted delay (ns):", planted_waits(s, doc))
    # the first step is warm-up (as for the run's straggler): each rank's own first-step start-up moves its
    # arrival too (measured on 2x H200, 2026-11-23: rank 0 waited 7.2 ms there for a 3.0 ms delay); the workload's
    # head start after it starts every later step on both GPUs together, ahead of the hosts' launches
    steady = planted_waits(s, doc, after_step=1)
    assert len(steady) >= 3
    for wait, delay in steady:
        assert abs(wait - delay) <= 0.1 * delay
    text = _ks("show", str(out), "--width", "140", "--panels", "0", cwd=tmp_path).stdout
    assert "GPU0 waits for GPU1" in text and "straggler of the run: rank 1" in text
