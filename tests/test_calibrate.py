"""Measured ceilings without a GPU: the cache key, the cache file, the formulas, the FMA
kernel in Triton's interpreter, and how show and the analysis use a cached calibration.
Measuring itself needs a CUDA GPU (tests/gpu); here `calibrate` must refuse in one sentence."""
from __future__ import annotations

import json

import pytest

from conftest import DATA, HAS_CUDA, run_cli
from kernelscope.analyze.analysis import analyze_session
from kernelscope.analyze.roofline import NO_CALIBRATION
from kernelscope.collect.calibrate import ceilings as C
from kernelscope.model import Metric, Session

MIXED = DATA / "session_h100_mixed.json.gz"


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(C.CACHE_ENV, str(tmp_path / "cache"))
    return tmp_path / "cache"


def fake_calibration(key: C.CeilingKey) -> C.Calibration:
    """A calibration file's contents as `calibrate` writes them; the values are test values, not measurements."""
    times = [1.0, 1.1, 0.9]
    return C.Calibration(key, "2026-11-22T00:00:00+00:00", {
        "copy_bandwidth_bytes_per_s": C.rate_metric("copy", C.copy_bytes_counted(1 << 30), times, "byte/s",
                                                    C.COPY_FORMULA),
        "matmul_fp16_flop_per_s": C.rate_metric("mm", C.matmul_flops(8192), times, "FLOP/s", C.MATMUL_FORMULA),
    }, {"repeats": 3}, {"status": "ok", "flags": []})


def test_cache_key_of_a_recorded_session():
    key, why = C.key_for_device(Session.load(MIXED).device)
    assert why is None
    assert key == C.CeilingKey("NVIDIA H100 80GB HBM3", "580.159.04", 1980)
    assert key.file_name() == "ceilings-NVIDIA-H100-80GB-HBM3-580.159.04-1980MHz.json"


def test_cache_key_without_nvml_and_without_a_device():
    d = Session.load(DATA / "counters_h100_cuda.json.gz").device  # imported from ncu: no driver version
    key, why = C.key_for_device(d)
    assert key is None and "driver version" in why
    d = Session.load(MIXED).device
    del d.attributes["driver_version"]
    key, _ = C.key_for_device(d)
    assert key.driver_version == "cuda-api-13000"  # the CUDA driver's own version stands in
    assert C.key_for_device(None) == (None, "the session recorded no device")


def test_formulas():
    assert C.copy_bytes_counted(1 << 30) == 2 << 30  # read + written
    assert C.matmul_flops(8192) == 2 * 8192 ** 3
    assert C.median([3.0, 1.0, 2.0, 10.0]) == 2.5
    with pytest.raises(ValueError):
        C.median([])
    m = C.rate_metric("copy", 2e9, [1.0, 2.0, 3.0], "byte/s", C.COPY_FORMULA)
    assert m.value == pytest.approx(2e9 / 2e-3) and m.source == "derived" and m.formula == C.COPY_FORMULA


def test_save_load_and_cache_lookup(cache):
    key = C.CeilingKey("NVIDIA H100 80GB HBM3", "580.159.04", 1980)
    assert C.cached(key) is None
    path = C.save_calibration(fake_calibration(key))
    assert path == cache / key.file_name()
    back = C.cached(key)
    assert back.key == key and back.ceilings == fake_calibration(key).ceilings and back.method == {"repeats": 3}
    path.write_text("{ not json")
    assert C.cached(key) is None
    with pytest.raises(C.CalibrationFileError, match="damaged or not JSON"):
        C.load_calibration(path)
    path.write_text('{"format": "something-else"}')
    with pytest.raises(C.CalibrationFileError, match="not a version-1"):
        C.load_calibration(path)


def test_cache_dir_defaults_under_the_user_cache(monkeypatch, tmp_path):
    monkeypatch.delenv(C.CACHE_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert C.cache_dir() == tmp_path / "kernelscope"


def test_fma_kernel_computes_the_chains_it_is_credited_for():
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    if HAS_CUDA:
        pytest.skip("checked in Triton's CPU interpreter; on a GPU machine tests/gpu measures it")
    from kernelscope.collect.calibrate import fma as F
    out = torch.empty(2048, dtype=torch.float32)
    F.launch(out, 0.999, 0.001, iterations=8, block=1024)
    ref = F.reference(2048, 0.999, 0.001, 8)
    assert out.tolist() == pytest.approx(ref, rel=1e-6)
    assert F.fma_flops(2048, 8) == 2 * 2048 * 8 * F.CHAINS
    with pytest.raises(ValueError, match="multiple of the block"):
        F.launch(torch.empty(1000), 1.0, 0.0, 1)


def test_analysis_uses_a_cached_calibration_and_says_so_without_one(cache):
    from kernelscope.cli.calibrate import ceilings_for_session

    s = Session.load(MIXED)
    none = ceilings_for_session(s)
    assert none.missing_reason.startswith(NO_CALIBRATION) and "580.159.04" in none.missing_reason
    key, _ = C.key_for_device(s.device)
    C.save_calibration(fake_calibration(key))
    got = ceilings_for_session(s)
    assert got.missing_reason is None and "measured by kernelscope calibrate on 2026-11-22" in got.source
    assert got.memory_bandwidth.value == pytest.approx(2 * (1 << 30) / 1e-3)
    k = analyze_session(s, got).kernels[0]
    assert not any(what.startswith("measured ceilings") for what, _ in k.missing)


def test_show_with_a_cached_calibration_shows_percent_of_the_measured_bandwidth(cache):
    s = Session.load(DATA / "session_h100_counters.json.gz")
    key, _ = C.key_for_device(s.device)
    C.save_calibration(fake_calibration(key))
    r = run_cli("show", str(DATA / "session_h100_counters.json.gz"), "--kernel", "^matmul_kernel$", "--width", "120",
                "--no-color", env={C.CACHE_ENV: str(cache)})
    assert r.returncode == 0, r.stderr
    dram = float(next(x for x in s.launches if x.counters and x.kernel == "matmul_kernel").metrics["dram_bytes"].value)
    dur = float(next(x for x in s.launches if x.counters and x.kernel == "matmul_kernel").metrics["duration_ns"].value)
    pct = 100 * dram / (dur * 1e-9) / (2 * (1 << 30) / 1e-3)
    assert f"DRAM vs measured copy bandwidth {pct:.1f}%" in r.stdout


@pytest.mark.skipif(HAS_CUDA, reason="this machine has a GPU: calibrate measures for real")
def test_calibrate_without_a_gpu_refuses_in_one_sentence(cache):
    r = run_cli("calibrate")
    assert r.returncode == 2 and r.stderr.startswith("kernelscope: error: cannot calibrate:")
    assert len(r.stderr.strip().splitlines()) == 1 and not cache.exists()


def test_metric_of_a_calibration_is_derived_with_its_formula():
    m = fake_calibration(C.CeilingKey("x", "1", 1)).ceilings["matmul_fp16_flop_per_s"]
    assert isinstance(m, Metric) and m.source == "derived" and "2 x n^3" in m.formula


@pytest.mark.gpu
def test_measure_on_a_gpu_small_sizes(tmp_path, monkeypatch):
    """On a GPU machine: every ceiling is measured, positive, and names its formula (small sizes: a smoke test,
    not a calibration)."""
    ceilings, method = C.measure(0, repeats=3, warmup=1, copy_buffer_bytes=64 << 20, matmul_n=2048,
                                 fma_iterations=256)
    assert set(ceilings) == {"copy_bandwidth_bytes_per_s", "matmul_fp16_flop_per_s", "matmul_bf16_flop_per_s",
                             "fma_fp32_flop_per_s"}
    for m in ceilings.values():
        assert m.value > 0 and m.source == "derived" and m.formula
    assert method["statistic"] == "median" and method["repeats"] == 3


def _ceilings_file(path, value=None, ceilings=None):
    """The recorded H100 calibration with every ceiling's value replaced (or its "ceilings" replaced whole)."""
    doc = json.loads((DATA / "ceilings_h100.json").read_text())
    if ceilings is not None:
        doc["ceilings"] = ceilings
    else:
        for m in doc["ceilings"].values():
            m["value"] = value
    path.write_text(json.dumps(doc))  # NaN and Infinity as Python's json writes them
    return path


@pytest.mark.parametrize("value, why", [(0, "not between 1 and 1e+24"), (-1e15, "not between"),
                                        (float("nan"), "nan, not a finite number"),
                                        (float("inf"), "inf, not a finite number"), (1e-300, "not between"),
                                        (1e300, "not between"), ("abc", "str, not a number"),
                                        (True, "bool, not a number"), ([1], "list, not a number")])
def test_a_ceiling_that_is_not_a_finite_positive_rate_is_refused(tmp_path, value, why):
    path = _ceilings_file(tmp_path / "c.json", value)
    with pytest.raises(C.CalibrationFileError) as e:
        C.load_calibration(path)
    assert str(e.value).startswith(f'{path} is a damaged ceilings file: the value of ceiling '
                                   '"copy_bandwidth_bytes_per_s" is ')
    assert why in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("ceilings, why", [([1], 'its "ceilings" is not an object'),
                                           ("x", 'its "ceilings" is not an object'),
                                           ({"copy_bandwidth_bytes_per_s": 5}, 'ceiling "copy_bandwidth_bytes_per_s" '
                                            "is not an object")])
def test_ceilings_that_are_not_an_object_of_objects_are_refused(tmp_path, ceilings, why):
    with pytest.raises(C.CalibrationFileError, match=why):
        C.load_calibration(_ceilings_file(tmp_path / "c.json", ceilings=ceilings))


def test_the_recorded_ceilings_and_the_bounds_themselves_load(tmp_path):
    assert len(C.load_calibration(DATA / "ceilings_h100.json").ceilings) == 4
    for v in (C.CEILING_MIN, C.CEILING_MAX, 3):
        assert C.load_calibration(_ceilings_file(tmp_path / "c.json", v)).ceilings["fma_fp32_flop_per_s"].value == v


@pytest.mark.parametrize("value", ["0", "NaN", "1e-300", '"abc"'])
def test_ceilings_flag_with_a_bad_value_is_one_sentence_and_exit_2(tmp_path, value):
    from conftest import run_cli
    path = tmp_path / "c.json"
    path.write_text((DATA / "ceilings_h100.json").read_text().replace('"value": 3002029376206.0415',
                                                                      f'"value": {value}'))
    for argv in (["show", str(DATA / "session_h100_analysis.json.gz"), "--no-color"],
                 ["show", str(DATA / "session_h100_analysis.json.gz"), "--json"],
                 ["report", str(DATA / "session_h100_analysis.json.gz"), "-o", str(tmp_path / "r.html")],
                 ["diff", str(MIXED), str(DATA / "session_h100_analysis.json.gz")]):
        code, out, err = run_cli(*argv, "--ceilings", str(path))
        assert code == 2 and err.startswith(f"kernelscope: error: {path} is a damaged ceilings file: the value of "
                                            'ceiling "copy_bandwidth_bytes_per_s" is'), (argv, err)
        assert len(err.strip().splitlines()) == 1 and "NaN" not in out


def test_a_damaged_cached_calibration_counts_as_none_and_says_why(cache):
    s = Session.load(DATA / "session_h100_analysis.json.gz")
    key, _ = C.key_for_device(s.device)
    cache.mkdir(parents=True)
    path = _ceilings_file(C.cache_path(key), 0)
    assert C.cached(key) is None
    from kernelscope.cli.calibrate import ceilings_for_session
    got = ceilings_for_session(s)
    assert got.missing_reason.startswith(f"no usable measured ceilings for this GPU: {path} is a damaged ceilings "
                                         'file: the value of ceiling "copy_bandwidth_bytes_per_s" is 0')
    assert got.missing_reason.endswith("run kernelscope calibrate --force on it")
    for extra in (["--no-color", "--width", "200"], ["--json"]):
        r = run_cli("show", str(DATA / "session_h100_analysis.json.gz"), *extra, env={C.CACHE_ENV: str(cache)})
        assert r.returncode == 0, r.stderr
        assert "no usable measured ceilings for this GPU" in r.stdout
    json.loads(r.stdout)  # valid JSON: no NaN or Infinity literal
    assert "NaN" not in r.stdout and "Infinity" not in r.stdout
