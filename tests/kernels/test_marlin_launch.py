"""The W4A16 launch: LaunchConfig (one typed launch, the kernel inside it) and decide_launch's order (rule, shipped
table, first-use tuner), on CPU; the table rebuild runs its candidates in the Triton interpreter."""
from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")

from kernelscope.kernels.marlin import autotune, launch  # noqa: E402
from kernelscope.kernels.marlin.launch import LaunchConfig, decide_launch, rule_launch  # noqa: E402

H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(autouse=True)
def fresh_decisions():
    launch.forget_decisions()
    yield
    launch.forget_decisions()


def test_a_config_holds_its_own_kernels_fields_only():
    t = LaunchConfig.triton(block_m=64, block_n=64, split_k=4, tma=True)
    assert (t.kernel, t.block_m, t.split_k, t.tma, t.programs, t.cluster_size) == ("triton", 64, 4, True, None, None)
    g = LaunchConfig.gluon(programs=216, num_stages=6, max_registers=96, sync_mma=True)
    assert (g.kernel, g.programs, g.block_m, g.split_k, g.pdl) == ("gluon", 216, None, None, False)
    assert g.with_pdl().pdl is True and g.pdl is False  # frozen: a new config
    for cfg in (t, g):
        assert LaunchConfig.from_dict(cfg.to_dict()) == cfg
        assert set(cfg.to_dict()) == set(t.to_dict())  # one key set for both kernels


@pytest.mark.parametrize("make, phrase", [
    (lambda: LaunchConfig("cutlass"), "kernel must be 'triton' or 'gluon'"),
    (lambda: LaunchConfig("gluon", split_k=2, sync_mma=False, cluster_size=1, pdl=False), "split_k are not"),
    (lambda: LaunchConfig("triton", block_m=16), "the triton kernel needs block_n, split_k, num_warps, tma"),
    (lambda: LaunchConfig.triton(block_m=8), "block_m and block_n must be one of"),
    (lambda: LaunchConfig.triton(split_k=0), "split_k and num_warps must be positive"),
    (lambda: LaunchConfig.gluon(num_stages=0), "num_stages and max_registers must be positive"),
    (lambda: LaunchConfig.from_dict({"kernel": "triton", "maxnreg": 80}), "unknown fields maxnreg"),
    (lambda: LaunchConfig.triton().with_pdl(), "only the Gluon kernel"),
])
def test_bad_configs_say_why_in_one_sentence(make, phrase):
    with pytest.raises(ValueError) as info:
        make()
    assert phrase in str(info.value) and str(info.value).endswith(".") and "\n" not in str(info.value)


def test_rule_then_table(monkeypatch):
    """Step 1, the rule, holds for any shape; step 2, the table, replaces it where the table holds the GPU, group
    size and shape (its row at the nearest tuned m at or above m, else the largest)."""
    row = {"m": 16, "k": 512, "n": 256, "launch": LaunchConfig.gluon(8, 4, 96).to_dict(), "median_us": 3.0,
           "timing": "cuda-graph", "measured": "2026-01-02"}
    table = {"device_name": H100, "groupsize": 128, "rows": [row, {**row, "m": 64, "timing": "cuda-events"}]}
    monkeypatch.setattr(launch, "tuned_tables", lambda: {H100: table})
    got = launch.rule_or_table(4, 512, 256, 128, H100, True)
    assert got.config == LaunchConfig.gluon(8, 4, 96) and got.source.startswith("table") and "m=16," in got.source
    assert "cuda-events" in launch.rule_or_table(1000, 512, 256, 128, H100, True).source  # the largest m
    for args in ((4, 512, 512, 128, H100), (4, 512, 256, -1, H100), (4, 512, 256, 128, "other GPU")):
        got = launch.rule_or_table(*args, True)
        assert got.source.startswith("rule") and got.config == rule_launch(4, 512, True)


def test_rule_splits_k_into_whole_blocks():
    assert rule_launch(1, 512) == LaunchConfig.triton(16, 128, 4, 4, 3)
    assert rule_launch(1, 384).split_k == 1 and rule_launch(40, 256).split_k == 2
    assert rule_launch(200, 4096) == LaunchConfig.triton(128, 64, 1, 4, 3)


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="needs the Triton interpreter")
def test_the_tuner_comes_after_the_table_and_never_overrides_it(monkeypatch, tmp_path):
    """A shape the table holds is not tuned; one it does not hold is (step 3), the rule tried first."""
    from kernelscope.kernels.marlin import pack, quantize, to_kernel_layout

    monkeypatch.setenv("KERNELSCOPE_CACHE_DIR", str(tmp_path))
    autotune._MEMO.clear()
    w = torch.randn((256, 512), generator=torch.Generator().manual_seed(1)).half()
    words, scales = to_kernel_layout(*pack(*quantize(w, 128), 128), 128)
    cpu = autotune.device_facts(words).name
    row = {"m": 1, "k": 512, "n": 256, "launch": LaunchConfig.triton(16, 64, 2).to_dict(), "median_us": 3.0,
           "timing": "cuda-graph", "measured": "2026-01-02"}
    monkeypatch.setattr(launch, "tuned_tables", lambda: {cpu: {"device_name": cpu, "groupsize": 128, "rows": [row]}})
    times = iter([2.0, 1.0])

    def timer(run, w, s):
        run(w, s)
        return next(times)

    # the interpreter's device is looked up in the table only when tuning is asked for (tests)
    def tuned(m: int, n_words=words):
        return decide_launch(m, 512, 256, 128, n_words, scales, tune=True, limit=2, timer=timer)

    monkeypatch.setattr(launch, "rule_or_table", lambda m, k, n, g, name, tma: launch.LaunchDecision(
        LaunchConfig.triton(16, 64, 2), "table (test)") if m == 1 else launch.LaunchDecision(rule_launch(m, k), "rule"))
    assert tuned(1).source == "table (test)"  # held by the table: no tuning
    got = tuned(16)
    assert got.source.startswith("tuning cache") and "CUDA-graph time" in got.source
    entry = autotune.read_cache(autotune.cache_file(cpu, autotune.device_facts(words).triton_version), cpu,
                                autotune.device_facts(words).triton_version)
    (only,) = entry.values()
    assert only["tried"][0]["launch"] == rule_launch(16, 512).to_dict()  # the rule first


@pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="needs the Triton interpreter")
def test_rebuild_writes_the_shipped_format_and_tries_the_current_launch_first(monkeypatch):
    from kernelscope.kernels.marlin import pack, quantize, to_kernel_layout

    w = torch.randn((256, 512), generator=torch.Generator().manual_seed(2)).half()
    words, scales = to_kernel_layout(*pack(*quantize(w, 128), 128), 128)
    cpu = autotune.device_facts(words).name
    current = LaunchConfig.triton(16, 64, 2)
    old = {"m": 1, "k": 512, "n": 256, "launch": current.to_dict(), "median_us": 9.0, "timing": "cuda-events",
           "measured": "2026-01-02"}
    monkeypatch.setattr(launch, "tuned_tables", lambda: {cpu: {"device_name": cpu, "groupsize": 128, "rows": [old]}})
    tried = []
    real = autotune.tune_shape

    def spy(*args, **kw):
        kw["timer"] = lambda run, w, s: (run(w, s), 0.004)[1]
        out = real(*args, **kw)
        tried.append(out.tried)
        return out

    monkeypatch.setattr(autotune, "tune_shape", spy)
    doc = launch.rebuild_table([(1, 512, 256)], 128, lambda k, n: (words, scales), budget_s=1e9, limit=2)
    assert tried[0][0]["launch"] == current.to_dict()
    assert doc["schema"] == launch.TABLE_SCHEMA and doc["device_name"] == cpu and doc["groupsize"] == 128
    (row,) = doc["rows"]
    assert set(row) == set(old) and row["timing"] == "cuda-graph" and row["median_us"] == 4.0
    assert LaunchConfig.from_dict(row["launch"]) == current  # the first of equal times is kept
    monkeypatch.setattr(launch, "tuned_tables", lambda: {cpu: doc})
    assert launch.table_launch(1, 512, 256, 128, cpu).config == current  # the reader takes what the rebuild wrote


def test_rebuild_cli_refuses_before_any_work(tmp_path):
    from conftest import run_cli

    out = tmp_path / "t.json"
    out.write_text("{}")
    r = run_cli("tune", "w4a16", "--rebuild-table", str(out))
    assert r.returncode == 2 and "Traceback" not in r.stderr and out.read_text() == "{}"
    assert "-f" in r.stderr or "exists" in r.stderr
    r = run_cli("tune", "w4a16")
    assert r.returncode == 2 and "--shapes is required" in r.stderr
