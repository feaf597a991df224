"""The occupancy calculator against Nsight Compute's own figures, recorded on an H100.

Each row of tests/data/ncu_occupancy_h100_*.csv is one real kernel launch
(cuBLAS, cuDNN, PyTorch, flash attention, Triton) profiled with ncu's
LaunchStats + Occupancy sections (scripts/record.sh fixtures).
"""
from __future__ import annotations

import csv
import json

import pytest

from conftest import DATA, draw, run_cli
from kernelscope.analyze.arch import UnknownArchError, arch_for
from kernelscope.analyze.occupancy import OccupancyInputError, theoretical_occupancy
from kernelscope.render.occupancy_view import OccupancyView

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
    return run_cli(*args, env={"PATH": "/usr/bin:/bin"})


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


# -- sizes, carveouts and the newer architectures ------------------------------------------------

@pytest.mark.parametrize("text,expected", [("49152", 49152), ("48k", 49152), ("48K", 49152), ("48KiB", 49152),
                                           ("48kib", 49152), (" 100k ", 102400), ("0", 0)])
def test_cli_sizes_accept_bytes_and_kib_suffixes(text, expected):
    r = _cli("occupancy", "--arch", "sm_90", "--block", "256", "--regs", "32", "--smem", text, "--json")
    assert r.returncode == 0, r.stderr
    direct = theoretical_occupancy("sm_90", 256, 32, expected)
    assert json.loads(r.stdout) == json.loads(json.dumps(direct.as_json()))
    assert direct.shared_memory_per_block_bytes == expected


@pytest.mark.parametrize("flag,text", [("--smem", "48kb"), ("--smem", "48 M"), ("--smem", "-1"), ("--smem", "1.5k"),
                                       ("--smem", "k"), ("--smem-config", "lots")])
def test_cli_sizes_reject_anything_else_in_one_sentence(flag, text):
    r = _cli("occupancy", "--arch", "sm_90", "--block", "256", "--regs", "32", flag, text)
    assert r.returncode == 2 and "Traceback" not in r.stderr and r.stderr.count("\n") == 1, r.stderr
    assert f"{flag} {text!r} is not a size" in r.stderr


def test_carveout_must_be_one_the_architecture_offers():
    with pytest.raises(OccupancyInputError) as e:
        theoretical_occupancy("sm_90", 256, 32, 0, 5)
    msg = str(e.value)
    assert "5 bytes is not one sm_90 offers" in msg and "0, 8, 16, 32, 64, 100, 132, 164, 196, 228 KiB" in msg
    assert "\n" not in msg
    with pytest.raises(OccupancyInputError, match="0, 8, 16, 32, 64, 100 KiB"):
        theoretical_occupancy("sm_120", 256, 32, 0, 228 * 1024)  # a Hopper size on a 12.x part
    for kib in (8, 100, 228):  # every real size is accepted and used as given
        assert theoretical_occupancy("sm_90", 256, 32, 0, kib * 1024).shared_memory_config_bytes == kib * 1024


def test_cli_carveout_of_5_is_refused_and_100k_is_used():
    r = _cli("occupancy", "--arch", "sm_90", "--block", "256", "--regs", "32", "--smem-config", "5")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "carveouts are 0, 8, 16" in r.stderr
    r = _cli("occupancy", "--arch", "sm_90", "--block", "256", "--regs", "32", "--smem", "48k", "--smem-config", "100K",
             "--json")
    out = json.loads(r.stdout)
    # (49152 + 1024 reserved) rounded to 128 = 50176 B per block; 102400 // 50176 = 2 blocks
    assert out["shared_memory_config_bytes"] == 102400 and out["blocks_limit"]["shared_memory"] == 2


# Published per-compute-capability limits (CUDA C++ Programming Guide, Tables 30-32):
# (arch, warps/SM, blocks/SM, smem per SM KiB, smem per block KiB, largest carveout KiB)
PUBLISHED = [("sm_89", 48, 24, 100, 99, 100), ("sm_100", 64, 32, 228, 227, 228), ("sm_103", 64, 32, 228, 227, 228),
             ("sm_110", 48, 24, 228, 227, 228), ("sm_120", 48, 24, 100, 99, 100), ("sm_121", 48, 24, 100, 99, 100)]


@pytest.mark.parametrize("arch,warps,blocks,smem_sm,smem_block,carveout", PUBLISHED)
def test_new_architectures_compute_with_their_published_limits(arch, warps, blocks, smem_sm, smem_block, carveout):
    a = arch_for(arch)
    assert (a.max_warps_per_sm, a.max_blocks_per_sm, a.registers_per_sm, a.max_registers_per_thread) == (
        warps, blocks, 65536, 255)
    assert (
        a.max_shared_memory_per_sm_bytes == smem_sm * 1024 and a.max_shared_memory_per_block_bytes == smem_block * 1024
    )
    assert max(a.shared_memory_carveouts_kib) == carveout
    # A 1024-thread block (32 warps): one fits in 48 warps, two in 64.
    big = theoretical_occupancy(arch, 1024, 32)
    assert big.active_blocks_per_sm == warps // 32 and big.limiter == "warps"
    assert big.theoretical_occupancy_pct == pytest.approx(100 * 32 * (warps // 32) / warps)
    # One-warp blocks run into the resident-block cap before the warp limit.
    tiny = theoretical_occupancy(arch, 32, 16)
    assert tiny.active_blocks_per_sm == blocks and tiny.limiter == "blocks"
    # The largest block shared memory fits exactly once; a byte more is refused.
    assert theoretical_occupancy(arch, 128, 32, smem_block * 1024).active_blocks_per_sm == 1
    with pytest.raises(OccupancyInputError, match="exceeds"):
        theoretical_occupancy(arch, 128, 32, smem_block * 1024 + 1)


def test_sm_120_1024_thread_block_gives_one_block():
    r = theoretical_occupancy("sm_120", 1024, 32)
    assert r.active_blocks_per_sm == 1 and r.max_warps_per_sm == 48


def test_thor_is_found_by_its_old_and_new_name_and_suffixes_are_ignored():
    assert arch_for("sm_101") is arch_for("sm_110") is arch_for((11, 0)) is arch_for((10, 1))
    assert arch_for("sm_100a") is arch_for("100f") is arch_for("10.0") is arch_for("sm_100")


def test_only_checked_architectures_go_without_the_caveat():
    assert arch_for("sm_90").checked_against_ncu
    for name in ("sm_80", "sm_89", "sm_100", "sm_120"):
        r = theoretical_occupancy(name, 256, 32)
        assert not r.checked_against_ncu and "not yet checked against Nsight Compute on this hardware" in r.caveat
    assert theoretical_occupancy("sm_90", 256, 32).caveat is None
    shown = _cli("occupancy", "--arch", "sm_120", "--block", "1024", "--regs", "32", "--no-color")
    assert shown.returncode == 0 and "not yet checked against Nsight Compute" in " ".join(shown.stdout.split())
    assert "not yet checked" not in _cli("occupancy", "--arch", "sm_90", "--block", "1024", "--regs", "32").stdout
    out = json.loads(_cli("occupancy", "--arch", "sm_120", "--block", "1024", "--regs", "32", "--json").stdout)
    assert out["checked_against_ncu"] is False and out["active_blocks_per_sm"] == 1


def test_occupancy_that_fits_no_block_says_a_launch_fails():
    text = draw(OccupancyView(theoretical_occupancy("sm_90", 1024, 255, 0)), 100)
    assert "0 blocks × 32 warps" in text
    assert "No block of this configuration fits on one SM (registers allow 0): a launch with it fails." in text
    assert "fails" not in draw(OccupancyView(theoretical_occupancy("sm_90", 256, 64, 0)), 100)
