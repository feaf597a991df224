"""The W4A16 tuner's candidate order (kernels/marlin/tune_space.py) against the H100 graph-time sweep.

The expected launches are the fastest ones measured on the H100 (132 SMs; docs/decisions/0004):
the tuner has time for 2-3 candidates on first use, so the measured winners must come early.
"""
from __future__ import annotations

import itertools

import pytest

pytest.importorskip("torch")  # the marlin package (its format module, gluon_host) imports torch

from kernelscope.kernels.marlin.launch import LaunchConfig, rule_launch  # noqa: E402
from kernelscope.kernels.marlin.tune_space import (CAPPED_REGISTERS, candidates, wide_launch)  # noqa: E402

SMS = 132


@pytest.mark.parametrize("m, k, n, split", [
    (128, 5120, 5120, 2),  # 2 row tiles x 80 column tiles x 2 = 320 programs; cuBLAS 1.12x slower there
    (128, 4096, 4096, 2),
    (64, 4096, 4096, 4),
    (64, 13824, 5120, 4),
    (128, 3584, 18944, 1),  # 592 programs even unsplit: no split
])
def test_wide_launch_is_the_measured_winner(m, k, n, split):
    launch = wide_launch(m, k, n, SMS, tma=True)
    assert (launch.block_m, launch.block_n, launch.split_k, launch.tma) == (64, 64, split, True)
    assert candidates(m, k, n, SMS, True)[1] == launch  # right after the rule


def test_wide_launch_split_divides_k():
    for k in (2048, 3584, 5120, 6656, 13824):
        launch = wide_launch(128, k, 4096, SMS, tma=False)
        assert k % (launch.split_k * 128) == 0 and launch.tma is False


def test_capped_registers_only_for_grids_past_one_wave():
    # 6656x17920 m = 1: 140 column tiles x 4 = 560 programs > 4 x 132: the capped launch (fastest measured) is offered
    got = candidates(1, 6656, 17920, SMS, True)
    capped = [c for c in got if c.max_registers == CAPPED_REGISTERS]
    assert any((c.block_n, c.split_k) == (128, 4) for c in capped)
    assert got.index(capped[0]) <= 2
    # 5120x13824 m = 1: 108 x 4 = 432 programs fit 4 per SM: that launch is not offered capped
    got = candidates(1, 5120, 13824, SMS, True)
    assert not any(c.max_registers and (c.block_n, c.split_k) == (128, 4) for c in got)
    assert got[0] == rule_launch(1, 5120, True)


@pytest.mark.parametrize("m", [1, 16, 64, 128])
def test_candidates_unique_and_within_limit(m):
    got = candidates(m, 5120, 5120, SMS, True, limit=10)
    assert len(got) <= 10 and len(set(got)) == len(got)
    for c in got:
        assert 5120 % (c.split_k * 128) == 0 and 5120 % c.block_n == 0


@pytest.mark.parametrize("k, n, programs, per_sm", [(5120, 13824, 216, 2), (13824, 5120, 240, 2), (5120, 5120, 240, 2),
                                                    (4096, 4096, 256, 2), (3584, 18944, 296, 3), (6656, 17920, 280, 3),
                                                    (8192, 28672, 448, 4), (4096, 128256, 264, 2)])
def test_gluon_grid_rule(k, n, programs, per_sm):
    """Whole multiples of the column tiles within two programs an SM, else one program a tile up to four an SM, else
    two an SM sharing tiles (test_launch_rule_picks_the_sweeps_fastest_grid checks the rule against the recorded
    sweeps)."""
    from kernelscope.kernels.marlin.tune_space import gluon_programs

    assert gluon_programs(k, n, SMS) == (programs, per_sm)
    assert gluon_programs(256, 64, SMS) == (2, 2)  # never more programs than (tile, k block) units


def test_gluon_launch_registers_fit_its_programs_an_sm():
    """The registers at launch let the rule's programs (8 warps each) be resident at once: 65536 a SM."""
    from kernelscope.kernels.marlin.tune_space import gluon_launch, gluon_programs

    for k, n in ((5120, 13824), (3584, 18944), (8192, 28672), (4096, 4096)):
        launch = gluon_launch(k, n, SMS, 1)
        _, per_sm = gluon_programs(k, n, SMS)
        assert per_sm * 256 * launch.max_registers <= 65536 < (per_sm + 1) * 256 * launch.max_registers
    assert gluon_launch(5120, 13824, SMS, 1).num_stages == 6  # two an SM, 40 blocks each
    assert gluon_launch(4096, 4096, SMS, 1).num_stages == 4  # two an SM, 8 blocks each
    assert gluon_launch(8192, 28672, SMS, 1).num_stages == 4  # four an SM
    # mma.sync at m <= 8 below four programs an SM
    sync = [gluon_launch(5120, 13824, SMS, m).sync_mma for m in (1, 8, 9, 16)]
    assert sync == [True, True, False, False]
    assert gluon_launch(3584, 18944, SMS, 1).sync_mma and not gluon_launch(8192, 28672, SMS, 1).sync_mma


def test_gluon_launch_comes_first_where_the_device_runs_it():
    from kernelscope.kernels.marlin.tune_space import gluon_launch

    for m in (1, 16):
        got = candidates(m, 5120, 13824, SMS, True, gluon=True)
        want = LaunchConfig.gluon(programs=216, num_stages=6, max_registers=96, sync_mma=m <= 8)
        assert got[0] == gluon_launch(5120, 13824, SMS, m) == want
        assert got[1] == rule_launch(m, 5120, True)
        assert sum(c.kernel == "gluon" for c in got) == 1
    for m, n, gluon in ((65, 13824, True), (1, 13824, False), (1, 13856, True)):  # m > 64, no sm_90, n % 64 != 0
        assert not any(c.kernel == "gluon" for c in candidates(m, 5120, n, SMS, True, gluon=gluon))


def test_gluon_rows_of_the_table_are_not_warm_starts_for_other_shapes():
    gluon_row = LaunchConfig.gluon(programs=256, num_stages=4, max_registers=96)
    triton_row = LaunchConfig.triton(block_m=16, block_n=64, split_k=2, num_warps=4, num_stages=3, tma=True)
    got = candidates(1, 5120, 13824, SMS, True, warm_start=[gluon_row, triton_row], limit=30)
    assert gluon_row not in got and triton_row in got


def test_gluon_launch_is_what_w4a16_matmul_passes_to_the_kernel(monkeypatch):
    """A Gluon LaunchConfig reaches gluon_w4a16 field by field (the grid, stages, registers, mma.sync, PDL, cluster)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton.experimental.gluon")
    from kernelscope.kernels.marlin import gluon_kernel, w4a16_matmul
    from kernelscope.kernels.marlin.tune_space import gluon_launch

    seen = {}

    def fake(a, words, s, groupsize, n, **kw):
        seen.update(kw)
        return torch.zeros(a.shape[0], n, dtype=torch.float16)

    monkeypatch.setattr(gluon_kernel, "gluon_w4a16", fake)
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    a = torch.zeros(1, 3584, dtype=torch.float16)
    words = torch.zeros(3584 // 8, 18944, dtype=torch.int32)
    s = torch.zeros(3584 // 128, 18944, dtype=torch.float16)
    for m in (1, 16):
        config = gluon_launch(3584, 18944, SMS, m)
        w4a16_matmul(a, words, s, 128, config=config.with_pdl())
        assert (seen["programs"], seen["stages"], seen["max_registers"]) == (296, 4, 80)
        assert seen["sync_mma"] == (m <= 8) and seen["pdl"] is True and seen["cluster_size"] == 1


def test_cluster_launches_join_the_gluon_candidates_only_where_tiles_are_shared():
    """gluon_cluster_launch: where the rule's grid shares column tiles, one cluster launch follows the rule's (one
    program an SM at 4096x4096, S = 2; the rule's two programs a tile at 8192x8192, S = 2; two to three an SM at
    5120x5120, S = 4, 64 registers: room for four an SM); its S divides the tile's k blocks and its grid is the
    tiles x S; whole-tile grids get none."""
    from kernelscope.kernels.marlin.tune_space import gluon_candidates, gluon_launch

    for (k, n), want in {(4096, 4096): (2, 128, 6, 96), (5120, 5120): (4, 320, 4, 64),
                         (8192, 8192): (2, 256, 6, 96)}.items():
        rule, cluster = gluon_candidates(1, k, n, SMS)
        assert rule == gluon_launch(k, n, SMS, 1) and rule.programs > n // 64
        assert (cluster.cluster_size, cluster.programs, cluster.num_stages, cluster.max_registers) == want
        assert (k // 128) % cluster.cluster_size == 0 and cluster.programs == n // 64 * cluster.cluster_size
        assert cluster.sync_mma and not gluon_candidates(16, k, n, SMS)[1].sync_mma
    for k, n in [(5120, 13824), (3584, 18944), (8192, 28672)]:
        assert gluon_candidates(1, k, n, SMS) == [gluon_launch(k, n, SMS, 1)]


@pytest.mark.parametrize("k,n,grids", [(5120, 13824, [216]), (13824, 5120, [240]), (3584, 18944, [264, 296]),
                                       (4096, 4096, [128, 256]), (6656, 17920, [264, 280]), (8192, 28672, [264, 448]),
                                       (256, 256, [8])])
def test_gluon_launches_past_16_tokens(k, n, grids):
    """16 < m <= 64: the largest multiple of the tiles at one program an SM where it is two or more a tile, then the
    largest within two an SM (or, where the tiles are more, two an SM sharing tiles, then one program a tile), at 128
    registers and four stages
    (two programs an SM fit: 256 threads x 128 registers, and 2 x 82 KiB of stages at 64 tokens); they come first,
    before the Triton rule, at m = 17..64 and not past."""
    from kernelscope.kernels.marlin.gluon_host import MAX_M
    from kernelscope.kernels.marlin.tune_space import gluon_wide_launches

    got = gluon_wide_launches(k, n, SMS)
    assert [g.programs for g in got] == grids
    tiles, kb = n // 64, k // 128
    for g in got:
        assert (g.kernel, g.num_stages, g.max_registers) == ("gluon", 4, 128) and 256 * 128 * 2 <= 65536
        assert g.programs <= tiles * kb
        assert g.programs % tiles == 0 or g.programs == 2 * SMS < tiles
        assert g.programs <= 2 * SMS or g.programs == tiles
    for m in (17, 32, MAX_M):
        assert candidates(m, k, n, SMS, True, gluon=True)[:len(got)] == got
    assert not any(c.kernel == "gluon" for c in candidates(MAX_M + 1, k, n, SMS, True, gluon=True))


# Recorded graph-time sweeps of the Gluon kernel's launches (tests/data/w4a16_sweeps, 132 SMs, m = 1 and 16): the
# number of points at which each tried the rule's registers and stages.
SWEEPS = {"streamk_sweep_h100": 16, "streamk_sweep_h200": 12, "regs_sweep_h100": 12, "tiles_sweep_h100": 2,
          "sync_sweep_h100": 3}


def _sweep_points(run):
    """(point, layout, {(programs, maxnreg, stages): us}, the rule's key) for every point and layout of a sweep (the
    sweeps timed two weight layouts, "bg" and "bk"; the kernel ships "bk", the Triton kernel's)."""
    import gzip
    import json

    from conftest import DATA
    from kernelscope.kernels.marlin.tune_space import gluon_launch

    doc = json.load(gzip.open(DATA / "w4a16_sweeps" / f"{run}.json.gz"))
    for row, layout in itertools.product(doc["rows"], ("bg", "bk")):
        times = {(t["launch"]["programs"], t["launch"]["maxnreg"], t["launch"]["stages"]): t["us"]
                 for t in row["tried"] if t.get("status") == "ok" and t["launch"]["layout"] == layout}
        if times:
            rule = gluon_launch(row["k"], row["n"], 132, row["m"])
            yield row, layout, times, (rule.programs, rule.max_registers, rule.num_stages)


@pytest.mark.parametrize("run", list(SWEEPS))
def test_launch_rule_picks_the_sweeps_fastest_grid(run):
    """tune_space.gluon_launch against the recorded sweeps (132 SMs, m = 1 and 16): at every point where a sweep
    tried the rule's registers and stages, the rule's grid is the fastest at them (the count per sweep is in SWEEPS;
    at the other points a sweep did not try the rule's registers). The sync sweep timed mma.sync launches at m = 1,
    where the rule runs mma.sync."""
    checked = 0
    for _, _, times, (programs, regs, stages) in _sweep_points(run):
        same = {p: us for (p, r, st), us in times.items() if (r, st) == (regs, stages)}
        if programs in same:
            checked += 1
            assert min(same, key=same.get) == programs
    assert checked == SWEEPS[run]


@pytest.mark.parametrize("run", [r for r in SWEEPS if r.endswith("h100")])
def test_launch_rule_is_within_two_percent_of_the_fastest_launch(run):
    """The rule's whole launch (grid, registers, stages) against every launch the H100 sweeps timed at a point: at
    most 1.5 % slower (5120x13824 m = 16 and 5120x5120 m = 1 in the registers sweep), else the fastest."""
    checked = 0
    for row, _, times, key in _sweep_points(run):
        if key in times:
            checked += 1
            assert times[key] <= 1.016 * min(times.values()), (row["k"], row["n"], row["m"], key)
    assert checked == SWEEPS[run]
