"""Triton flash attention against an fp32 reference, in Triton's CPU interpreter when there is no GPU.

Criterion (kernels/attention/check.py): the kernel's error is at most 2x the
error of PyTorch computing the same attention in the same precision; NaN/Inf
never passes. Inputs take their seed from conftest.input_seed() (fixed in CI), printed on failure.
"""
from __future__ import annotations

import os

import pytest

from conftest import input_seed

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
pytest.importorskip("triton")

from kernelscope.kernels.attention import naive_attention, reference_attention  # noqa: E402
from kernelscope.kernels.attention.check import ErrorVsReference, error_vs_reference, within_factor  # noqa: E402
from kernelscope.kernels.attention.flash import FlashConfig, flash_attention  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# On a GPU pin one launch config: autotuning every small test shape would compile dozens of variants.
PINNED = {"config": FlashConfig(128, 64, 4, 2)} if DEVICE == "cuda" else {}
# The interpreter's own use of numpy, not ours.
pytestmark = pytest.mark.filterwarnings("ignore:Conversion of an array with ndim > 0:DeprecationWarning")


def _qkv(b: int, h: int, s_q: int, s_k: int, d: int, dtype, seed: int):
    gen = torch.Generator().manual_seed(seed)
    q = torch.randn((b, h, s_q, d), generator=gen)
    k = torch.randn((b, h, s_k, d), generator=gen)
    v = torch.randn((b, h, s_k, d), generator=gen)
    return (t.to(dtype).to(DEVICE) for t in (q, k, v))


def _check(q, k, v, causal: bool, seed: int, **kwargs) -> torch.Tensor:
    out = flash_attention(q, k, v, causal, **{**PINNED, **kwargs})
    ref = reference_attention(q, k, v, causal, kwargs.get("sm_scale"))
    mine = error_vs_reference(out, ref)
    theirs = error_vs_reference(naive_attention(q, k, v, causal, kwargs.get("sm_scale")), ref)
    ok, why = within_factor(mine, theirs)
    assert ok, f"seed {seed}: {why}"
    return out


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seq", [1, 17, 64, 100])
def test_matches_fp32_reference_within_twice_torch_error(seq, causal, dtype):
    seed = input_seed()
    q, k, v = _qkv(1, 2, seq, seq, 64, dtype, seed)
    out = _check(q, k, v, causal, seed)
    assert out.dtype == dtype and out.shape == q.shape


@pytest.mark.parametrize("head_dim", [16, 32, 128])
def test_other_head_dims(head_dim):
    seed = input_seed()
    q, k, v = _qkv(1, 2, 33, 33, head_dim, torch.bfloat16, seed)
    _check(q, k, v, True, seed)


@pytest.mark.parametrize("s_q,s_k", [(17, 100), (64, 30)])
def test_different_query_and_key_lengths(s_q, s_k):
    seed = input_seed()
    q, k, v = _qkv(1, 2, s_q, s_k, 64, torch.float16, seed)
    _check(q, k, v, False, seed)
    _check(q, k, v, True, seed)


def test_fully_masked_rows_are_zero():
    # Causal, bottom-right aligned, 40 queries over 9 keys: rows 0..30 see no key at all.
    seed = input_seed()
    q, k, v = _qkv(1, 2, 40, 9, 64, torch.float16, seed)
    out = _check(q, k, v, True, seed)
    assert bool((out[:, :, :31] == 0).all())
    assert bool((out[:, :, 31:].abs().sum(dim=-1) > 0).all())


def test_other_block_shape_and_scale():
    seed = input_seed()
    q, k, v = _qkv(1, 2, 50, 50, 64, torch.float16, seed)
    _check(q, k, v, True, seed, sm_scale=0.3, config=FlashConfig(16, 16, 4, 1))


def test_non_contiguous_inputs():
    # A (batch, seq, heads, dim) tensor viewed as (batch, heads, seq, dim), as models hold it.
    seed = input_seed()
    q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in _qkv(1, 2, 33, 33, 64, torch.float16, seed))
    assert not q.is_contiguous()
    _check(q, k, v, True, seed)


# The warp-specialised Triton kernel (run only when a FlashConfig asks for it): 2-D descriptors over
# the flattened rows, one key loop masked in every block when causal or when seq_k is not a multiple
# of BLOCK_N, where a tail block's extra rows belong to the NEXT head (b * h > 1 here, so a wrong
# mask shows).
WS_SMALL = FlashConfig(32, 16, 4, 1, warp_specialize=True)
# On an H100 its first launch did not finish (docs/decisions/0003): the
# interpreter checks the algorithm (2-D rows, the one masked loop), the GPU does not run it.
ws_interpreter_only = pytest.mark.skipif(DEVICE == "cuda", reason="the warp-specialised kernel hung on an H100")


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("s_q,s_k", [(64, 64), (50, 50), (17, 100), (40, 9)])
@ws_interpreter_only
def test_warp_specialised_kernels_loop_matches_reference_in_the_interpreter(s_q, s_k, causal, dtype):
    seed = input_seed()
    q, k, v = _qkv(2, 3, s_q, s_k, 64, dtype, seed)
    config = WS_SMALL
    out = _check(q, k, v, causal, seed, config=config)
    assert out.shape == q.shape and out.dtype == dtype
    if causal and s_q > s_k:  # rows that see no key are zero, as in the plain kernel
        assert bool((out[:, :, : s_q - s_k] == 0).all())


@ws_interpreter_only
def test_warp_specialised_kernels_loop_takes_non_contiguous_inputs_in_the_interpreter():
    seed = input_seed()
    q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in _qkv(1, 2, 33, 33, 128, torch.float16, seed))
    config = WS_SMALL
    _check(q, k, v, True, seed, config=config)


def test_criterion_never_passes_nan_or_inf():
    good = ErrorVsReference(1e-3, 1e-4, True)
    assert within_factor(good, good)[0]
    out = torch.zeros(2, 3)
    out[0, 1] = float("nan")
    bad = error_vs_reference(out, torch.zeros(2, 3))
    passed, why = within_factor(bad, ErrorVsReference(1.0, 1.0, True))
    assert not passed and "NaN" in why
    assert not error_vs_reference(torch.tensor([float("inf")]), torch.tensor([0.0])).finite
    assert not within_factor(ErrorVsReference(3e-3, 1e-4, True), good)[0]


@pytest.mark.parametrize("bad,message", [
    (lambda q: (q[0], q, q), "q must be a float16 or bfloat16 tensor of shape (batch, heads, seq, head_dim)"),
    (lambda q: (q.float(), q, q), "q must be a float16 or bfloat16 tensor"),
    (lambda q: (q[..., :48], q[..., :48], q[..., :48]), "head_dim must be one of 16, 32, 64, 128, got 48"),
    (lambda q: (q, q.bfloat16(), q), "q, k and v must share one dtype"),
    (lambda q: (q, q[:, :1], q[:, :1]), "k and v must have shape (1, 2, seq_k, 64)"),
    (lambda q: (q, q, q[:, :, :3]), "k and v must have shape"),
])
def test_bad_inputs_raise_one_clear_value_error(bad, message):
    q = torch.zeros((1, 2, 8, 64), dtype=torch.float16, device=DEVICE)
    with pytest.raises(ValueError) as e:
        flash_attention(*bad(q))
    assert message in str(e.value) and str(e.value).startswith("flash_attention: ")


def test_bad_scale_raises():
    q = torch.zeros((1, 2, 8, 64), dtype=torch.float16, device=DEVICE)
    with pytest.raises(ValueError, match="sm_scale must be a finite positive number"):
        flash_attention(q, q, q, sm_scale=-1.0)
