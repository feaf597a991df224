"""Triton W4A16 GEMM on Marlin weights, against an fp32 reference.

Without CUDA the kernel runs in Triton's CPU interpreter; the switch must be set
before the kernel is first built, so it is set here at import time.
"""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
np = pytest.importorskip("numpy")
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from kernelscope.kernels.marlin import (  # noqa: E402
    LaunchConfig,
    pack,
    quantize,
    launch_grid,
    reference_matmul,
    tma_supported,
    to_kernel_layout,
    unpack,
    w4a16_matmul,
)
from marlin_reference import CASES, case_id, load_arrays  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
TOL = 2e-3  # observed ~3e-4 (fp16 output rounding); 1e-2 is the requirement


def _problem(m: int, k: int, n: int, groupsize: int, seed: int):
    """Random fp16 activations and a Marlin-packed random weight, on DEVICE."""
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn((n, k), generator=gen).half()
    q, scales = quantize(w, groupsize)
    B, s = pack(q, scales, groupsize)
    a = torch.randn((m, k), generator=gen).half()
    return a.to(DEVICE), B.to(DEVICE), s.to(DEVICE)


def _run(a, B, s, groupsize: int, workspace=None, recorder=None, **launch):
    """Launch into a NaN-poisoned output, so that an unwritten element shows; ``launch``: LaunchConfig.triton's
    fields (none: the launch decide_launch picks)."""
    Bk, sk = to_kernel_layout(B, s, groupsize)
    out = torch.full((a.shape[0], B.shape[1] // 2), float("nan"), dtype=torch.float16, device=a.device)
    config = LaunchConfig.triton(**launch) if launch else None
    c = w4a16_matmul(a, Bk, sk, groupsize, out=out, config=config, workspace=workspace, recorder=recorder)
    assert c is out
    assert not bool(torch.isnan(c).any()), "some output elements were never written"
    return c


def _rel_err(c, ref) -> float:
    return float((c.float() - ref).norm() / ref.norm())


@pytest.mark.parametrize("groupsize", [128, -1])
@pytest.mark.parametrize("k,n", [(256, 256), pytest.param(512, 768, marks=pytest.mark.slow)])  # the larger: slow
@pytest.mark.parametrize("m", [1, 3, 16, 33])
def test_matches_reference(m: int, k: int, n: int, groupsize: int) -> None:
    seed = 7919 * m + 104729 * k + n + (1 if groupsize == -1 else 0)
    a, B, s = _problem(m, k, n, groupsize, seed)
    c = _run(a, B, s, groupsize)
    assert c.shape == (m, n) and c.dtype == torch.float16
    assert _rel_err(c, reference_matmul(a, B, s, groupsize)) < TOL


@pytest.mark.parametrize("split_k,groupsize", [(2, 128), (4, -1), (2, -1)])
def test_split_k_matches_reference(split_k: int, groupsize: int) -> None:
    a, B, s = _problem(3, 512, 768, groupsize, seed=100 + split_k)
    ref = reference_matmul(a, B, s, groupsize)
    c = _run(a, B, s, groupsize, split_k=split_k)
    assert _rel_err(c, ref) < TOL


@pytest.mark.parametrize("blocks", [
    dict(block_m=16, block_n=64),
    dict(block_m=16, block_n=256),
    dict(block_m=32, block_n=32),
])
def test_block_shapes_and_tile_order(blocks: dict) -> None:
    """Several m-tiles (m = 70) with the grouped tile order, and several tile shapes."""
    a, B, s = _problem(70, 512, 512, 128, seed=sum(blocks.values()))
    assert _rel_err(_run(a, B, s, 128, **blocks), reference_matmul(a, B, s, 128)) < TOL


@pytest.mark.parametrize("m,split_k,groupsize", [(1, 2, 128), (20, 1, 128), (33, 2, -1)])
def test_tma_loads_match_reference(m: int, split_k: int, groupsize: int) -> None:
    """Tiles copied by tensor descriptors (TMA on the GPU; the interpreter emulates them), rows past m
    zero-filled, 16- and 32-token tiles."""
    a, B, s = _problem(m, 512, 512, groupsize, seed=500 + m)
    for block_m in (16, 32):
        c = _run(a, B, s, groupsize, split_k=split_k, tma=True, block_m=block_m, block_n=64)
        assert _rel_err(c, reference_matmul(a, B, s, groupsize)) < TOL


@pytest.mark.parametrize("m,k,split_k,groupsize", [(1, 512, 1, 128), (3, 512, 4, 128), (16, 512, 2, -1),
                                                    (33, 512, 2, 128), (2, 128, 1, 128)])
def test_ragged_and_whole_token_tiles_match_reference(m: int, k: int, split_k: int, groupsize: int) -> None:
    """C^T = W^T A^T (n on the MMA's M side), alone and with the in-kernel split-k sum, for m a multiple of the
    16-token tile and not (the partials of a ragged tile are stored masked), and a loop of one block of k."""
    a, B, s = _problem(m, k, 256 if k == 128 else 512, groupsize, seed=300 + m + split_k)
    c = _run(a, B, s, groupsize, split_k=split_k, block_n=64)
    assert _rel_err(c, reference_matmul(a, B, s, groupsize)) < TOL


def test_split_k_counters_reset_between_calls() -> None:
    """The last program of each tile resets its counter: a second call, and a call with
    another tile count, must add the partials again rather than skip or double them."""
    a, B, s = _problem(5, 512, 512, 128, seed=404)
    ref = reference_matmul(a, B, s, 128)
    first = _run(a, B, s, 128, split_k=4).clone()
    second = _run(a, B, s, 128, split_k=4)
    assert torch.equal(first, second), "split-k sums in a fixed order, so repeated calls agree bit for bit"
    assert _rel_err(_run(a, B, s, 128, split_k=2, block_n=32), ref) < TOL
    assert _rel_err(_run(a, B, s, 128, split_k=4), ref) < TOL


def test_caller_owned_split_k_workspace() -> None:
    """A caller's zeroed counter buffer is used, and left zeroed for the next call; a wrong one is refused."""
    a, B, s = _problem(3, 512, 512, 128, seed=505)
    ws = torch.zeros(64, dtype=torch.int32, device=DEVICE)
    c = _run(a, B, s, 128, split_k=4, block_n=64, workspace=ws)
    assert _rel_err(c, reference_matmul(a, B, s, 128)) < TOL
    assert int(ws.abs().sum()) == 0
    Bk, sk = to_kernel_layout(B, s, 128)
    if DEVICE == "cpu":  # the interpreter runs programs in order, so what a stale buffer does is exact
        stale = torch.ones(64, dtype=torch.int32, device=DEVICE)  # not zeroed: the kernel must read this one
        w4a16_matmul(a, Bk, sk, 128, config=LaunchConfig.triton(split_k=4, block_n=64), workspace=stale)
        assert int(stale[:8].sum()) == 8, "each tile's third arrival reset its counter, the fourth counted to 1"
    with pytest.raises(ValueError, match="workspace must be an int32 tensor of at least 8 zeroed counters"):
        w4a16_matmul(a, Bk, sk, 128, config=LaunchConfig.triton(split_k=4, block_n=64),
                     workspace=torch.zeros(4, dtype=torch.int32, device=DEVICE))


def test_strided_activations() -> None:
    """a as a transposed view: the kernel must honour its strides."""
    a, B, s = _problem(5, 256, 256, -1, seed=55)
    a_t = a.t().contiguous().t()
    assert a_t.stride() != a.stride()
    assert _rel_err(_run(a_t, B, s, -1), reference_matmul(a, B, s, -1)) < TOL


@pytest.mark.parametrize("case", [pytest.param(c, id=case_id(c)) for c in CASES])
def test_marlin_reference_vectors_through_kernel(case: dict) -> None:
    """Weights packed by the original Marlin: the kernel's product must match the
    product with Marlin's own fake-quantized fp16 weight."""
    data, g = load_arrays(case), case["groupsize"]
    B = torch.from_numpy(data["packed_B_int32"]).to(DEVICE)
    s = torch.from_numpy(data["packed_s_fp16"]).to(DEVICE)
    weight = torch.from_numpy(data["weight_fp16"]).to(DEVICE)
    a = torch.randn((9, case["k"]), generator=torch.Generator().manual_seed(31)).half().to(DEVICE)
    expected = a.float() @ weight.float().t()
    ref = reference_matmul(a, B, s, g)
    assert float((ref - expected).abs().max()) < 1e-3 * float(expected.abs().max())
    assert _rel_err(_run(a, B, s, g), expected) < TOL


@pytest.mark.parametrize("groupsize", [128, -1])
def test_kernel_layout_nibbles(groupsize: int) -> None:
    """Word (16 b + j, c) of the kernel layout holds q[128 b + 32 i + 2 j, c] in nibble i and
    q[128 b + 32 i + 2 j + 1, c] in nibble i + 4; scales are plain."""
    _, B, s = _problem(1, 512, 256, groupsize, seed=77)
    q, scales = unpack(B, s, groupsize)
    Bk, sk = to_kernel_layout(B, s, groupsize)
    assert Bk.shape == (64, 256) and Bk.dtype == torch.int32
    words = Bk.to(torch.int64) & 0xFFFFFFFF
    rows = torch.arange(64)
    for i in range(4):
        for h in range(2):
            k_of_row = 128 * (rows // 16) + 32 * i + 2 * (rows % 16) + h
            assert torch.equal((words >> (4 * (i + 4 * h))) & 0xF, q[k_of_row].to(torch.int64)), (i, h)
    assert torch.equal(sk, scales)


def _bad_calls():
    a, B, s = _problem(2, 256, 256, 128, seed=5)
    Bk, sk = to_kernel_layout(B, s, 128)
    return [
        (lambda: w4a16_matmul(a.float(), Bk, sk, 128), "a must be a 2-D float16"),
        (lambda: w4a16_matmul(a[0], Bk, sk, 128), "a must be a 2-D float16"),
        (lambda: w4a16_matmul(a[:0], Bk, sk, 128), "m >= 1"),
        (lambda: w4a16_matmul(a, B, s, 128), "to_kernel_layout"),
        (lambda: w4a16_matmul(a, Bk[:16], sk, 128), "rows"),
        (lambda: w4a16_matmul(a, Bk.to(torch.int64), sk, 128), "int32"),
        (lambda: w4a16_matmul(a, Bk, sk.float(), 128), "s must be a float16"),
        (lambda: w4a16_matmul(a, Bk, sk, -1), "s must be a float16 tensor of shape (1, 256)"),
        (lambda: w4a16_matmul(a, Bk, sk, 64), "groupsize must be 128 or -1"),
        (lambda: w4a16_matmul(a, Bk, sk, 128, out=torch.empty((2, 128), dtype=torch.float16)), "out must be"),
        (lambda: w4a16_matmul(a, Bk, sk, 128, config=LaunchConfig.triton(split_k=3)), "split_k"),
        (lambda: w4a16_matmul(a, Bk, sk, 128, config=LaunchConfig.triton(block_m=8)), "block_m"),
        (lambda: w4a16_matmul(a, Bk, sk, 128, config={"split_k": 2}), "config must be a LaunchConfig"),
        (lambda: w4a16_matmul(a, Bk, sk, 128, config=LaunchConfig.gluon(), workspace=torch.zeros(8, dtype=torch.int32)),
         "workspace is the Triton kernel's"),
        (lambda: w4a16_matmul(a, Bk, sk, 128, config=LaunchConfig.triton(),
                              recorder=SimpleNamespace(enabled=True, grid=(1, 1, 1))),
         "recorder was sized for grid (1, 1, 1)"),
    ]


@pytest.mark.parametrize("index", range(len(_bad_calls())))
def test_bad_inputs_raise_one_clear_sentence(index: int) -> None:
    call, needle = _bad_calls()[index]
    with pytest.raises(ValueError) as info:
        call()
    msg = str(info.value)
    assert needle in msg
    assert "\n" not in msg and msg.endswith(".")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU path's interpreter requirement")
def test_cpu_without_interpreter_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    a, B, s = _problem(2, 256, 256, -1, seed=6)
    Bk, sk = to_kernel_layout(B, s, -1)
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        w4a16_matmul(a, Bk, sk, -1)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with CUDA")
@pytest.mark.parametrize("split_k", [1, 4])
@pytest.mark.parametrize("groupsize", [128, -1])
@pytest.mark.parametrize("m", [1, 16, 200])
@pytest.mark.parametrize("tma", [False, True])
def test_gpu_sizes(m: int, groupsize: int, split_k: int, tma: bool) -> None:
    if tma and not tma_supported("cuda"):
        pytest.skip("TMA needs sm_90 or later")
    a, B, s = _problem(m, 4096, 4096, groupsize, seed=m * 10 + split_k)
    c = _run(a, B, s, groupsize, split_k=split_k, block_m=16 if m <= 16 else 64, tma=tma)
    assert _rel_err(c, reference_matmul(a, B, s, groupsize)) < TOL


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU with CUDA")
def test_gpu_block_recorder_sees_every_program_once() -> None:
    """recorder=: each program of a split-k launch writes one row, on a real SM, inside the launch."""
    from kernelscope.collect.instrument.recorder import BlockRecorder

    a, B, s = _problem(1, 4096, 4096, 128, seed=9)
    rec = BlockRecorder(launch_grid(1, 4096, 16, 128, 4))
    assert rec.grid == (4096 // 128, 4, 1)
    c = _run(a, B, s, 128, split_k=4, block_n=128, recorder=rec)
    r = rec.read()
    assert sorted(r.block_id) == list(range(4096 // 128 * 4)) and not r.problems
    assert all(0 <= sm < torch.cuda.get_device_properties(0).multi_processor_count for sm in r.smid)
    assert all(e > s0 for s0, e in zip(r.start_ns, r.end_ns))
    assert _rel_err(c, reference_matmul(a, B, s, 128)) < TOL  # recording leaves the result alone


def test_unpack_ptx_arithmetic_on_every_nibble_pair() -> None:
    """The GPU unpack is PTX the interpreter cannot run: replay its instructions, with the
    constants read from the PTX text itself, in numpy fp16 for every nibble value, and
    check that output register i holds nibbles i and i + 4 as q - 8 exactly (low, high half)."""
    import re

    from kernelscope.kernels.marlin.unpack_ptx import UNPACK_PTX as _UNPACK_PTX

    lines = [
        ln.strip().rstrip(";") for ln in _UNPACK_PTX.splitlines() if ln.strip()[:3] in ("lop", "sub", "fma", "shr")
    ]
    regs = {m[0]: int(m[1], 16) for m in re.findall(r"mov\.b32 (\w+), (0x[0-9a-f]+)", _UNPACK_PTX)}
    lop = [[int(x, 16) for x in re.findall(r"0x[0-9a-f]+", ln)] for ln in lines if ln.startswith("lop3")]
    sub = [regs[ln.split(",")[-1].strip()] for ln in lines if ln.startswith("sub")]
    fma = [[regs[r.strip()] for r in ln.split(",")[-2:]] for ln in lines if ln.startswith("fma")]
    assert len(lop) == 4 and len(sub) == 2 and len(fma) == 2
    def halves(u32: np.ndarray) -> np.ndarray:  # fp16x2 register -> (low, high) fp16
        return np.stack([(u32 & 0xFFFF).astype(np.uint16), (u32 >> 16).astype(np.uint16)], -1).view(np.float16)

    def f16x2(c: int) -> np.ndarray:
        return halves(np.array([c], dtype=np.uint32))[0]

    words = np.arange(1 << 16, dtype=np.uint64)  # every pair of nibble values in every position pair
    words = ((words & 0xFF) | ((words & 0xFF) << 8) | ((words >> 8) << 16) | ((words >> 8) << 24)).astype(np.uint32)
    w2 = words >> 8
    t0 = halves((words & lop[0][0]) | lop[0][1]) - f16x2(sub[0])
    t1 = (halves((words & lop[1][0]) | lop[1][1]) * f16x2(fma[0][0])).astype(np.float16) + f16x2(fma[0][1])
    t2 = halves((w2 & lop[2][0]) | lop[2][1]) - f16x2(sub[1])
    t3 = (halves((w2 & lop[3][0]) | lop[3][1]) * f16x2(fma[1][0])).astype(np.float16) + f16x2(fma[1][1])
    # output register i = t_i: nibble i in its low half, nibble i + 4 in its high half
    out = [t0[:, 0], t1[:, 0], t2[:, 0], t3[:, 0], t0[:, 1], t1[:, 1], t2[:, 1], t3[:, 1]]
    for p in range(8):
        expected = ((words >> (4 * p)) & 0xF).astype(np.float32) - 8
        assert np.array_equal(out[p].astype(np.float32), expected), f"nibble {p}"
