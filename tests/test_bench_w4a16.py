"""`kernelscope bench w4a16` without a GPU: cases, parsing, the bytes floor, the sweep harness, JSON, plots, CLI.

The sweep runs the real builders on CPU (the Triton kernel in its interpreter, cuBLAS's stand-in torch.matmul,
torch's CPU tinygemm op) next to injected ones that raise or return a wrong result.
"""
from __future__ import annotations

import io
import os
import json

import pytest

from conftest import run_cli, one_sentence_error
from kernelscope.bench.results import BenchResults, BenchRow
from kernelscope.collect.timing import summarize

torch = pytest.importorskip("torch")

from kernelscope.bench.w4a16 import (  # noqa: E402
    DEFAULT_MS,
    DEFAULT_SHAPES,
    FLOOR_FORMULA,
    IMPLEMENTATIONS,
    W4A16Case,
    W4A16Settings,
    make_cases,
    parse_shapes,
    run_w4a16_sweep,
)

COPY_BYTES = 1 << 20
CPU = W4A16Settings(warmup=0, repeats=1, flush_l2=False, device="cpu", copy_buffer_bytes=COPY_BYTES)
FIXED_MS = 2.0  # the fake timer's median for every callable, the copy included


def _has_triton() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def fixed_timer(fn, *, warmup, repeats, flush_l2):
    """Calls fn once (so a raising call still raises) and reports FIXED_MS: the floor arithmetic is then exact."""
    fn()
    return summarize([FIXED_MS] * 3, warmup, "fake", flush_l2)


def _raises(wt):
    def fn(a):
        raise RuntimeError("tinygemm needs sm_80\nsecond line")
    return fn


def _wrong(wt):
    return lambda a: torch.zeros((a.shape[0], wt.n), dtype=torch.float16) + 1


def _setup_fails(wt):
    raise TypeError("_convert_weight_to_int4pack() takes 1 argument")


def test_shapes_and_cases():
    assert parse_shapes("4096x4096, 8192X28672,") == [(4096, 4096), (8192, 28672)]
    for bad in ("4096", "4096x", "4096*4096", "0x256", "axb", ","):
        with pytest.raises(ValueError, match="--shapes must"):
            parse_shapes(bad)
    cases = make_cases([1, 16], [(4096, 4096), (8192, 28672)])
    assert len(cases) == 4 and W4A16Case(16, 8192, 28672, 128) in cases
    with pytest.raises(ValueError, match="k must be a multiple of 128 and n of 256"):
        make_cases([1], [(4096, 4000)])
    with pytest.raises(ValueError, match="--groupsize must be 128 or -1"):
        make_cases([1], [(4096, 4096)], groupsize=64)


def test_launch_choice_tuned_table_and_rule():
    """The shipped H100 table covers every default point with one key set and says how each row was timed; its
    launches divide k; any other GPU or shape gets the rule, which also divides k, and the source says which."""
    from kernelscope.kernels.marlin.gluon_host import MAX_M
    from kernelscope.kernels.marlin.launch import LaunchConfig, rule_launch, rule_or_table, tuned_tables

    h100 = "NVIDIA H100 80GB HBM3"
    table = tuned_tables()[h100]
    assert set(table) == {"schema", "version", "device_name", "groupsize", "how", "rows"}
    assert all(set(r) == {"m", "k", "n", "launch", "median_us", "timing", "measured"} for r in table["rows"])
    assert all(set(r["launch"]) == set(LaunchConfig.triton().to_dict()) for r in table["rows"])
    assert {r["timing"] for r in table["rows"]} <= {"cuda-graph", "cuda-events"}
    assert all(t in table["how"] for t in ("cuda-graph", "cuda-events"))
    points = {(r["k"], r["n"], r["m"]) for r in table["rows"]}
    assert points >= {(k, n, m) for k, n in DEFAULT_SHAPES for m in DEFAULT_MS}
    assert "m=128" in rule_or_table(128, 4096, 4096, 128, h100, True).source
    for r in table["rows"]:
        got = rule_or_table(r["m"], r["k"], r["n"], 128, h100, True)
        assert got.config == LaunchConfig.from_dict(r["launch"])
        assert got.source == f"table tuned_h100.json ({h100}, m={r['m']}, {r['measured']}, {r['timing']})"
        if got.config.kernel == "gluon":  # the Gluon decode kernel, on Hopper at m <= 64
            assert r["m"] <= MAX_M and r["timing"] == "cuda-graph"
            assert got.config.programs <= r["n"] // 64 * (r["k"] // 128)
        else:
            assert r["k"] % (got.config.split_k * 128) == 0
    between = rule_or_table(8, 8192, 8192, 128, h100, True)  # not tuned at m=8: the next tuned m above, 16
    assert "m=16," in between.source
    above = rule_or_table(1024, 8192, 8192, 128, h100, True)  # above every tuned m: the largest
    assert "m=256," in above.source
    other = rule_or_table(1, 8192, 8192, 128, "NVIDIA A100-SXM4-80GB", True)
    assert other.source.startswith("rule (no tuned table for this GPU)")
    assert other.config == rule_launch(1, 8192, True)
    assert rule_or_table(1, 5120, 5120, 128, h100, True).source.startswith("rule (this shape was not tuned")
    assert rule_or_table(1, 8192, 8192, -1, h100, True).source.startswith("rule")  # the table is for groupsize 128
    for m in (1, 4, 16, 64, 256, 1000):
        for k in (128, 256, 384, 4096, 5120, 28672):
            lc = rule_launch(m, k)
            assert k % (lc.split_k * 128) == 0, (m, k, lc)


def test_bytes_floor_against_independent_arithmetic():
    case = W4A16Case(m=16, k=4096, n=14336, groupsize=128)
    # 4096*14336/2 weight bytes + 32 groups * 14336 * 2 scale bytes + 16*4096*2 (A) + 16*14336*2 (C)
    assert case.bytes_moved == 29_360_128 + 917_504 + 131_072 + 458_752 == 30_867_456
    assert W4A16Case(1, 4096, 4096, -1).bytes_moved == 8_388_608 + 8192 + 8192 + 8192
    results = run_w4a16_sweep([W4A16Case(4, 512, 256)], {"cublas": IMPLEMENTATIONS["cublas"]}, CPU,
                              timer=fixed_timer, command=["t"])
    bw = 2 * COPY_BYTES / (FIXED_MS * 1e-3)  # read + write over the fake copy time
    assert results.settings["copy_bandwidth_bytes_per_s"] == pytest.approx(bw)
    assert results.settings["floor_formula"] == FLOOR_FORMULA and "copy_" in results.settings["copy_method"]
    row = results.rows[0]
    expected = (512 * 256 // 2 + 4 * 256 * 2 + 4 * 512 * 2 + 4 * 256 * 2) / bw * 1e3
    assert row.get("floor_ms") == pytest.approx(expected)
    assert row.get("pct_of_floor") == pytest.approx(100 * expected / FIXED_MS)


def test_sweep_records_failures_and_goes_on(tmp_path):
    builders = {**IMPLEMENTATIONS, "raises": _raises, "wrong": _wrong, "nosetup": _setup_fails}
    seen, saved = [], []
    results = run_w4a16_sweep(make_cases([1, 4], [(512, 256)]), builders, CPU, timer=fixed_timer, command=["t"],
                              on_progress=lambda d, t, label: seen.append((d, t)),
                              on_row=lambda r: saved.append(len(r.rows)))
    rows = 2 * len(builders)
    assert len(results.rows) == rows and seen[-1] == (rows, rows) and max(saved) == rows
    by = {(r.impl, r.params["m"]): r for r in results.rows}
    interpreted = os.environ.get("TRITON_INTERPRET") == "1"  # conftest sets it on machines without CUDA
    has_triton = _has_triton()
    for m in (1, 4):  # the Gluon kernel runs on Hopper GPUs only: the row says so
        r = by[("w4a16-gluon", m)]
        assert r.status == "failed" and ("sm_90" in r.error or "triton" in r.error), r.error
        r = by[("w4a16-pdl", m)]  # the CPU's launch is the Triton kernel's, which has no PDL
        assert r.status == "failed" and ("only the Gluon kernel" in r.error or "triton" in r.error), r.error
    for impl in ("w4a16", "w4a16-untuned", "cublas", "tinygemm"):  # the real builders, on CPU, are correct
        for m in (1, 4):
            r = by[(impl, m)]
            if impl.startswith("w4a16") and not has_triton:  # torch without triton: the row says what is missing
                assert r.status == "failed" and "needs triton" in r.error
                continue
            if (
                impl.startswith("w4a16") and not interpreted
            ):  # a GPU machine: the CPU kernel refuses, and the row says so
                assert r.status == "failed" and "TRITON_INTERPRET=1" in r.error
                continue
            assert r.status == "ok" and r.get("relative_error") < 1e-2, (impl, m, r.error)
            assert r.get("speedup_vs_cublas") == pytest.approx(1.0)  # the fake timer times all alike
            if impl.startswith("w4a16"):  # each row says which launch ran and where it came from
                assert r.get("launch_source").startswith("rule (no tuned table for this GPU)")
    raised = by[("raises", 1)]
    assert raised.status == "failed" and raised.error == "RuntimeError: tinygemm needs sm_80"
    assert raised.get("median_ms") is None
    wrong = by[("wrong", 4)]
    assert wrong.status == "failed" and "wrong result" in wrong.error and wrong.get("relative_error") > 0.5
    assert wrong.get("median_ms") is None  # a wrong result is never timed
    nosetup = by[("nosetup", 4)]
    assert nosetup.status == "failed" and nosetup.error.startswith("setting up: TypeError")
    assert by[("wrong", 1)].get("speedup_vs_cublas") is None

    path = tmp_path / "r.json"
    results.save(path)
    doc = json.loads(path.read_text())
    assert doc["benchmark"] == "w4a16" and doc["settings"]["bytes_formula"].startswith("k*n/2")
    assert BenchResults.load(path).to_dict() == doc


def test_summary_table_text():
    from kernelscope.cli.bench.w4a16 import print_summary

    results = run_w4a16_sweep(make_cases([1, 4], [(512, 256)]),
                              {"cublas": IMPLEMENTATIONS["cublas"], "w4a16": _raises, "wrong": _wrong}, CPU,
                              timer=fixed_timer, command=["t"])
    results.rows[0].values["clock_flags_after"] = ["sw_power_cap"]
    buf = io.StringIO()
    print_summary(results, 110, False, file=buf)
    text = buf.getvalue()
    assert "W4A16 GEMM k=512 n=256 groupsize 128" in text and "m=1" in text and "m=4" in text
    assert "copy bandwidth 1 GB/s" in text
    cublas = next(line for line in text.splitlines() if line.startswith("│ cublas"))
    assert cublas.count("2.0000 / ") == 2 and " !" in cublas
    assert next(line for line in text.splitlines() if line.startswith("│ wrong ")).count("wrong") == 3
    assert "w4a16 vs cublas" in text and "1 of 2 measurements" in text


def _synthetic_results() -> BenchResults:
    """SYNTHETIC results for the plot test, written by hand: not a recording of any GPU."""
    env = {"device": {"name": {"value": "SYNTHETIC TEST DEVICE"}}, "date_utc": "2000-01-01T00:00:00+00:00"}
    rows = []
    for k, n in ((4096, 4096), (8192, 28672)):
        for m in (1, 16, 256):
            base = 0.01 * m ** 0.5 * k * n / 4096 ** 2
            for impl, factor in (("w4a16", 0.5), ("cublas", 1.0), ("tinygemm", 0.7)):
                values = {"median_ms": base * factor, "pct_of_floor": 30.0 / factor, "relative_error": 1e-3,
                          "speedup_vs_cublas": 1 / factor}
                rows.append(BenchRow(impl, {"m": m, "k": k, "n": n, "groupsize": 128}, "ok", None, values))
    rows.append(BenchRow("tinygemm", {"m": 64, "k": 4096, "n": 4096, "groupsize": 128}, "failed", "RuntimeError: x"))
    return BenchResults("w4a16", env, {}, rows, ["synthetic"])


def test_plots_from_a_synthetic_file(tmp_path):
    pytest.importorskip("matplotlib")
    from PIL import Image

    from kernelscope.bench.plots import write_plots

    path = tmp_path / "synthetic.json"
    _synthetic_results().save(path)
    paths = write_plots(BenchResults.load(path), tmp_path / "plots", prefix="w4a16")
    assert [p.name for p in paths] == ["w4a16_time.png", "w4a16_floor.png", "w4a16_speedup.png"]
    for p in paths:
        assert p.stat().st_size > 10_000 and p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "SYNTHETIC TEST DEVICE, 2000-01-01" in Image.open(p).text["Title"]


_ks = run_cli
_one_sentence = one_sentence_error


@pytest.mark.parametrize("args,phrase", [
    (["--shapes", "4096x4096,4096"], "--shapes must be comma-separated KxN pairs"),
    (["--shapes", "4096x1000"], "k must be a multiple of 128 and n of 256"),
    (["--m", "1,abc"], "--m must be comma-separated integers"),
    (["--m", "0,4"], "--m must list positive integers"),
    (["--impl", "w4a16,marlin"], "unknown implementation marlin"),
    (["--groupsize", "64"], "--groupsize must be 128 or -1"),
])
def test_cli_bad_input_is_one_sentence(args, phrase, tmp_path):
    assert phrase in _one_sentence(_ks("bench", "w4a16", *args, "-o", str(tmp_path / "r.json")))


def test_bench_without_a_gpu_says_so(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert "no CUDA GPU" in _one_sentence(_ks("bench", "w4a16", "-o", str(tmp_path / "r.json")))
    assert not (tmp_path / "r.json").exists()
