"""The Gluon W4A16 kernel's weight layout (kernels/marlin/layout_gluon.py), without a GPU: the regrouping is lossless
and puts every 4-bit weight where the kernel's unpack reads it (gluon_hopper._unpack's docstring)."""
from __future__ import annotations

import itertools

import pytest

torch = pytest.importorskip("torch")

from kernelscope.kernels.marlin import pack, quantize, to_kernel_layout, unpack  # noqa: E402
from kernelscope.kernels.marlin.layout_gluon import WORDS, from_gluon_layout, to_gluon_layout  # noqa: E402


@pytest.fixture(scope="module")
def weights():
    k, n, gs = 512, 256, 128
    w = torch.randn((n, k), generator=torch.Generator().manual_seed(3)).half()
    B, s = pack(*quantize(w, gs), gs)
    bk, sk = to_kernel_layout(B, s, gs)
    q, _ = unpack(B, s, gs)  # (k, n) 4-bit values, Marlin's layout undone
    return k, n, q, bk


def test_round_trip_is_lossless(weights):
    k, n, _, bk = weights
    bg = to_gluon_layout(bk)
    assert bg.shape == (k // 128 * n, WORDS) and bg.dtype == torch.int32
    assert torch.equal(from_gluon_layout(bg, n), bk)


def test_each_nibble_holds_the_weight_the_unpack_reads(weights):
    """Word 4 q + v of row b * n + c, nibble i (low half) and i + 4 (high half) of an f16x2 pair: the weights at
    k = 128 b + 32 i + 2 j + (0, 1), j = q + 4 v, column c."""
    k, n, q, bk = weights
    bg = to_gluon_layout(bk).to(torch.int64) & 0xFFFFFFFF
    for b, c, qq, v, i in [(0, 0, 0, 0, 0), (1, 5, 3, 2, 1), (3, 255, 1, 3, 3), (2, 17, 2, 1, 2)]:
        word = int(bg[b * n + c, 4 * qq + v])
        j = qq + 4 * v
        kk = 128 * b + 32 * i + 2 * j
        assert (word >> (4 * i)) & 0xF == int(q[kk, c])
        assert (word >> (4 * (i + 4))) & 0xF == int(q[kk + 1, c])


def test_bad_shapes_say_why():
    with pytest.raises(ValueError, match="multiple of 16 rows"):
        to_gluon_layout(torch.zeros((8, 4), dtype=torch.int32))
    with pytest.raises(ValueError, match="multiple of n=3"):
        from_gluon_layout(torch.zeros((8, 16), dtype=torch.int32), 3)


@pytest.mark.parametrize("run", ["streamk_sweep_h100", "streamk_sweep_h200"])
def test_launch_rule_picks_the_sweeps_fastest_grid(run):
    """tune_space.gluon_programs against the recorded stream-K sweeps (132 SMs, m = 1 and 16, six layer shapes,
    the rule's 4 stages and 96 registers): the fastest grid in both layouts at every point where the run tried the
    rule's grid: all 24 on the H100, 20 on the H200 (its run did not try 4096x4096's grid of 4x the tiles)."""
    import gzip
    import json

    from conftest import ROOT
    from kernelscope.kernels.marlin.tune_space import gluon_programs

    doc = json.load(gzip.open(ROOT / f"benchmarks/w4a16/runs/issue17_session5/{run}.json.gz"))
    exact = tried = 0
    for row, layout in itertools.product(doc["rows"], ("bg", "bk")):
        by_grid = {t["launch"]["programs"]: t["us"] for t in row["tried"] if t.get("status") == "ok"
                   and t["launch"]["layout"] == layout and t["launch"]["stages"] == 4}
        best = min(by_grid, key=by_grid.get)
        rule = gluon_programs(row["k"], row["n"], 132)
        tried += rule in by_grid
        exact += rule == best
    assert exact == tried == {"streamk_sweep_h100": 24, "streamk_sweep_h200": 20}[run]
