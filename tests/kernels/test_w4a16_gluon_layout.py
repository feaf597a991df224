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


# Recorded graph-time sweeps of the Gluon kernel's launches (tests/data/w4a16_sweeps, 132 SMs, m = 1 and 16): the
# number of points at which each tried the rule's registers and stages.
SWEEPS = {"streamk_sweep_h100": 16, "streamk_sweep_h200": 12, "regs_sweep_h100": 12, "tiles_sweep_h100": 2,
          "sync_sweep_h100": 3}


def _sweep_points(run):
    """(point, layout, {(programs, maxnreg, stages): us}, the rule's key) for every point and layout of a sweep."""
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
            yield row, layout, times, (rule["programs"], rule["maxnreg"], rule["num_stages"])


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
