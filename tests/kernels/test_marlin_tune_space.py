"""The W4A16 tuner's candidate order (kernels/marlin/tune_space.py) against the H100 graph-time sweep.

The expected launches are the fastest ones measured on the H100 (132 SMs; docs/decisions/0004):
the tuner has time for 2-3 candidates on first use, so the measured winners must come early.
"""
from __future__ import annotations

import pytest

pytest.importorskip("torch")  # the marlin package (its format module, gluon_args) imports torch

from kernelscope.kernels.marlin.configs import rule_launch  # noqa: E402
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
    assert (launch["block_m"], launch["block_n"], launch["split_k"], launch["tma"]) == (64, 64, split, True)
    assert candidates(m, k, n, SMS, True)[1] == launch  # right after the rule


def test_wide_launch_split_divides_k():
    for k in (2048, 3584, 5120, 6656, 13824):
        launch = wide_launch(128, k, 4096, SMS, tma=False)
        assert k % (launch["split_k"] * 128) == 0 and "tma" not in launch


def test_capped_registers_only_for_grids_past_one_wave():
    # 6656x17920 m = 1: 140 column tiles x 4 = 560 programs > 4 x 132: the capped launch (fastest measured) is offered
    got = candidates(1, 6656, 17920, SMS, True)
    capped = [c for c in got if c.get("maxnreg") == CAPPED_REGISTERS]
    assert any((c["block_n"], c["split_k"]) == (128, 4) for c in capped)
    assert got.index(capped[0]) <= 2
    # 5120x13824 m = 1: 108 x 4 = 432 programs fit 4 per SM: that launch is not offered capped
    got = candidates(1, 5120, 13824, SMS, True)
    assert not any(c.get("maxnreg") and (c["block_n"], c["split_k"]) == (128, 4) for c in got)
    assert got[0] == rule_launch(1, 5120, True)


@pytest.mark.parametrize("m", [1, 16, 64, 128])
def test_candidates_unique_and_within_limit(m):
    got = candidates(m, 5120, 5120, SMS, True, limit=10)
    assert len(got) <= 10 and len({tuple(sorted(c.items())) for c in got}) == len(got)
    for c in got:
        assert 5120 % (c["split_k"] * c["block_k"]) == 0 and 5120 % c["block_n"] == 0


@pytest.mark.parametrize("k, n, programs, per_sm", [(5120, 13824, 216, 2), (13824, 5120, 240, 2), (5120, 5120, 240, 2),
                                                    (4096, 4096, 256, 2), (3584, 18944, 296, 3), (6656, 17920, 280, 3),
                                                    (8192, 28672, 448, 4), (4096, 128256, 264, 2)])
def test_gluon_grid_rule(k, n, programs, per_sm):
    """Whole multiples of the column tiles within two programs an SM, else one program a tile up to four an SM, else
    two an SM sharing tiles (tests/kernels/test_w4a16_gluon_layout.py checks the rule against the recorded sweeps)."""
    from kernelscope.kernels.marlin.tune_space import gluon_programs

    assert gluon_programs(k, n, SMS) == (programs, per_sm)
    assert gluon_programs(256, 64, SMS) == (2, 2)  # never more programs than (tile, k block) units


def test_gluon_launch_registers_fit_its_programs_an_sm():
    """The registers at launch let the rule's programs (8 warps each) be resident at once: 65536 a SM."""
    from kernelscope.kernels.marlin.tune_space import gluon_launch, gluon_programs

    for k, n in ((5120, 13824), (3584, 18944), (8192, 28672), (4096, 4096)):
        launch = gluon_launch(k, n, SMS, 1)
        _, per_sm = gluon_programs(k, n, SMS)
        assert per_sm * 256 * launch["maxnreg"] <= 65536 < (per_sm + 1) * 256 * launch["maxnreg"]
    assert gluon_launch(5120, 13824, SMS, 1)["num_stages"] == 6  # two an SM, 40 blocks each
    assert gluon_launch(4096, 4096, SMS, 1)["num_stages"] == 4  # two an SM, 8 blocks each
    assert gluon_launch(8192, 28672, SMS, 1)["num_stages"] == 4  # four an SM
    # mma.sync at m <= 8 below four programs an SM
    sync = [gluon_launch(5120, 13824, SMS, m).get("sync_mma", False) for m in (1, 8, 9, 16)]
    assert sync == [True, True, False, False]
    assert gluon_launch(3584, 18944, SMS, 1)["sync_mma"] and "sync_mma" not in gluon_launch(8192, 28672, SMS, 1)


def test_gluon_launch_comes_first_where_the_device_runs_it():
    from kernelscope.kernels.marlin.tune_space import gluon_launch

    for m in (1, 16):
        got = candidates(m, 5120, 13824, SMS, True, gluon=True)
        want = dict(kernel="gluon", programs=216, num_stages=6, maxnreg=96, **({"sync_mma": True} if m <= 8 else {}))
        assert got[0] == gluon_launch(5120, 13824, SMS, m) == want
        assert got[1] == rule_launch(m, 5120, True)
        assert sum(c.get("kernel") == "gluon" for c in got) == 1
    for m, n, gluon in ((65, 13824, True), (1, 13824, False), (1, 13856, True)):  # m > 64, no sm_90, n % 64 != 0
        assert not any(c.get("kernel") == "gluon" for c in candidates(m, 5120, n, SMS, True, gluon=gluon))


def test_w4a16_matmul_says_which_arguments_the_gluon_kernel_takes():
    torch = pytest.importorskip("torch")
    from kernelscope.kernels.marlin import w4a16_matmul

    a = torch.zeros(1, 256, dtype=torch.float16)
    words = torch.zeros(32, 256, dtype=torch.int32)
    s = torch.zeros(2, 256, dtype=torch.float16)
    with pytest.raises(ValueError, match="^w4a16_matmul: kernel must be 'triton' or 'gluon', got 'cutlass'.$"):
        w4a16_matmul(a, words, s, 128, kernel="cutlass")
    with pytest.raises(ValueError, match="^w4a16_matmul: the Gluon kernel takes programs, num_stages, maxnreg, "):
        w4a16_matmul(a, words, s, 128, kernel="gluon", split_k=2)
    for kw in ({"sync_mma": True}, {"pdl": True}, {"programs": 4}, {"cluster": 2}):
        with pytest.raises(ValueError, match=r"^w4a16_matmul: programs, sync_mma, pdl and cluster are arguments of "):
            w4a16_matmul(a, words, s, 128, **kw)


def test_gluon_rows_of_the_table_are_not_warm_starts_for_other_shapes():
    gluon_row = dict(kernel="gluon", programs=256, num_stages=4, maxnreg=96)
    triton_row = dict(block_m=16, block_n=64, block_k=128, split_k=2, num_warps=4, num_stages=3, swap_ab=True)
    got = candidates(1, 5120, 13824, SMS, True, warm_start=[gluon_row, triton_row], limit=30)
    assert gluon_row not in got and triton_row in got


def test_gluon_launch_maps_onto_gluon_w4a16_keywords():
    """The tuner's Gluon launch (w4a16_matmul keywords) becomes gluon_w4a16's keywords, values kept."""
    import inspect

    pytest.importorskip("triton.experimental.gluon")
    from kernelscope.kernels.marlin.gluon_args import kernel_kwargs
    from kernelscope.kernels.marlin.gluon_hopper import gluon_w4a16
    from kernelscope.kernels.marlin.tune_space import gluon_launch

    params = inspect.signature(gluon_w4a16).parameters
    for m in (1, 16):
        launch = gluon_launch(3584, 18944, SMS, m)
        kw = kernel_kwargs(launch)
        assert set(kw) <= set(params)
        assert (kw["programs"], kw["stages"], kw["maxnreg"]) == (296, 4, 80)
        assert kw["sync_mma"] == (m <= 8)
        assert kw["pdl"] is False and kernel_kwargs({**launch, "pdl": True})["pdl"] is True


def test_cluster_launches_join_the_gluon_candidates_only_where_tiles_are_shared():
    """gluon_cluster_launch: where the rule's grid shares column tiles, one cluster launch follows the rule's (one
    program an SM at 4096x4096, S = 2; the rule's two programs a tile at 8192x8192, S = 2; two to three an SM at
    5120x5120, S = 4, 64 registers: room for four an SM); its S divides the tile's k blocks and its grid is the
    tiles x S; whole-tile grids get none."""
    from kernelscope.kernels.marlin.tune_space import gluon_candidates, gluon_launch

    for (k, n), want in {(4096, 4096): (2, 128, 6, 96), (5120, 5120): (4, 320, 4, 64),
                         (8192, 8192): (2, 256, 6, 96)}.items():
        rule, cluster = gluon_candidates(1, k, n, SMS)
        assert rule == gluon_launch(k, n, SMS, 1) and rule["programs"] > n // 64
        assert (cluster["cluster"], cluster["programs"], cluster["num_stages"], cluster["maxnreg"]) == want
        assert (k // 128) % cluster["cluster"] == 0 and cluster["programs"] == n // 64 * cluster["cluster"]
        assert cluster["sync_mma"] and "sync_mma" not in gluon_candidates(16, k, n, SMS)[1]
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
    from kernelscope.kernels.marlin.gluon_args import MAX_M
    from kernelscope.kernels.marlin.tune_space import gluon_wide_launches

    got = gluon_wide_launches(k, n, SMS)
    assert [g["programs"] for g in got] == grids
    tiles, kb = n // 64, k // 128
    for g in got:
        assert (g["kernel"], g["num_stages"], g["maxnreg"]) == ("gluon", 4, 128) and 256 * 128 * 2 <= 65536
        assert g["programs"] <= tiles * kb
        assert g["programs"] % tiles == 0 or g["programs"] == 2 * SMS < tiles
        assert g["programs"] <= 2 * SMS or g["programs"] == tiles
    for m in (17, 32, MAX_M):
        assert candidates(m, k, n, SMS, True, gluon=True)[:len(got)] == got
    assert not any(c.get("kernel") == "gluon" for c in candidates(MAX_M + 1, k, n, SMS, True, gluon=True))
