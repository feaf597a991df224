"""The diagnosis defect suite (benchmarks/diagnosis, issue 14), on the CPU:

- every Triton and torch case computes its torch reference, defect and fixed alike, in the
  Triton interpreter at the tiny size; CUDA C++ cases are skipped (they need a GPU and nvcc);
- the planted defects are really in the code Triton generates for an H100: the kernels are
  compiled ahead of time for sm_90 (no GPU needed) and their PTX is read;
- the calibration table is built from recorded H100 sessions in tests/data, and reports the
  tuning half and the check half (issue 35: variants the rules were never tuned on) apart.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import HANG_S

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

os.environ.setdefault("TRITON_INTERPRET", "1")  # before the suite's kernels are first launched

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from benchmarks.diagnosis.suite.config import (  # noqa: E402
    ALL_CASES, CASES, CHECK, CHECK_CASES, CONTROL, CUDA, DEFECT, FIXED, TUNING, CaseSpec)

DATA = ROOT / "tests" / "data"
RUNNABLE = [(c.name, v) for c in ALL_CASES for v in c.variants]


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


@pytest.mark.parametrize("name", [c.name for c in ALL_CASES if c.kind != CUDA and len(c.variants) == 2])
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


def test_check_half_is_apart_and_covers_every_defect() -> None:
    """Issue 35: the check half (written before the rules change) has >= 10 defect cases with fixed twins and
    >= 2 controls, a variant of every defect category the tuning half measures, under other names."""
    from kernelscope.analyze.rules import RULES

    known = {r.rule_id for r in RULES}
    assert all(c.half == TUNING for c in CASES) and all(c.half == CHECK for c in CHECK_CASES)
    assert ALL_CASES == CASES + CHECK_CASES and len({c.name for c in ALL_CASES}) == len(ALL_CASES)
    defects = [c for c in CHECK_CASES if c.variants == (DEFECT, FIXED)]
    controls = [c for c in CHECK_CASES if c.variants == (CONTROL,)]
    assert len(defects) >= 10 and len(controls) >= 2 and len(defects) + len(controls) == len(CHECK_CASES)
    for c in CHECK_CASES:
        assert set(c.expected_rules) <= known and c.note and c.full and c.tiny and not c.excluded
        assert (c.variants == (CONTROL,)) == (not c.expected_rules)
    # every defect the tuning half measures (scalar_loads aside: no measurable defect on the H100; host_gaps is a
    # timeline defect the whole-program suite covers) has at least one check variant
    tuned = {r for c in CASES if c.name not in ("scalar_loads", "host_gaps") for r in c.expected_rules}
    assert tuned <= {r for c in defects for r in c.expected_rules}


def test_calibrate_selects_cases_by_half() -> None:
    from benchmarks.diagnosis.calibrate import select_cases

    assert select_cases(None, None) == list(CASES)  # as before the halves: the tuning half
    assert select_cases(None, "check") == list(CHECK_CASES)
    assert select_cases(None, "all") == list(ALL_CASES)
    assert [c.name for c in select_cases("tail_effect_w8,control_softmax", "check")] == ["tail_effect_w8",
                                                                                            "control_softmax"]
    assert [c.name for c in select_cases("uncoalesced,tail_effect_w4", None)] == ["uncoalesced", "tail_effect_w4"]
    with pytest.raises(ValueError, match="not in the check half"):
        select_cases("uncoalesced", "check")
    with pytest.raises(ValueError, match="unknown case"):
        select_cases("no_such_case", None)


def test_run_case_cli(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", "TRITON_INTERPRET": "1",
           "CUDA_VISIBLE_DEVICES": ""}
    script = ROOT / "benchmarks" / "diagnosis" / "suite" / "run_case.py"
    ok = subprocess.run([sys.executable, str(script), "tail_effect", "defect", "--size", "tiny"],
                        capture_output=True, text=True, env=env, timeout=HANG_S)
    assert ok.returncode == 0, ok.stderr
    assert "tail_effect defect: 3 steps (tiny, cpu)" in ok.stdout
    bad = subprocess.run([sys.executable, str(script), "control_add", "defect"], capture_output=True, text=True,
                         env=env, timeout=HANG_S)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.strip().splitlines() == ["run_case: error: case control_add has variants control, not 'defect'."]
    gpu_only = subprocess.run([sys.executable, str(script), "divergence", "defect", "--size", "tiny"],
                              capture_output=True, text=True, env=env, timeout=HANG_S)
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
# check half (issue 35)
T = {"x_ptr": "*bf16", "y_ptr": "*bf16", "R": "i32", "C": "i32"}
tr = case("uncoalesced_bf16_transpose").full
for variant, gather in (("defect", True), ("fixed", False)):
    out["transpose_" + variant] = facts(ptx(K.transpose_kernel, T, {"BR": tr["br"], "BC": tr["bc"], "GATHER": gather},
                                            list(T)))
for name, dt in (("fma_matmul_fp32", "fp32"), ("fma_matmul_fp16_rect", "fp16")):
    spec = case(name).full
    ANY = {"a_ptr": "*" + dt, "b_ptr": "*" + dt, "c_ptr": "*" + dt, "M": "i32", "N": "i32", "K": "i32"}
    for variant, use_dot in (("defect", False), ("fixed", True)):
        bm, bn, bk, w = spec[variant + "_tile"]
        out[name + "_" + variant] = facts(ptx(K.matmul_any_kernel, ANY, {"BM": bm, "BN": bn, "BK": bk,
                                                                          "USE_DOT": use_dot}, list(ANY), w))
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def sm90_ptx() -> dict:
    import json

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = f"{ROOT / 'src'}{os.pathsep}{ROOT}"
    r = subprocess.run([sys.executable, "-c", PTX_SCRIPT], capture_output=True, text=True, env=env, timeout=HANG_S,
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


def test_check_half_defects_in_ptx(sm90_ptx: dict) -> None:
    """The check half's Triton defects are planted in the sm_90 code too (issue 35)."""
    # bf16 transpose: the gather loads one 2-byte element per lane; the tiled fix loads 16 bytes at a time
    assert sm90_ptx["transpose_defect"]["loads"] == ["ld.global.b16"]
    assert sm90_ptx["transpose_fixed"]["loads"] == ["ld.global.v4.b32"]
    for name, kind in (("fma_matmul_fp32", "tf32"), ("fma_matmul_fp16_rect", "f16")):
        defect, fixed = sm90_ptx[name + "_defect"], sm90_ptx[name + "_fixed"]
        assert defect["mma"] == [] and defect["fma_f32"] >= 16, name  # SIMT: FMA pipes, no MMA
        assert any(m.startswith("wgmma.mma_async") and kind in m for m in fixed["mma"]), (name, fixed["mma"])


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
    from kernelscope.analyze.analysis import analyze_session
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
    assert mm.top_rule == f"{want[0].source}:{want[0].finding.rule}"
    assert [f["rule"] for f in mm.findings] == [r.finding.rule for r in want]
    assert mm.bound == analyze_session(s, none).kernel(mm.kernel_full).bound.bound
    assert mm.real_gain_pct == pytest.approx(25.0)  # 1 - 0.03 / 0.04
    fired = {p.rule_id: p.fired for p in mm.planted}
    assert fired == {r: any(x.source == "kernelscope" and x.finding.rule == r for x in want)
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


def test_table_reports_the_halves_apart() -> None:
    """Issue 35: scores per half (tuning, then check), never pooled in the markdown; the check half is held to
    the 20-point gain criterion only, the tuning half keeps the issue-14 15-point column beside it."""
    from dataclasses import replace

    from benchmarks.diagnosis.table import build_rows, markdown, scores, scores_by_half, table_json
    from kernelscope.analyze.roofline import Ceilings
    from kernelscope.model import Session

    s = Session.load(DATA / "session_h100_analysis.json.gz")
    tuning = _fake_cases()[:2]
    check = [replace(tuning[0], half=CHECK), replace(tuning[1], half=CHECK)]
    # a region is named after its case: the check rows read the same recorded sessions under the same names
    sessions = {("triton_mm", DEFECT): s, ("triton_mm", FIXED): s, ("cublas_mm", CONTROL): s}
    timing = {"triton_mm": {DEFECT: {"median_ms": 0.04}, FIXED: {"median_ms": 0.03}}}
    none = Ceilings.none("test")
    rows = build_rows(tuning + check, sessions, timing, lambda _: none)
    assert [r.half for r in rows] == [TUNING] * 3 + [CHECK] * 3
    by_half = scores_by_half(rows)
    assert list(by_half) == [TUNING, CHECK]
    assert by_half[TUNING] == scores(rows[:3]) and by_half[CHECK] == scores(rows[3:])
    assert "gain_within_15_points" in by_half[TUNING] and "gain_within_15_points" not in by_half[CHECK]
    assert by_half[TUNING]["gain_within_20_points"]["of"] == by_half[CHECK]["gain_within_20_points"]["of"] == 1
    assert by_half[CHECK]["planted_is_top"]["of"] == 1 and by_half[CHECK]["control_no_finding_over_20"]["of"] == 1
    md = markdown(rows, {"device": "test"})
    assert "## Against the targets: tuning half (2 cases)" in md
    assert "## Against the targets: check half (2 cases)" in md
    assert md.index("tuning half (2 cases)") < md.index("check half (2 cases)")
    assert "| triton_mm | check | defect |" in md and "| triton_mm | tuning | defect |" in md
    doc = table_json(rows, {"device": "test"})
    assert doc["scores_by_half"] == by_half and doc["targets"]["gain_tolerance_points_issue35"] == 20.0
    only_check = markdown(rows[3:], {"device": "test"})
    assert "check half" in only_check and "tuning half" not in only_check


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


# ------------------------------------------------------------ the CUDA C++ cases, as far as nvcc without a GPU goes

def _ptxas_report() -> dict[str, dict[str, int]]:
    """Per kernel (mangled name): registers, stack frame and shared memory bytes, from ptxas -v for sm_90."""
    from benchmarks.diagnosis.suite.cuda_build import SOURCE, CudaBuildError, find_nvcc

    try:
        nvcc = find_nvcc()
    except CudaBuildError as e:
        pytest.skip(str(e))
    r = subprocess.run([nvcc, "-O3", "-arch=sm_90", "-cubin", "-Xptxas", "-v", "-o", os.devnull, str(SOURCE)],
                       capture_output=True, text=True, timeout=HANG_S)
    assert r.returncode == 0, r.stderr[-2000:]
    out: dict[str, dict[str, int]] = {}
    name = None
    for line in r.stderr.splitlines():
        if m := re.search(r"Compiling entry function '(\w+)'", line):
            name = m.group(1)
            out[name] = {"stack": 0, "smem": 0}
        elif name and (m := re.search(r"(\d+) bytes stack frame", line)):
            out[name]["stack"] = int(m.group(1))
        elif name and (m := re.search(r"Used (\d+) registers", line)):
            out[name]["registers"] = int(m.group(1))
            if s := re.search(r"(\d+) bytes smem", line):
                out[name]["smem"] = int(s.group(1))
    return out


def _kernel(report: dict, *parts: str) -> dict[str, int]:
    hits = [v for k, v in report.items() if all(p in k for p in parts)]
    assert len(hits) == 1, (parts, sorted(report))
    return hits[0]


def test_planted_cuda_defects_in_ptxas_report() -> None:
    rep = _ptxas_report()
    # local memory: the dynamically indexed array gets a stack frame; the fixed one lives in registers
    assert _kernel(rep, "rotated_dot", "ILb1E")["stack"] >= 4 * 32
    assert _kernel(rep, "rotated_dot", "ILb0E")["stack"] == 0
    # registers: one body, two budgets. Free (defect): the cold path's table takes > 128 registers (at most
    # 2 blocks of 128 threads per SM); __launch_bounds__(128, 16) (fixed): 32, the cold path spilled to the stack
    free, capped = _kernel(rep, "reg_budget_chain", "ILi1E"), _kernel(rep, "reg_budget_chain", "ILi16E")
    assert free["registers"] > 128 and free["stack"] == 0
    assert capped["registers"] <= 32 and capped["stack"] > 0
    assert free["smem"] == capped["smem"] == 4 * 192
    # bank conflicts: the padded tile is one float wider per row
    assert _kernel(rep, "transpose_tile", "ILi0E")["smem"] == 32 * 32 * 4
    assert _kernel(rep, "transpose_tile", "ILi1E")["smem"] == 32 * 33 * 4


def test_check_half_cuda_defects_in_ptxas_report() -> None:
    """The check half's CUDA defects (issue 35), as far as ptxas -v shows them."""
    rep = _ptxas_report()
    # a 16-float array at a runtime index: a stack frame; fixed: registers only
    assert _kernel(rep, "window_dot", "ILb1E")["stack"] >= 4 * 16
    assert _kernel(rep, "window_dot", "ILb0E")["stack"] == 0
    # 64 weights per thread held in registers on the executed path (defect) against shared memory (fixed):
    # over 64 registers (at most 3 blocks of 256 threads an SM) against few enough for 8 blocks (<= 32)
    hot, shared = _kernel(rep, "weighted_chase", "ILb1E"), _kernel(rep, "weighted_chase", "ILb0E")
    assert hot["registers"] > 64 and hot["stack"] == 0
    assert shared["registers"] <= 32 and shared["stack"] == 0
    # the wide tile: 64 x 64 floats, one float wider per row when padded
    assert _kernel(rep, "wide_tile_transpose", "ILi0E")["smem"] == 64 * 64 * 4
    assert _kernel(rep, "wide_tile_transpose", "ILi1E")["smem"] == 64 * 65 * 4
    assert _kernel(rep, "quad_paths", "ILb0E") and _kernel(rep, "quad_paths", "ILb1E")


def test_cuda_library_builds_and_loads(tmp_path: Path, monkeypatch) -> None:
    """The nvcc -> shared library -> ctypes route the GPU run uses (no launch: no GPU here)."""
    from benchmarks.diagnosis.suite import cuda_build

    try:
        cuda_build.find_nvcc()
    except cuda_build.CudaBuildError as e:
        pytest.skip(str(e))
    monkeypatch.setenv(cuda_build.CACHE_ENV, str(tmp_path))
    lib_path = cuda_build.build_library("sm_90")
    assert lib_path.parent == tmp_path and cuda_build.build_library("sm_90") == lib_path  # cached, not rebuilt
    cuda_build.load_library.cache_clear()
    lib = cuda_build.load_library("sm_90")
    assert lib.reg_table_len() == 192 and lib.local_k() == 32
    assert lib.window_k() == 16 and lib.chase_w() == 64


def test_harness_outputs_from_recorded_sessions(tmp_path: Path) -> None:
    """calibrate.py's last step (analysis, table, packing) on a work directory of recorded sessions."""
    import json
    import shutil
    import tarfile

    from benchmarks.diagnosis.calibrate import write_outputs
    from kernelscope.analyze.roofline import Ceilings

    work, out = tmp_path / "work", tmp_path / "out"
    (work / "sessions").mkdir(parents=True)
    (work / "logs").mkdir()
    for name in ("triton_mm_defect", "triton_mm_fixed", "cublas_mm_control"):
        shutil.copy(DATA / "session_h100_analysis.json.gz", work / "sessions" / f"{name}.json.gz")
        (work / "logs" / f"{name}.log").write_text("run log\n")
    (work / "sessions" / "absent_region_defect.json.gz").write_bytes(b"not a session")
    statuses = {("absent_region", FIXED): "skipped: time budget"}
    rows = write_outputs(_fake_cases(), work, out, {}, statuses, {"device": "test"},
                         lambda _: Ceilings.none("test"))
    by = {(r.case, r.variant): r for r in rows}
    assert by[("triton_mm", DEFECT)].kernel == "matmul_kernel"
    assert by[("absent_region", DEFECT)].error.startswith("session unreadable")
    assert by[("absent_region", FIXED)].error == "no session written (skipped: time budget)"
    doc = json.loads((out / "diagnosis_table.json").read_text())
    assert [(r["case"], r["variant"]) for r in doc["rows"]] == list(by)
    assert (out / "diagnosis_table.md").read_text().startswith("# Diagnosis calibration: test")
    with tarfile.open(out / "diagnosis_sessions.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"sessions/triton_mm_defect.json.gz", "sessions/cublas_mm_control.json.gz",
            "logs/triton_mm_fixed.log"} <= names
    assert not any("absent_region" in n and n.startswith("sessions/") for n in names)
    # the trimmed sessions tell the same story (no "trimmed session differs" note)
    assert not any("trimmed" in (r.error or "") for r in rows)
