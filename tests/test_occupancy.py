"""The occupancy calculator against Nsight Compute's own figures, recorded on an H100.

Each row of tests/data/ncu_occupancy_h100_*.csv is one real kernel launch
(cuBLAS, cuDNN, PyTorch, flash attention, Triton) profiled with ncu's
LaunchStats + Occupancy sections (scripts/record_fixtures.sh).
"""
from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

from conftest import DATA, ROOT
from kernelscope.analyze.arch import UnknownArchError, arch_for
from kernelscope.analyze.occupancy import OccupancyInputError, theoretical_occupancy

ROWS = [row for path in sorted(DATA.glob("ncu_occupancy_h100_*.csv")) for row in csv.DictReader(open(path))]


def _dedup(rows):
    seen, out = set(), []
    for r in rows:
        key = (r["block_size"], r["registers_per_thread"], r["smem_static_bytes"], r["smem_dynamic_bytes"],
               r["smem_config_bytes"])
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out


CASES = _dedup(ROWS)


def _ids(r):
    return f"{r['kernel'][:40]}-b{r['block_size']}-r{r['registers_per_thread']}-s{r['smem_dynamic_bytes']}"


def test_fixture_covers_every_limiter_and_several_libraries():
    assert len(CASES) >= 10
    names = " ".join(r["kernel"] for r in ROWS)
    for lib in ("nvjet", "cudnn", "flash", "at::", "_scaled_add"):
        assert lib in names
    limiters = set()
    for r in CASES:
        lim = {k: int(r[f"limit_{k}"]) for k in ("warps", "registers", "shared_mem", "blocks")}
        limiters |= {k for k, v in lim.items() if v == min(lim.values())}
    assert {"warps", "registers", "shared_mem"} <= limiters


@pytest.mark.parametrize("r", CASES, ids=[_ids(r) for r in CASES])
def test_matches_ncu_with_the_launch_carveout(r):
    smem = int(r["smem_static_bytes"]) + int(r["smem_dynamic_bytes"])
    res = theoretical_occupancy(f"sm_{r['cc'].replace('.', '')}", int(r["block_size"]), int(r["registers_per_thread"]),
                                smem, int(r["smem_config_bytes"]))
    assert res.blocks_limit == {"warps": int(r["limit_warps"]), "registers": int(r["limit_registers"]),
                                "shared_memory": int(r["limit_shared_mem"]), "blocks": int(r["limit_blocks"])}
    assert res.theoretical_occupancy_pct == pytest.approx(float(r["theoretical_occupancy_pct"]), abs=0.01)


@pytest.mark.parametrize("r", CASES, ids=[_ids(r) for r in CASES])
def test_matches_ncu_with_the_default_largest_carveout(r):
    """Without the carveout (the trace pass does not record it) occupancy must still agree."""
    smem = int(r["smem_static_bytes"]) + int(r["smem_dynamic_bytes"])
    res = theoretical_occupancy("sm_90", int(r["block_size"]), int(r["registers_per_thread"]), smem)
    assert res.theoretical_occupancy_pct == pytest.approx(float(r["theoretical_occupancy_pct"]), abs=0.01)


def test_register_allocation_rounds_per_warp_and_partition():
    # 168 regs x 32 lanes = 5376 -> 5376 (multiple of 256); 16384 // 5376 = 3 warps per partition
    assert theoretical_occupancy("sm_90", 384, 168).blocks_limit["registers"] == 1
    # 255 regs -> 8160 -> 8192 per warp: 2 warps per partition, 8 per SM
    assert theoretical_occupancy("sm_90", 128, 255).blocks_limit["registers"] == 2


def test_other_architectures_use_their_table():
    r86 = theoretical_occupancy("sm_86", 1024, 32)
    assert r86.max_warps_per_sm == 48 and r86.active_blocks_per_sm == 1
    assert r86.theoretical_occupancy_pct == pytest.approx(100 * 32 / 48)
    assert theoretical_occupancy("8.9", 64, 16).blocks_limit["blocks"] == 24
    assert arch_for((8, 0)).max_shared_memory_per_sm_bytes == 164 * 1024


@pytest.mark.parametrize("args,msg", [
    ((2048, 32, 0), "cannot launch"),
    ((256, 300, 0), "registers per thread"),
    ((256, 32, 300_000), "exceeds"),
])
def test_impossible_configurations_are_refused(args, msg):
    with pytest.raises(OccupancyInputError, match=msg):
        theoretical_occupancy("sm_90", *args)


def test_unknown_arch():
    with pytest.raises(UnknownArchError, match="sm_99"):
        arch_for("sm_99")


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "kernelscope", *args], capture_output=True, text=True,
                          cwd=ROOT, env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})


def test_cli_json_matches_ncu_for_the_cublas_kernel():
    nvjet = next(r for r in ROWS if r["kernel"].startswith("nvjet"))
    smem = int(nvjet["smem_static_bytes"]) + int(nvjet["smem_dynamic_bytes"])
    r = _cli("occupancy", "--arch", "sm_90", "--block", nvjet["block_size"], "--regs",
             nvjet["registers_per_thread"], "--smem", str(smem), "--json")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["theoretical_occupancy_pct"] == pytest.approx(float(nvjet["theoretical_occupancy_pct"]))
    expected_blocks = min(int(nvjet[f"limit_{k}"]) for k in ("warps", "registers", "shared_mem", "blocks"))
    assert out["active_blocks_per_sm"] == expected_blocks
    assert out["limiter"] in ("registers", "shared_memory")


def test_cli_bad_input_is_one_sentence():
    r = _cli("occupancy", "--arch", "sm_90", "--block", "4096", "--regs", "32")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.count("\n") == 1 and "cannot launch" in r.stderr
