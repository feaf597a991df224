"""The benchmark harness without a GPU: sweep, failure rows, results schema, timing statistics, CLI errors."""
from __future__ import annotations

import io
import json
import sys

import pytest

from conftest import run_cli, one_sentence_error
from kernelscope.bench.results import SCHEMA, SCHEMA_VERSION, BenchResults, BenchRow, ResultsFileError
from kernelscope.collect.timing import summarize

torch = pytest.importorskip("torch")

from kernelscope.bench.attention import (  # noqa: E402
    AttentionCase,
    SweepSettings,
    make_cases,
    run_attention_sweep,
)
from kernelscope.kernels.attention import naive_attention  # noqa: E402

CPU = SweepSettings(warmup=1, repeats=3, flush_l2=False, device="cpu")


def _broken(q, k, v, causal):
    raise RuntimeError("this implementation cannot run\nsecond line of detail")


def _oom_above_32(q, k, v, causal):
    if q.shape[2] > 32:
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 GiB")
    return naive_attention(q, k, v, causal)


def test_cases_follow_the_token_budget():
    cases = make_cases([128, 1024], [64, 128], [False, True], ["fp16"], tokens=16384, hidden=2048)
    assert len(cases) == 8
    assert AttentionCase(128, 32, 128, 64, False, "fp16") in cases
    assert AttentionCase(16, 16, 1024, 128, True, "fp16") in cases
    assert AttentionCase(16, 16, 1024, 128, True, "fp16").flops == 4 * 16 * 16 * 1024 ** 2 * 128 // 2
    with pytest.raises(ValueError, match="not a multiple of head dim 96"):
        make_cases([128], [96], [False], ["fp16"], hidden=2000)
    with pytest.raises(ValueError, match="leaves no batch"):
        make_cases([32768], [64], [False], ["fp16"], tokens=16384)
    with pytest.raises(ValueError, match="dtype must be one of"):
        make_cases([128], [64], [False], ["fp8"])


def test_failed_and_oom_rows_are_recorded_and_the_sweep_goes_on(tmp_path):
    cases = make_cases([16, 64], [64], [False, True], ["fp16"], tokens=64, hidden=128)
    seen = []
    saved = []
    results = run_attention_sweep(cases, {"naive": naive_attention, "broken": _broken, "oom": _oom_above_32}, CPU,
                                  on_progress=lambda d, t, label: seen.append((d, t)), command=["test"],
                                  on_row=lambda r: saved.append(len(r.rows)))
    assert len(results.rows) == 12 and saved == list(range(1, 13))
    assert seen[-1] == (12, 12)
    by = {(r.impl, r.params["seq_len"], r.params["causal"]): r for r in results.rows}
    assert all(by[("naive", s, c)].status == "ok" for s in (16, 64) for c in (False, True))
    broken = by[("broken", 16, True)]
    assert broken.status == "failed" and broken.error == "RuntimeError: this implementation cannot run"
    assert broken.get("median_ms") is None  # no timing is ever invented for a row that did not run
    assert by[("oom", 16, False)].status == "ok" and by[("oom", 64, False)].status == "oom"
    assert "out of memory" in by[("oom", 64, False)].error
    # Rows after the failures were still measured.
    assert by[("naive", 64, True)].status == "ok"

    path = tmp_path / "r.json"
    results.save(path)
    doc = json.loads(path.read_text())
    assert doc["schema"] == SCHEMA and doc["schema_version"] == SCHEMA_VERSION and doc["benchmark"] == "attention"
    assert doc["command"] == ["test"] and doc["settings"]["repeats"] == 3
    assert {"device", "software", "nvml_start", "nvml_end", "date_utc", "driver_version"} <= set(doc["environment"])
    ok = next(r for r in doc["rows"] if r["status"] == "ok")
    for key in ("median_ms", "min_ms", "max_ms", "q1_ms", "q3_ms", "iqr_ms", "repeats", "tflops", "tflops_formula",
                "flops", "flops_formula", "clock"):
        assert key in ok, key
    assert ok["min_ms"] <= ok["q1_ms"] <= ok["median_ms"] <= ok["q3_ms"] <= ok["max_ms"]
    p = ok["params"]
    flops = 4 * p["batch"] * p["heads"] * p["seq_len"] ** 2 * p["head_dim"] // (2 if p["causal"] else 1)
    assert ok["flops"] == flops and ok["tflops"] == pytest.approx(flops / (ok["median_ms"] * 1e-3) / 1e12)
    assert ok["peak_memory_bytes"] is None and "CPU" in ok["memory_missing_reason"]
    again = BenchResults.load(path)
    assert [r.to_dict() for r in again.rows] == doc["rows"]


def test_first_call_is_outside_the_timing():
    calls = []

    def impl(q, k, v, causal):
        calls.append(1)
        return q

    def timer(fns, *, warmup, repeats, flush_l2):
        assert calls  # compile / autotune happened before any measurement
        return {name: summarize([1.0], warmup, "perf_counter", flush_l2) for name in fns}

    results = run_attention_sweep(make_cases([16], [64], [False], ["fp16"], tokens=16, hidden=64), {"x": impl}, CPU,
                                  timer=timer)
    assert results.rows[0].status == "ok" and results.rows[0].get("median_ms") == 1.0


def test_environment_says_why_gpu_fields_are_missing():
    results = run_attention_sweep(make_cases([16], [64], [False], ["fp16"], tokens=16, hidden=64),
                                  {"naive": naive_attention}, CPU)
    env = results.environment
    if env["device"]["name"]["value"] is None:  # this machine has no GPU driver
        assert env["device"]["name"]["missing_reason"]
        assert env["nvml_start"].get("missing_reason") or all(
            m.get("missing_reason") for m in env["nvml_start"].values() if isinstance(m, dict) and m["value"] is None)
    assert env["software"]["torch"]["value"] == torch.__version__


def test_timing_statistics():
    t = summarize([5.0, 1.0, 3.0, 2.0, 4.0], warmup=2, clock="cuda-event", l2_flushed=True)
    assert (t.median_ms, t.min_ms, t.max_ms, t.q1_ms, t.q3_ms, t.iqr_ms) == (3.0, 1.0, 5.0, 2.0, 4.0, 2.0)
    assert t.to_dict()["iqr_ms"] == 2.0 and t.repeats == 5 and t.warmup == 2
    one = summarize([7.0], warmup=0, clock="perf_counter", l2_flushed=False)
    assert one.q1_ms == one.q3_ms == one.median_ms == 7.0
    with pytest.raises(ValueError):
        summarize([], 0, "cuda-event", False)


def test_rows_validate_themselves():
    with pytest.raises(ValueError, match="needs the error"):
        BenchRow("x", {}, "failed")
    with pytest.raises(ValueError, match="status must be one of"):
        BenchRow("x", {}, "skipped", "why")
    with pytest.raises(ValueError, match="needs its median_ms"):
        BenchRow("x", {}, "ok")


def test_loading_a_file_that_is_not_results(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "something else"}')
    with pytest.raises(ResultsFileError, match="not a kernelscope benchmark results file"):
        BenchResults.load(bad)
    bad.write_text("{not json")
    with pytest.raises(ResultsFileError, match="not a readable JSON file"):
        BenchResults.load(bad)
    bad.write_text(json.dumps({"schema": SCHEMA, "schema_version": 99, "rows": []}))
    with pytest.raises(ResultsFileError, match="schema version 99"):
        BenchResults.load(bad)
    with pytest.raises(ResultsFileError, match="does not exist"):
        BenchResults.load(tmp_path / "missing.json")


def test_summary_table_text():
    from kernelscope.cli.bench.attention import summary_tables
    from kernelscope.render.show import make_console

    results = run_attention_sweep(make_cases([16, 32], [64], [True], ["fp16"], tokens=64, hidden=128),
                                  {"naive": naive_attention, "broken": _broken}, CPU)
    buf = io.StringIO()
    console = make_console(width=100, file=buf, color=False)
    for title, t in summary_tables(results):
        console.print(title)
        console.print(t)
    text = buf.getvalue()
    assert "head dim 64, 2 heads, causal, fp16" in text and "S=16" in text and "S=32" in text
    broken_line = next(line for line in text.splitlines() if "broken" in line)
    assert broken_line.count("failed") == 2
    naive_line = next(line for line in text.splitlines() if "naive" in line)
    assert naive_line.count(" / ") == 2


_ks = run_cli
_one_sentence = one_sentence_error


@pytest.mark.parametrize("args,phrase", [
    (["bench", "attention", "--seq-lengths", "128,abc"], "--seq-lengths must be comma-separated integers"),
    (["bench", "attention", "--impl", "flash,cublas"], "unknown implementation cublas"),
    (["bench", "attention", "--head-dim", "96", "--hidden", "2000"], "not a multiple of head dim 96"),
    (["profile", "attention", "--impl", "cublas"], "unknown implementation 'cublas'"),
    (["profile", "attention", "--impl", "naive", "--config", "128,64,4,3"], "only applies to --impl flash"),
])
def test_cli_bad_input_is_one_sentence(args, phrase):
    assert phrase in _one_sentence(_ks(*args))


def test_bench_and_profile_without_a_gpu_say_so(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert "no CUDA GPU" in _one_sentence(_ks("bench", "attention", "-o", str(tmp_path / "r.json")))
    assert "no CUDA GPU" in _one_sentence(_ks("profile", "attention", "-o", str(tmp_path / "s.json")))
    assert "no CUDA GPU" in _one_sentence(_ks("profile", "attention", "--counters", "-o", str(tmp_path / "c.json")))
    assert not (tmp_path / "r.json").exists()


def test_bench_without_a_benchmark_prints_help():
    r = _ks("bench")
    assert r.returncode == 2 and "attention" in r.stderr


def test_profile_workload_runs_on_cpu(monkeypatch, capsys):
    """The workload `bench attention --profile` runs, as `python -m` runs it (in this process)."""
    import runpy

    pytest.importorskip("torch")
    monkeypatch.setattr(sys, "argv", ["workload", "--device", "cpu", "--impl", "naive", "--batch", "1", "--heads", "2",
                                      "--seq-len", "16", "--head-dim", "64", "--iters", "2"])
    with pytest.raises(SystemExit) as e:
        runpy.run_module("kernelscope.kernels.attention.workload", run_name="__main__")
    assert e.value.code == 0
    assert "attention/naive B=1 H=2 S=16 D=64 full fp16: 2 calls" in capsys.readouterr().out


def test_rows_measured_while_throttled_are_flagged(monkeypatch):
    """Benchmark hygiene: the NVML state right after a row decides its flag, by the
    same rules as the session's GPU-stats panel (power cap; clock < 80% of max)."""
    from kernelscope.bench import environment
    from kernelscope.bench.results import BenchRow
    from kernelscope.cli.bench.attention import _cell
    from kernelscope.collect.nvml import snapshot as nvml
    from kernelscope.model import Metric

    def reading(clock: int, mask: int):
        return {"sm_clock_mhz": Metric(clock, "MHz", "nvml", "nvmlDeviceGetClockInfo(SM)"),
                "sm_clock_max_mhz": Metric(1980, "MHz", "nvml", "nvmlDeviceGetMaxClockInfo(SM)"),
                "temperature_c": Metric(60, "C", "nvml", "nvmlDeviceGetTemperature"),
                "throttle_reasons": Metric(mask, "bitmask", "nvml", "nvmlDeviceGetCurrentClocksEventReasons")}, None

    monkeypatch.setattr(nvml, "snapshot", lambda bus, index: reading(1290, 0x004))
    hot = environment.clocks_now("0000:00:00.0")
    assert hot["sm_clock_mhz_after"] == 1290
    assert any("sw_power_cap" in f for f in hot["clock_flags_after"])
    assert any("clock" in f for f in hot["clock_flags_after"] if "sw_power_cap" not in f)
    monkeypatch.setattr(nvml, "snapshot", lambda bus, index: reading(1980, 0x000))
    assert environment.clocks_now(None)["clock_flags_after"] == []
    monkeypatch.setattr(nvml, "snapshot", lambda bus, index: ({}, "NVML could not start: no driver"))
    none = environment.clocks_now(None)
    assert none["sm_clock_mhz_after"] is None and "no driver" in none["clock_flags_after_missing_reason"]
    row = BenchRow("flash", {}, "ok", None, {"median_ms": 1.0, "tflops": 300.0, **hot})
    assert _cell(row).endswith(" !")
    assert not _cell(BenchRow("flash", {}, "ok", None, {"median_ms": 1.0, "tflops": 300.0})).endswith("!")


def test_implementations_are_timed_in_turn_repeat_by_repeat():
    """Interleaved timing: after each one's warm-up, a, b, a, b, ... so both see the same clocks."""
    from kernelscope.collect.timing import time_wall_interleaved

    log = []
    timings = time_wall_interleaved({"a": lambda: log.append("a"), "b": lambda: log.append("b")}, warmup=2,
                                    repeats=3)
    assert log == ["a", "a", "b", "b", "a", "b", "a", "b", "a", "b"]
    assert set(timings) == {"a", "b"} and all(t.repeats == 3 and "interleaved" in t.clock for t in timings.values())


def test_a_failure_while_timing_is_attributed_to_its_implementation():
    """If the interleaved timing raises, each implementation is timed alone: only the culprit fails."""
    state = {"armed": False}

    def flaky(q, k, v, causal):
        if state["armed"]:
            raise RuntimeError("failed while timed")
        state["armed"] = True  # the first (untimed) call passes
        return q

    results = run_attention_sweep(make_cases([16], [64], [False], ["fp16"], tokens=16, hidden=64),
                                  {"naive": naive_attention, "flaky": flaky}, CPU)
    by = {r.impl: r for r in results.rows}
    assert by["naive"].status == "ok" and by["flaky"].status == "failed"
    assert by["flaky"].error == "RuntimeError: failed while timed" and by["flaky"].get("median_ms") is None
