"""First-use tuning of the W4A16 launch and its per-device cache, on CPU (Triton interpreter, tiny shapes).

The candidates really run in the interpreter and are checked against the fp32 reference; the timer is
injected (interpreter times say nothing about a GPU), so which candidate wins is set by the test.
"""
from __future__ import annotations

import json
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from kernelscope.kernels.marlin import autotune, dequantize, launch, pack, quantize, to_kernel_layout  # noqa: E402
from kernelscope.kernels.marlin.autotune import (dequantize_kernel_layout, m_bucket, read_cache,  # noqa: E402
                                                 shape_key, tune_shape)
from kernelscope.kernels.marlin.launch import decide_launch  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="needs the Triton interpreter")
K, N = 512, 256


@pytest.fixture(scope="module")
def weights():
    gen = torch.Generator().manual_seed(3)
    w = (torch.randn((N, K), generator=gen) / K ** 0.5).half()
    q, scales = quantize(w, 128)
    B, s = pack(q, scales, 128)
    words, sk = to_kernel_layout(B, s, 128)
    return q, scales, words, sk


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSCOPE_CACHE_DIR", str(tmp_path))
    autotune._MEMO.clear()
    autotune._NOTED.clear()
    launch.forget_decisions()
    yield
    launch.forget_decisions()


def ordered_timer(times_ms):
    """Calls the candidate once (it must run) and reports the next time of the list."""
    it = iter(times_ms)

    def timer(run, words, scales):
        run(words, scales)
        return next(it)
    return timer


def test_buckets_and_keys():
    assert [m_bucket(m) for m in (1, 2, 3, 16, 17, 128, 129, 5000)] == [1, 2, 4, 16, 32, 128, 256, 1024]
    assert shape_key(3, 5120, 13824, 128) == "m4_k5120_n13824_g128"
    with pytest.raises(ValueError):
        m_bucket(0)


def test_kernel_layout_dequantizes_back(weights):
    q, scales, words, sk = weights
    assert torch.equal(dequantize_kernel_layout(words, sk, 128).half(), dequantize(q, scales, 128))


def test_tuning_keeps_the_fastest_correct_candidate(weights):
    *_, words, sk = weights
    got = tune_shape(1, K, N, 128, words, sk, sm_count=8, tma=False, deadline_s=1e9, limit=3,
                     timer=ordered_timer([3.0, 1.0, 2.0]))
    assert len(got.tried) == 3 and all(t["status"] == "ok" and t["relative_error"] < 1e-2 for t in got.tried)
    assert got.best.to_dict() == got.tried[1]["launch"] and got.best_ms == 1.0 and not got.deadline_hit


def test_a_wrong_candidate_is_never_timed_or_kept(weights):
    from kernelscope.kernels.marlin import w4a16_matmul

    *_, words, sk = weights
    first = None

    def matmul(a, B, s, g, config):  # the first candidate's launch computes garbage
        nonlocal first
        first = first or config
        out = w4a16_matmul(a, B, s, g, config=config)
        return out * 2 if config == first else out

    got = tune_shape(1, K, N, 128, words, sk, sm_count=8, tma=False, deadline_s=1e9, limit=2, matmul=matmul,
                     timer=ordered_timer([5.0]))
    assert got.tried[0]["status"] == "wrong" and got.tried[0]["relative_error"] > 0.5
    assert "median_ms" not in got.tried[0] and got.best.to_dict() == got.tried[1]["launch"] != first.to_dict()


def test_deadline_stops_after_a_candidate(weights):
    *_, words, sk = weights
    ticks = iter(range(0, 100, 2))  # every clock read is 2 s later
    got = tune_shape(1, K, N, 128, words, sk, sm_count=8, tma=False, deadline_s=3.0, limit=5,
                     timer=ordered_timer([1.0] * 5), clock=lambda: float(next(ticks)))
    assert got.deadline_hit and 1 <= len(got.tried) < 5 and got.best is not None


def test_first_use_tunes_once_then_reads_the_cache(weights, capsys, tmp_path):
    *_, words, sk = weights
    first = decide_launch(1, K, N, 128, words, sk, tune=True, limit=2, timer=ordered_timer([2.0, 1.0]))
    err = capsys.readouterr().err
    assert err.count("tuning the W4A16 launch for m<=1") == 1 and len(err.strip().splitlines()) == 1
    assert first.source.startswith("tuning cache") and "tuned here" in first.source
    path = autotune.cache_file("cpu (Triton interpreter)", __import__("triton").__version__)
    assert path.parent.parent == tmp_path and path.exists()
    doc = json.loads(path.read_text())
    assert doc["device_name"] == "cpu (Triton interpreter)" and doc["triton"] == __import__("triton").__version__
    assert doc["entries"][shape_key(1, K, N, 128)]["launch"] == first.config.to_dict()
    assert decide_launch(1, K, N, 128, words, sk, tune=True) is first  # memo: no second tuning, no second line
    autotune._MEMO.clear()
    launch.forget_decisions()
    again = decide_launch(1, K, N, 128, words, sk, tune=True)  # a new process: from the file, no tuning
    assert again.config == first.config and again.source.startswith("tuning cache")
    assert capsys.readouterr().err == ""
    assert not list(path.parent.glob("*.partial"))  # written atomically: no temporary left


def test_corrupt_cache_is_ignored_with_one_note(weights, capsys):
    *_, words, sk = weights
    path = autotune.cache_file("cpu (Triton interpreter)", __import__("triton").__version__)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    assert read_cache(path, "cpu (Triton interpreter)", "x") == {}
    assert read_cache(path, "cpu (Triton interpreter)", "x") == {}
    err = capsys.readouterr().err
    assert err.count("ignoring the W4A16 launch cache") == 1
    choice = decide_launch(1, K, N, 128, words, sk, tune=True, limit=1, timer=ordered_timer([1.0]))
    assert choice.source.startswith("tuning cache")  # tuned, and the file rewritten whole
    assert json.loads(path.read_text())["schema"] == autotune.CACHE_SCHEMA


def test_cpu_default_and_untuned_use_table_or_rule(weights, capsys):
    *_, words, sk = weights
    for tune in (None, False):  # the interpreter's times say nothing about a GPU: no tuning by default
        assert decide_launch(1, K, N, 128, words, sk, tune=tune).source.startswith("rule")
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("args, phrase", [
    (["--shapes", "5120x5000"], "k must be a multiple of 128 and n of 256"),
    (["--shapes", "512x256", "--m", "0"], "--m must list positive integers"),
    (["--shapes", "512x256", "--deadline", "-1"], "more than 0 seconds"),
    (["--shapes", "512x256"], None),
])
def test_tune_cli_bad_input_and_no_gpu(args, phrase):
    from conftest import run_cli

    r = run_cli("tune", "w4a16", *args)
    code, out, err = r.returncode, r.stdout, r.stderr
    assert code == 2 and "Traceback" not in err and out == ""
    if phrase is None:
        if torch.cuda.is_available():
            pytest.skip("a GPU is here")
        phrase = "PyTorch sees no CUDA GPU here"
    assert phrase in err


def test_deadline_keeps_a_margin_for_a_slower_compile(weights):
    # every candidate takes 1 s: after two (2 s elapsed) a third could end at 3 s exactly, but the next compile may be
    # slower than the slowest so far, so the tuner stops at two and ends inside the 3 s
    *_, words, sk = weights
    now = [0.0]

    def clock() -> float:
        return now[0]

    def matmul(*args):
        from kernelscope.kernels.marlin.matmul import run

        now[0] += 0.5  # called twice per candidate: the check and the (fake) timing
        return run(*args)

    got = tune_shape(1, K, N, 128, words, sk, sm_count=8, tma=False, deadline_s=3.0, limit=5,
                     timer=ordered_timer([1.0] * 5), clock=clock, matmul=matmul)
    assert got.deadline_hit and len(got.tried) == 2 and got.seconds <= 3.0
