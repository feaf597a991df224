"""The whole-program defect suite (benchmarks/diagnosis/programs) on the CPU: the table is
consistent, every program parses and builds, defect and fixed twins compute the same result where they can run on
the CPU at tiny size, and score.py's scoring of a verdict (pure functions) on synthetic verdict JSON."""
from __future__ import annotations

import importlib.util
import json
import py_compile
import subprocess
import sys

import pytest

from conftest import HANG_S, ROOT

PROGRAMS_DIR = ROOT / "benchmarks" / "diagnosis" / "programs"
if str(PROGRAMS_DIR) not in sys.path:  # programs import harness (and one another) by bare name
    sys.path.insert(0, str(PROGRAMS_DIR))


def _load_file(name: str):
    key = f"kernelscope_diagnosis_programs_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, PROGRAMS_DIR / f"{name}.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules[key] = mod
        spec.loader.exec_module(mod)
    return sys.modules[key]


config = _load_file("config")
score = _load_file("score")
measure = _load_file("measure")
run = _load_file("run")


def load(name: str):
    """One program's names (build, main, SIZES, CPU_SKIP), as run.py gives them."""
    return run.load(name)
NAMES = [p.name for p in config.PROGRAMS]
# (rtol, atol) where the fix changes the arithmetic (bf16 autocast, fp32 accumulation in a fused kernel)
TOLERANCE = {"tc_conv_infer": (5e-2, 5e-2), "unfused_layernorm_chain": (2e-2, 0.15),
             "holdout_tf32_attention": (5e-2, 5e-2), "holdout_sync_nonzero": (1e-4, 1e-4),
             "holdout_unfused_adam": (1e-4, 1e-6)}


def _importable(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ImportError:  # a finder that refuses the name outright
        return False


# the programs are torch programs: building and running them needs torch (the README's test command runs without)
needs_torch = pytest.mark.skipif(not _importable("torch"), reason="could not import 'torch'")


def test_the_table_is_consistent():
    assert len(set(NAMES)) == len(NAMES)
    for p in config.PROGRAMS:
        assert (PROGRAMS_DIR / p.file).is_file(), p.file
        assert p.half in config.HALVES and (p.half == "holdout") == p.name.startswith("holdout_"), p.name
        assert p.note
        if p.category == config.CONTROL:
            assert p.expected_rule is None and p.variants == ("control",)
        else:
            assert p.expected_rule == p.category and p.expected_rule in config.RULE_IDS
            assert p.variants == ("defect", "fixed")
        if p.category == "straggler-rank":
            assert p.distributed and p.world_sizes == (2, 4)
        else:
            assert p.ranks == 1
    check = [p for p in config.PROGRAMS if p.half == "check"]
    for rule in config.RULE_IDS:
        assert sum(p.category == rule for p in check) >= 2, rule
    assert sum(p.category == config.CONTROL for p in check) >= 2


def test_each_defect_module_holds_exactly_its_programs():
    import ast

    for module in set(config.MODULE.values()):
        tree = ast.parse((PROGRAMS_DIR / f"{module}.py").read_text())
        functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        assert functions == {p.name for p in config.PROGRAMS if p.module == module}, module


def test_run_refuses_an_unknown_program_in_one_sentence(capsys):
    assert run.main(["no_such_program", "--tiny"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "tc_mlp_train" in err


def test_the_holdout_half_covers_every_single_gpu_rule():
    holdout = [p for p in config.PROGRAMS if p.half == "holdout"]
    assert all(not p.distributed for p in holdout)  # one GPU
    for rule in config.RULE_IDS:
        if rule != "straggler-rank":
            assert sum(p.category == rule for p in holdout) >= 1, rule
    assert sum(p.category == "sync-in-loop" for p in holdout) >= 2
    assert sum(p.category == config.CONTROL for p in holdout) >= 1
    # measure.py selects exactly the holdout half by name
    args = measure.argparse.Namespace(programs=config.names("holdout"), ranks_only=False, single_only=False, part=None)
    assert measure.select(args) == holdout


@needs_torch
@pytest.mark.parametrize("name", NAMES)
def test_every_program_compiles_and_declares_its_sizes(name):
    py_compile.compile(str(PROGRAMS_DIR / config.BY_NAME[name].file), doraise=True)
    mod = load(name)
    assert callable(mod.build) and callable(mod.main)
    assert set(mod.SIZES) == {"full", "tiny"}
    assert mod.CPU_SKIP is None or isinstance(mod.CPU_SKIP, str)
    assert (mod.__doc__ or "").strip()


def _device():
    import torch

    return torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")


def _results(mod, variant: str, steps: int = 2) -> list:
    import torch

    step = mod.build(variant, True, _device())
    outs = []
    for _ in range(steps):
        r = step()
        rs = r if isinstance(r, (list, tuple)) else [r]
        outs.append([t.detach().float().clone().cpu() if isinstance(t, torch.Tensor) else torch.tensor(t) for t in rs])
    return outs


@needs_torch
@pytest.mark.parametrize("name", [p.name for p in config.PROGRAMS if p.category != config.CONTROL])
def test_defect_and_fixed_compute_the_same(name):
    import torch

    mod = load(name)
    if config.BY_NAME[name].distributed:
        pytest.skip(f"{name} runs under torchrun only: {mod.CPU_SKIP}")
    if mod.CPU_SKIP and not torch.cuda.is_available():
        pytest.skip(f"{name} cannot run on the CPU: {mod.CPU_SKIP}")
    precision = torch.get_float32_matmul_precision()
    try:
        a, b = _results(mod, "defect"), _results(mod, "fixed")
    finally:
        torch.set_float32_matmul_precision(precision)
    rtol, atol = TOLERANCE.get(name, (1e-4, 1e-5))
    for sa, sb in zip(a, b):
        assert len(sa) == len(sb)
        for x, y in zip(sa, sb):
            torch.testing.assert_close(x, y, rtol=rtol, atol=atol)


@needs_torch
@pytest.mark.parametrize("name", [p.name for p in config.PROGRAMS if p.category == config.CONTROL])
def test_controls_run_at_tiny_size(name):
    import torch

    mod = load(name)
    if mod.CPU_SKIP and not torch.cuda.is_available():
        pytest.skip(f"{name} cannot run on the CPU: {mod.CPU_SKIP}")
    for outs in _results(mod, "control"):
        assert all(torch.isfinite(t).all() for t in outs)


@needs_torch
def test_a_program_prints_its_step_times_as_one_json_line():
    env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"}
    p = subprocess.run([sys.executable, str(PROGRAMS_DIR / "run.py"), "launch_param_loop", "--tiny", "--variant",
                        "fixed", "--steps", "3", "--warmup", "1"], capture_output=True, text=True, timeout=HANG_S,
                       env=env)
    assert p.returncode == 0, p.stderr
    res = measure.parse_result(p.stdout)
    assert res["variant"] == "fixed" and len(res["step_ms"]) == 3 and res["median_ms"] > 0


def test_measure_builds_the_documented_run_command_lines(tmp_path):
    single, ranks = config.BY_NAME["tc_mlp_train"], config.BY_NAME["straggler_ddp"]
    cmd = measure.record_command(single, "defect", 1, tmp_path / "s.json.gz")
    assert cmd[1:5] == ["-m", "kernelscope", "run", "-f"] and "--steps" in cmd and "-o" in cmd
    assert cmd[cmd.index("--") + 1:][1:5] == [str(PROGRAMS_DIR / "run.py"), "tc_mlp_train", "--variant", "defect"]
    cmd = measure.record_command(ranks, "fixed", 4, tmp_path / "r.json.gz")
    assert "--steps" not in cmd[:cmd.index("--")]  # not supported under torchrun
    work = cmd[cmd.index("--") + 1:]
    assert work[1:3] == ["-m", "torch.distributed.run"] and work[work.index("--nproc-per-node") + 1] == "4"
    env = measure.child_env()
    assert env["NCCL_NVLS_ENABLE"] == "0" and env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1"
    assert measure.real_gain_pct(10.0, 2.0) == 80.0 and measure.real_gain_pct(None, 1.0) is None
    assert measure.parse_result('noise\n[rank0]: {"program": "x", "step_ms": [1.0]}\n')["step_ms"] == [1.0]


def _verdict(*findings, not_evaluated=()):
    return {"verdict": {"findings": [dict(f) for f in findings], "not_evaluated": list(not_evaluated)}}


F_TC = {"rule": "tensor-cores-unused", "category": "compute", "title": "FP32 on FMA", "kernel": "sgemm",
        "gain_pct": 70.0, "gain_formula": "...", "evidence": "...", "fix": "allow_tf32"}
F_LB = {"rule": "launch-bound", "title": "launch-bound", "kernel": None, "gain_pct": 3.0}


def test_score_a_defect_verdict():
    f = score.findings_of(_verdict(F_TC, F_LB))
    r = score.score_case("defect", "tensor-cores-unused", f, real_gain_pct=82.0)
    assert r["planted_first"] and r["gain_within"] and r["planted_gain_pct"] == 70.0
    r = score.score_case("defect", "tensor-cores-unused", score.findings_of(_verdict(F_LB, F_TC)), 95.0)
    assert r["planted_first"] is False and r["gain_within"] is False  # second, and 25 points off
    r = score.score_case("defect", "sync-in-loop", f, 30.0)
    assert r["planted_first"] is False and r["gain_within"] is False and r["planted_gain_pct"] is None


def test_score_fixed_controls_and_stragglers():
    assert score.score_case("fixed", "launch-bound", score.findings_of(_verdict(F_TC, F_LB)))["fixed_clean"]
    assert not score.score_case("fixed", "tensor-cores-unused", score.findings_of(_verdict(F_TC)))["fixed_clean"]
    assert score.score_case("fixed", "tensor-cores-unused", [])["fixed_clean"]
    assert not score.score_case("control", None, score.findings_of(_verdict(F_TC)))["control_clean"]
    c = score.score_case("control", None, score.findings_of(_verdict(F_LB)))
    assert c["control_clean"] and c["max_gain_pct"] == 3.0
    strag = {"rule": "straggler-rank", "title": "rank 3 is the straggler", "gain_pct": 30.0}
    r = score.score_case("defect", "straggler-rank", [strag], 28.0, straggler_rank=3)
    assert r["planted_first"] and r["gain_within"] and r["names_straggler"]
    assert not score.score_case("defect", "straggler-rank", [strag], 28.0, straggler_rank=1)["names_straggler"]


def test_score_tolerates_a_missing_verdict_and_counts_totals():
    assert score.findings_of({"kernels": []}) is None and score.findings_of(None) is None
    assert score.score_case("defect", "launch-bound", None, 50.0) == {"variant": "defect", "status": "no verdict"}
    nev = _verdict(not_evaluated=[{"rule": "launch-bound", "reason": "no trace pass"}])
    assert score.not_evaluated_of(nev) == {"launch-bound": "no trace pass"}
    rows = [score.score_case("defect", "tensor-cores-unused", [F_TC], 82.0),
            score.score_case("defect", "launch-bound", None, 50.0), score.score_case("control", None, [F_LB])]
    t = score.totals(rows)
    assert t["planted_first"] == [1, 1] and t["control_clean"] == [1, 1] and t["no_verdict"] == [1, 3]
    md = score.markdown(rows, t, "H100")
    assert "| tensor-cores-unused |" not in md.splitlines()[0] and "planted_first 1/1" in md
    json.dumps(rows)
