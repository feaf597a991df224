"""Marlin INT4 format: bit-exact against vectors made by IST-DASLab/marlin, and
pack/unpack as exact inverses on random data."""

from __future__ import annotations

import hashlib

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")

from kernelscope.kernels.marlin import check_shape, dequantize, pack, quantize, quantize_with_scales, unpack  # noqa: E402
from kernelscope.kernels.marlin.layout import fragment_coords, inverse, scale_perm, weight_perm  # noqa: E402

from marlin_reference import CASES, case_id, load_arrays  # noqa: E402

REFERENCE = [pytest.param(case, id=case_id(case)) for case in CASES]


def _load(case: dict) -> dict:
    return {name: torch.from_numpy(array) for name, array in load_arrays(case).items()}


def test_reference_set_covers_grouped_per_channel_and_several_shapes() -> None:
    """The bundled cases are what the bit-for-bit claim rests on: both scale orders, more than one shape."""
    assert {c["groupsize"] for c in CASES} == {128, -1}
    assert len({(c["k"], c["n"]) for c in CASES}) >= 2


@pytest.mark.parametrize("case", REFERENCE)
def test_reference_arrays_are_the_recorded_marlin_output(case: dict) -> None:
    """Each array decompresses to the bytes whose sha256 was taken from Marlin's original .npz."""
    arrays = load_arrays(case)
    assert sorted(arrays) == sorted(case["array_sha256"])
    for name, array in arrays.items():
        assert hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest() == case["array_sha256"][name], name
    k, n, g = case["k"], case["n"], case["groupsize"]
    rows = k if g == -1 else g
    assert arrays["q_uint4"].shape == (k, n) and arrays["packed_B_int32"].shape == (k // 16, 2 * n)
    assert arrays["scales_fp16"].shape == arrays["packed_s_fp16"].shape == (k // rows, n)


def _same_bits(x, y) -> bool:
    """Bitwise equality of fp16 tensors (tells -0 from 0, compares NaN payloads)."""
    return x.shape == y.shape and torch.equal(x.contiguous().view(torch.int16), y.contiguous().view(torch.int16))


@pytest.mark.parametrize("case", REFERENCE)
def test_pack_reproduces_marlin_bit_for_bit(case: dict) -> None:
    ref, groupsize = _load(case), case["groupsize"]
    B, s = pack(ref["q_uint4"], ref["scales_fp16"], groupsize)
    assert B.dtype == torch.int32 and s.dtype == torch.float16
    assert torch.equal(B, ref["packed_B_int32"])
    assert _same_bits(s, ref["packed_s_fp16"])


@pytest.mark.parametrize("case", REFERENCE)
def test_unpack_recovers_marlin_inputs(case: dict) -> None:
    ref, groupsize = _load(case), case["groupsize"]
    q, scales = unpack(ref["packed_B_int32"], ref["packed_s_fp16"], groupsize)
    assert torch.equal(q, ref["q_uint4"])
    assert _same_bits(scales, ref["scales_fp16"])


@pytest.mark.parametrize("case", REFERENCE)
def test_reference_weight_is_q_minus_8_times_scale(case: dict) -> None:
    """The reference weight is already fake-quantized: (q - 8) * s gives it bit for bit,
    and rounding it with the reference scales gives q back."""
    ref, groupsize = _load(case), case["groupsize"]
    assert _same_bits(dequantize(ref["q_uint4"], ref["scales_fp16"], groupsize).t(), ref["weight_fp16"])
    assert torch.equal(quantize_with_scales(ref["weight_fp16"], ref["scales_fp16"], groupsize), ref["q_uint4"])


@pytest.mark.parametrize("case", REFERENCE)
def test_reference_scales_follow_the_two_fifteenths_rule(case: dict) -> None:
    """With scale = max|w| * 2 / 15 each group's largest value lands on +-7.5, so every
    group reaches |q - 8| of 7 or 8, and -8 (q = 0) occurs (max / 7 would never give it).
    Re-quantizing the fake-quantized weight then scales by 14/15 or 16/15 exactly as the
    rule says, computed here independently in numpy."""
    ref, groupsize = _load(case), case["groupsize"]
    q = ref["q_uint4"].numpy().astype(np.int32) - 8
    k, n = q.shape
    rows = k if groupsize == -1 else groupsize
    peak = np.abs(q).reshape(k // rows, rows, n).max(axis=1)
    assert set(np.unique(peak)) <= {7, 8} and (q == -8).any()
    maxabs = (peak * ref["scales_fp16"].numpy().astype(np.float32)).astype(np.float16)
    expected = (maxabs.astype(np.float32) * np.float32(2 / 15)).astype(np.float16)
    _, scales = quantize(ref["weight_fp16"], groupsize)
    assert np.array_equal(scales.numpy().view(np.int16), expected.view(np.int16))


def _numpy_marlin_quant(w: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """Marlin's gen_quant4 recipe written out in numpy (fp32 math, fp16 rounding steps)."""
    wt = w.T.astype(np.float32)
    k, n = wt.shape
    maxabs = np.abs(wt).reshape(k // rows, rows, n).max(axis=1)
    s = (maxabs * np.float32(2 / 15)).astype(np.float16)
    ratio = (wt / np.repeat(s, rows, axis=0).astype(np.float32)).astype(np.float16)
    q = np.clip(np.round(ratio.astype(np.float32)) + 8, 0, 15).astype(np.uint8)
    return q, s


@pytest.mark.parametrize("k,n,groupsize,seed", [(256, 256, 128, 11), (384, 512, -1, 12), (512, 256, 128, 13)])
def test_quantize_follows_marlin_recipe(k: int, n: int, groupsize: int, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn((n, k), generator=gen).half()
    w[3, 5] = 40.0  # an outlier: must raise the scale of its own group only
    q, scales = quantize(w, groupsize)
    rows = k if groupsize == -1 else groupsize
    assert q.shape == (k, n) and q.dtype == torch.uint8 and scales.shape == (k // rows, n)
    q_np, s_np = _numpy_marlin_quant(w.numpy(), rows)
    assert np.array_equal(q.numpy(), q_np)
    assert np.array_equal(scales.numpy().view(np.int16), s_np.view(np.int16))
    assert float(scales[5 // rows, 3]) == pytest.approx(40.0 * 2 / 15, rel=1e-3)
    if groupsize != -1:
        assert float(scales[1, 3]) < 1.0
    # Every value is within half a step of its original (the max maps to +-7.5),
    # give or take fp16 rounding of the scale and of the product.
    err = (dequantize(q, scales, groupsize).float() - w.t().float()).abs()
    step = scales.float().repeat_interleave(rows, dim=0)
    assert bool((err <= 0.51 * step).all())


def test_quantize_all_zero_group_gives_zero_scale_and_q_8() -> None:
    w = torch.zeros((256, 256), dtype=torch.float16)
    w[:, 128:] = 1.0
    q, scales = quantize(w, 128)
    assert torch.equal(scales[0], torch.zeros(256, dtype=torch.float16))
    assert bool((q[:128] == 8).all()) and bool((q[128:] == 15).all())


@pytest.mark.parametrize("k,n,groupsize,seed", [
    (128, 256, 128, 1), (256, 256, -1, 2), (512, 768, 128, 3), (1024, 512, -1, 4), (384, 1280, 128, 5),
])
@pytest.mark.parametrize("qdtype", [torch.uint8, torch.int32, torch.int64])
def test_pack_unpack_round_trip_random(k: int, n: int, groupsize: int, seed: int, qdtype) -> None:
    gen = torch.Generator().manual_seed(seed)
    rows = k if groupsize == -1 else groupsize
    q = torch.randint(0, 16, (k, n), generator=gen).to(qdtype)
    scales = (torch.rand((k // rows, n), generator=gen) + 0.01).half()
    B, s = pack(q, scales, groupsize)
    assert B.shape == (k // 16, 2 * n) and B.dtype == torch.int32
    assert s.shape == scales.shape and not torch.equal(s, scales)  # the scales really move
    q2, scales2 = unpack(B, s, groupsize)
    assert torch.equal(q2, q.to(torch.uint8))
    assert _same_bits(scales2, scales)


@pytest.mark.parametrize("seed", [21, 22])
def test_packed_words_follow_documented_fragment_layout(seed: int) -> None:
    """Locate every q[kr, nc] from the formula in layout.fragment_coords (not from the
    permutation table that pack uses) and read it back out of the int32 words."""
    k, n = 128, 256
    q = torch.randint(0, 16, (k, n), generator=torch.Generator().manual_seed(seed), dtype=torch.int64)
    B, _ = pack(q, torch.ones((1, n), dtype=torch.float16), -1)
    where = {fragment_coords(lane, nib): (lane, nib) for lane in range(32) for nib in range(8)}
    assert len(where) == 256  # each lane/nibble pair owns a distinct tile element
    words = B.to(torch.int64) & 0xFFFFFFFF
    for kr in range(k):
        for nc in range(n):
            tile_n = nc // 16
            lane, nib = where[(kr % 16, nc % 16)]
            col = (tile_n // 4) * 128 + 4 * lane + tile_n % 4
            assert (int(words[kr // 16, col]) >> (4 * nib)) & 0xF == int(q[kr, nc])


def test_layout_tables_are_permutations() -> None:
    for perm in (weight_perm(), scale_perm(True), scale_perm(False)):
        assert sorted(perm) == list(range(len(perm)))
        inv = inverse(perm)
        assert [perm[i] for i in inv] == list(range(len(perm)))
    assert len(weight_perm()) == 1024 and len(scale_perm(True)) == 64 and len(scale_perm(False)) == 32


def test_single_group_of_128_uses_per_channel_scale_order() -> None:
    """Marlin chooses the scale order by the number of groups: k = 128 with groupsize
    128 is one group and is packed exactly like per-channel."""
    gen = torch.Generator().manual_seed(7)
    q = torch.randint(0, 16, (128, 256), generator=gen)
    scales = torch.rand((1, 256), generator=gen).half()
    B1, s1 = pack(q, scales, 128)
    B2, s2 = pack(q, scales, -1)
    assert torch.equal(B1, B2) and torch.equal(s1, s2)
    order = [32 * chunk + src for chunk in range(256 // 32) for src in scale_perm(False)]
    assert torch.equal(s1[0], scales[0, order])


def _q(k: int = 256, n: int = 256, dtype=torch.uint8):
    return torch.zeros((k, n), dtype=dtype)


def _s(rows: int = 2, n: int = 256, dtype=torch.float16):
    return torch.ones((rows, n), dtype=dtype)


BAD = [
    (lambda: quantize(torch.zeros((256, 256)), 128), "float16"),
    (lambda: quantize(torch.zeros((256, 200), dtype=torch.float16), 128), "k must be a positive multiple of 128"),
    (lambda: quantize(torch.zeros((128, 256), dtype=torch.float16), 128), "n must be a positive multiple of 256"),
    (lambda: quantize(torch.zeros((256, 256), dtype=torch.float16), 64), "groupsize must be 128 or -1"),
    (lambda: quantize(torch.full((256, 256), float("nan"), dtype=torch.float16), 128), "finite"),
    (lambda: pack(_q(dtype=torch.float16), _s(), 128), "integer tensor"),
    (lambda: pack(_q() + 16, _s(), 128), "0..15"),
    (lambda: pack(_q(dtype=torch.int32) - 1, _s(), 128), "0..15"),
    (lambda: pack(_q(), _s(dtype=torch.float32), 128), "float16"),
    (lambda: pack(_q(), _s(rows=1), 128), "shape"),
    (lambda: pack(_q(k=250), _s(), 128), "k must be"),
    (lambda: unpack(torch.zeros((16, 512), dtype=torch.int64), _s(), 128), "int32"),
    (lambda: unpack(torch.zeros((16, 511), dtype=torch.int32), _s(), 128), "int32"),
    (lambda: unpack(torch.zeros((16, 512), dtype=torch.int32), _s(rows=4), 128), "shape"),
    (lambda: check_shape(256, 256, 0, "here"), "groupsize"),
]


@pytest.mark.parametrize("call,needle", BAD)
def test_bad_inputs_raise_one_clear_sentence(call, needle: str) -> None:
    with pytest.raises(ValueError) as info:
        call()
    msg = str(info.value)
    assert needle in msg
    assert "\n" not in msg and msg.endswith(".") and msg.count(". ") == 0
