"""Flash attention and its benchmark/profile commands on a real GPU (pytest -m gpu on the GPU machine).

Same criterion as the CPU tests (error at most 2x same-precision torch's vs an
fp32 reference, never NaN/Inf), at real sizes, for the autotuned path and for
every config the autotuner may pick.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, input_seed

pytestmark = pytest.mark.gpu


def _qkv(b, h, s_q, s_k, d, dtype, seed):
    import torch

    gen = torch.Generator(device="cuda").manual_seed(seed)
    return (torch.randn((b, h, s, d), generator=gen, device="cuda", dtype=dtype) for s in (s_q, s_k, s_k))


def _check(q, k, v, causal, seed, autotune=False, **kw):
    """Compare with the reference; one pinned config unless autotune (each autotuned shape compiles all configs)."""
    from kernelscope.kernels.attention import naive_attention, reference_attention
    from kernelscope.kernels.attention.check import error_vs_reference, within_factor
    from kernelscope.kernels.attention.flash import HOPPER_CONFIGS, flash_attention

    if not autotune:
        kw.setdefault("config", HOPPER_CONFIGS[0])
    out = flash_attention(q, k, v, causal, **kw)
    ref = reference_attention(q, k, v, causal)
    ok, why = within_factor(error_vs_reference(out, ref), error_vs_reference(naive_attention(q, k, v, causal), ref))
    assert ok, f"seed {seed} {kw}: {why}"
    return out


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_autotuned_kernel_matches_reference(head_dim, causal):
    import torch

    seed = input_seed()
    q, k, v = _qkv(8, 2048 // head_dim, 2048, 2048, head_dim, torch.float16, seed)  # the benchmark's shape
    _check(q, k, v, causal, seed, autotune=True)


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("seq", [128, 1000])
def test_pinned_config_matches_reference(seq, head_dim, causal, dtype_name):
    import torch

    from kernelscope.kernels.attention.flash import HOPPER_CONFIGS

    seed = input_seed()
    q, k, v = _qkv(2, 4, seq, seq, head_dim, getattr(torch, dtype_name), seed)
    _check(q, k, v, causal, seed, config=HOPPER_CONFIGS[0])


def test_every_hopper_config_is_correct_at_a_ragged_length():
    import torch

    from kernelscope.kernels.attention.flash import HOPPER_CONFIGS

    seed = input_seed()
    # One compile per config (compiles dominate this test); head dims alternate.
    for i, config in enumerate(HOPPER_CONFIGS):
        q, k, v = _qkv(1, 3, 333, 333, 128 if i % 2 == 0 else 64, torch.float16, seed)
        try:
            _check(q, k, v, True, seed, config=config)
        except Exception as e:  # a config too big for shared memory is the autotuner's to drop
            if "out of resource" not in str(e).lower():
                raise


def test_fully_masked_rows_and_cross_lengths():
    import torch

    seed = input_seed()
    q, k, v = _qkv(2, 4, 700, 300, 128, torch.float16, seed)
    out = _check(q, k, v, True, seed)
    assert bool((out[:, :, :400] == 0).all()) and bool((out[:, :, 400:].abs().sum(-1) > 0).all())
    q, k, v = _qkv(2, 4, 100, 900, 64, torch.bfloat16, seed)
    _check(q, k, v, True, seed)
    _check(q, k, v, False, seed)


def test_non_contiguous_model_layout():
    import torch

    seed = input_seed()
    q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in _qkv(2, 8, 513, 513, 128, torch.float16, seed))
    _check(q, k, v, True, seed)


def _ks(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-m", "kernelscope", *args], capture_output=True, text=True, cwd=ROOT,
                          env=env)


def test_bench_then_plot(tmp_path):
    out = tmp_path / "r.json"
    r = _ks("bench", "attention", "--seq-lengths", "256,512", "--impl", "flash,naive,sdpa-flash,sdpa-cudnn",
            "--head-dim", "64", "--causal", "both", "--repeats", "5", "--warmup", "2", "-o", str(out), "--no-progress",
            "--width", "120", "--no-color")
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["schema"] == "kernelscope.bench" and len(doc["rows"]) == 16
    assert doc["environment"]["device"]["name"]["value"]  # the device the numbers belong to
    ok = [row for row in doc["rows"] if row["status"] == "ok"]
    assert {row["impl"] for row in ok} >= {"flash", "naive", "sdpa-flash"}
    assert all(row["median_ms"] > 0 and row["peak_memory_bytes"] > 0 and row["clock"] == "cuda-event (interleaved)"
               for row in ok)
    assert "interleaved" in doc["settings"]["timing_order"]
    assert "S=256" in r.stdout and "flash" in r.stdout
    p = _ks("plot", str(out), "--output-dir", str(tmp_path / "plots"))
    assert p.returncode == 0, p.stderr
    assert len(list((tmp_path / "plots").glob("*.png"))) == 4


def test_profile_attention_shows_the_flash_kernel(tmp_path):
    import torch

    out = tmp_path / "s.json"
    r = _ks("profile", "attention", "--impl", "flash", "--seq-len", "500", "--head-dim", "64", "--iters", "3",
            "-o", str(out), "--width", "120", "--no-color")
    assert r.returncode == 0, r.stderr
    assert "_attn_fwd" in r.stdout and out.exists()
    assert "chosen by the autotuner" in r.stderr  # a ragged length: flash.py's kernel, autotuned
    if torch.cuda.get_device_capability()[0] == 9:
        out2 = tmp_path / "s2.json"
        r = _ks("profile", "attention", "--impl", "flash", "--seq-len", "512", "--head-dim", "64", "--iters", "3",
                "-o", str(out2), "--width", "120", "--no-color")
        assert r.returncode == 0, r.stderr
        assert "_attn_fwd_gluon" in r.stdout and "Gluon kernel" in r.stderr


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [64, 128])
@pytest.mark.parametrize("seq", [128, 384])
def test_gluon_kernel_matches_reference(seq, head_dim, causal, dtype_name):
    """The default path on sm_90 (kernels/attention/gluon_hopper.py), at lengths of one and three query blocks."""
    import torch

    from kernelscope.kernels.attention.flash import gluon_runs

    if torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the Gluon kernel is for sm_90")
    seed = input_seed()
    q, k, v = _qkv(2, 3, seq, seq, head_dim, getattr(torch, dtype_name), seed)
    assert gluon_runs(q, k, v)
    _check(q, k, v, causal, seed, autotune=True)  # config None: the Gluon kernel
    q2, k2, v2 = _qkv(1, 2, 1000, 1000, head_dim, getattr(torch, dtype_name), seed)
    assert not gluon_runs(q2, k2, v2)  # a ragged length goes to flash.py's kernel
