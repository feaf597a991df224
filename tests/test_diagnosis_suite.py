"""The diagnosis defect suite (benchmarks/diagnosis, issue 14), on the CPU:

- every Triton and torch case computes its torch reference, defect and fixed alike, in the
  Triton interpreter at the tiny size; CUDA C++ cases are skipped (they need a GPU and nvcc);
- the planted defects are really in the code Triton generates for an H100: the kernels are
  compiled ahead of time for sm_90 (no GPU needed) and their PTX is read;
- the calibration table is built from recorded H100 sessions in tests/data.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("TRITON_INTERPRET", "1")  # before the suite's kernels are first launched

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from benchmarks.diagnosis.suite.config import CASES, CONTROL, CUDA, DEFECT, FIXED, CaseSpec  # noqa: E402

DATA = ROOT / "tests" / "data"
RUNNABLE = [(c.name, v) for c in CASES for v in c.variants]


@pytest.mark.parametrize("name,variant", RUNNABLE)
def test_variant_matches_torch_reference(name: str, variant: str) -> None:
    from benchmarks.diagnosis.suite.cases import prepare
    from benchmarks.diagnosis.suite.config import case

    spec = case(name)
    if spec.kind == CUDA:
        pytest.skip(f"{name} is CUDA C++, built with nvcc and launched on a GPU: checked by calibrate.py there")
    p = prepare(spec, variant, "cpu", "tiny")
    if variant != CONTROL:  # the kernel must write every element: start from NaN, not whatever empty() held
        p.result().fill_(float("nan"))
    p.run()
    p.check()
    ref = p.reference().float()
    assert torch.isfinite(ref).all() and ref.abs().sum() > 0  # a reference of zeros would prove nothing


@pytest.mark.parametrize("name", [c.name for c in CASES if c.kind != CUDA and len(c.variants) == 2])
def test_defect_and_fixed_agree(name: str) -> None:
    from benchmarks.diagnosis.suite.cases import prepare
    from benchmarks.diagnosis.suite.config import case

    spec = case(name)
    out = {}
    for v in (DEFECT, FIXED):
        p = prepare(spec, v, "cpu", "tiny")
        p.run()
        out[v] = p.result().float().clone()
    assert torch.allclose(out[DEFECT], out[FIXED], atol=p.atol, rtol=p.rtol)


def test_wrong_result_is_caught() -> None:
    """check() is not a rubber stamp: a corrupted output fails it."""
    from benchmarks.diagnosis.suite.cases import prepare
    from benchmarks.diagnosis.suite.config import case

    p = prepare(case("uncoalesced"), DEFECT, "cpu", "tiny")
    p.run()
    p.result()[3, 5] += 1.0
    with pytest.raises(AssertionError, match="max abs error"):
        p.check()


def test_cuda_case_needs_gpu() -> None:
    from benchmarks.diagnosis.suite.cases import NeedsGpu, prepare
    from benchmarks.diagnosis.suite.config import case

    with pytest.raises(NeedsGpu, match="CUDA C\\+\\+"):
        prepare(case("bank_conflicts"), DEFECT, "cpu", "tiny")


def test_case_table_is_consistent() -> None:
    from kernelscope.analyze.rules import RULES

    known = {r.rule_id for r in RULES}
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))
    for c in CASES:
        assert set(c.expected_rules) <= known, f"{c.name} expects a rule kernelscope does not have"
        assert c.variants in ((DEFECT, FIXED), (CONTROL,))
        assert c.note and c.full and c.tiny
    assert {c.name for c in CASES if c.variants == (CONTROL,)} == {"control_gemm", "control_sdpa", "control_add"}


def test_run_case_cli(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", "TRITON_INTERPRET": "1",
           "CUDA_VISIBLE_DEVICES": ""}
    script = ROOT / "benchmarks" / "diagnosis" / "suite" / "run_case.py"
    ok = subprocess.run([sys.executable, str(script), "tail_effect", "defect", "--size", "tiny"],
                        capture_output=True, text=True, env=env, timeout=120)
    assert ok.returncode == 0, ok.stderr
    assert "tail_effect defect: 3 steps (tiny, cpu)" in ok.stdout
    bad = subprocess.run([sys.executable, str(script), "control_add", "defect"], capture_output=True, text=True,
                         env=env, timeout=120)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == ["run_case: error: case control_add has variants control, not 'defect'."]
    gpu_only = subprocess.run([sys.executable, str(script), "divergence", "defect", "--size", "tiny"],
                              capture_output=True, text=True, env=env, timeout=120)
    assert gpu_only.returncode == 1 and "needs" not in gpu_only.stdout and "no GPU here" in gpu_only.stderr


# ------------------------------------------------------------ planted defects, in the code Triton makes for sm_90

# Compiled in a fresh process: the interpreter runs above leave triton.language patched, and
# the kernels must be real JIT functions (TRITON_INTERPRET unset) to compile.
PTX_SCRIPT = r"""
import json, re, sys
try:
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    import triton.backends.nvidia  # noqa: F401
except ImportError as e:
    print(json.dumps({"skip": f"no CUDA backend in this Triton ({e})"})); sys.exit(0)
from benchmarks.diagnosis.suite import triton_kernels as K
from benchmarks.diagnosis.suite.config import case

def ptx(fn, sig, consts, divisible, num_warps=4):
    # as a launch with 16-byte-aligned pointers and `divisible` integers divisible by 16 specializes it
    full = {**sig, **{k: "constexpr" for k in consts}}
    names = list(full)
    src = ASTSource(fn, full, constexprs={(names.index(k),): v for k, v in consts.items()},
                    attrs={(names.index(a),): [["tt.divisibility", 16]] for a in divisible})
    try:
        return triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": num_warps}).asm["ptx"]
    except FileNotFoundError as e:  # no ptxas: toolchain missing, not a kernel error
        print(json.dumps({"skip": f"no ptxas ({e})"})); sys.exit(0)

def facts(text):
    return {"loads": sorted(set(re.findall(r"ld\.global(?:\.\w+)*", text))),
            "mma": sorted(set(re.findall(r"\b(w?g?mma\.[\w.]+)", text))),
            "fma_f32": len(re.findall(r"\bfma\.rn\.f32", text))}

F32 = {"x_ptr": "*fp32", "y_ptr": "*fp32", "n_rows": "i32", "n_cols": "i32"}
MM = {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp16", "M": "i32", "N": "i32", "K": "i32"}
mm = case("fma_matmul").full
out = {
    "copy_row_order": facts(ptx(K.scale_copy_kernel, F32, {"BLOCK": 1024, "COLUMN_ORDER": False}, list(F32))),
    "copy_column_order": facts(ptx(K.scale_copy_kernel, F32, {"BLOCK": 1024, "COLUMN_ORDER": True}, list(F32))),
    "strided_stride_1": facts(ptx(K.strided_scale_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32",
                                  "stride": "i32"}, {"BLOCK": 1024}, ["x_ptr", "y_ptr", "n"])),
}
for variant, use_dot in (("defect", False), ("fixed", True)):
    bm, bn, bk, w = mm[variant + "_tile"]
    out["matmul_" + variant] = facts(ptx(K.matmul_kernel, MM, {"BM": bm, "BN": bn, "BK": bk, "USE_DOT": use_dot},
                                         list(MM), w))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def sm90_ptx() -> dict:
    import json

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = f"{ROOT / 'src'}{os.pathsep}{ROOT}"
    r = subprocess.run([sys.executable, "-c", PTX_SCRIPT], capture_output=True, text=True, env=env, timeout=600,
                       cwd=str(ROOT))
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(r.stdout.strip().splitlines()[-1])
    if "skip" in doc:
        pytest.skip(doc["skip"])
    return doc


def test_planted_access_defects_in_ptx(sm90_ptx: dict) -> None:
    assert sm90_ptx["copy_row_order"]["loads"] == ["ld.global.v4.b32"]  # 16-byte loads of consecutive floats
    assert sm90_ptx["copy_column_order"]["loads"] == ["ld.global.b32"]  # one float per lane, lanes n_cols apart
    # stride not specialized: Triton cannot prove the accesses contiguous and loads 4 bytes at a time
    assert sm90_ptx["strided_stride_1"]["loads"] == ["ld.global.b32"]


def test_planted_fma_matmul_in_ptx(sm90_ptx: dict) -> None:
    defect, fixed = sm90_ptx["matmul_defect"], sm90_ptx["matmul_fixed"]
    assert defect["mma"] == [] and defect["fma_f32"] >= 16  # no MMA at all: the FMA pipes do the math
    assert any(m.startswith("wgmma.mma_async") and "f16" in m for m in fixed["mma"])  # Hopper tensor cores, fp16


# ------------------------------------------------------------ the table, from recorded H100 sessions

def _fake_cases() -> list[CaseSpec]:
    """Cases named after the regions of tests/data/session_h100_analysis.json.gz (a real H100 recording
    of tests/workloads/counters_small.py), to drive the table code; the rows are not calibration results."""
    return [CaseSpec("triton_mm", "stand-in pair", "triton", (DEFECT, FIXED), ("low-tensor-pipe", "occupancy-limit"),
                     "x", {"a": 1}, {"a": 1}),
            CaseSpec("cublas_mm", "stand-in control", "torch", (CONTROL,), (), "x", {"a": 1}, {"a": 1}),
            CaseSpec("absent_region", "no such region", "triton", (DEFECT, FIXED), ("tail-effect",), "x", {"a": 1},
                     {"a": 1})]


def test_table_rows_follow_the_analysis() -> None:
    from benchmarks.diagnosis.table import build_rows, markdown, scores, table_json
    from kernelscope.analyze.profiling_summary import analyze_session
    from kernelscope.analyze.roofline import Ceilings
    from kernelscope.model import Session

    s = Session.load(DATA / "session_h100_analysis.json.gz")
    none = Ceilings.none("not calibrated in this test")
    sessions = {("triton_mm", DEFECT): s, ("triton_mm", FIXED): s, ("cublas_mm", CONTROL): s,
                ("absent_region", DEFECT): s, ("absent_region", FIXED): "ncu failed: stand-in error"}
    timing = {"triton_mm": {DEFECT: {"median_ms": 0.04}, FIXED: {"median_ms": 0.03}}}
    rows = build_rows(_fake_cases(), sessions, timing, lambda _: none)
    by = {(r.case, r.variant): r for r in rows}
    assert len(rows) == 5
    # the row's kernel and findings are the analysis of the kernel inside the region
    mm = by[("triton_mm", DEFECT)]
    assert mm.kernel == "matmul_kernel" and mm.error is None
    want = analyze_session(s, none).kernel(mm.kernel_full).recommendations.recommendations
    assert mm.top_rule == f"{want[0].source}:{want[0].finding.rule_id}"
    assert [f["rule"] for f in mm.findings] == [r.finding.rule_id for r in want]
    assert mm.bound == analyze_session(s, none).kernel(mm.kernel_full).bound.bound
    assert mm.real_gain_pct == pytest.approx(25.0)  # 1 - 0.03 / 0.04
    fired = {p.rule_id: p.fired for p in mm.planted}
    assert fired == {r: any(x.source == "kernelscope" and x.finding.rule_id == r for x in want)
                     for r in ("low-tensor-pipe", "occupancy-limit")}
    assert by[("cublas_mm", CONTROL)].kernel.startswith("nvjet")
    assert "control_no_finding_over_20" in by[("cublas_mm", CONTROL)].checks
    # failures are rows that say so
    assert "no kernel inside region 'absent_region'" in by[("absent_region", DEFECT)].error
    assert by[("absent_region", FIXED)].error == "ncu failed: stand-in error"
    assert by[("absent_region", DEFECT)].checks["planted_is_top"] is False
    sc = scores(rows)
    assert sc["planted_is_top"]["of"] == 2
    md = markdown(rows, {"device": "NVIDIA H100 80GB HBM3", "date": "recorded"})
    assert md.count("\n| ") == 1 + len(rows) + 1 + len(sc)  # table header, its rows, scores header, its rows
    doc = table_json(rows, {"device": "x"})
    assert doc["rows"][0]["case"] == "triton_mm" and doc["scores"] == sc


def test_trimmed_session_tells_the_same_story() -> None:
    from benchmarks.diagnosis.table import Row, diagnose, trim_session
    from kernelscope.analyze.roofline import Ceilings
    from kernelscope.model import Session

    s = Session.load(DATA / "session_h100_analysis.json.gz")
    none = Ceilings.none("test")
    t = trim_session(s, "cublas_mm")
    assert 0 < len(t.launches) < len(s.launches)
    assert all("cublas_mm" in x.regions or x.counters for x in t.launches)
    a = diagnose(Row("cublas_mm", CONTROL, "c", "none yet"), s, (), none)
    b = diagnose(Row("cublas_mm", CONTROL, "c", "none yet"), t, (), none)
    assert (a.kernel_full, a.bound) == (b.kernel_full, b.bound)
    assert [f["rule"] for f in a.findings] == [f["rule"] for f in b.findings]
