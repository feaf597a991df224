"""Analysis on a session recorded on an H100 with the ceilings `kernelscope calibrate` measured
there the same day (tests/data/ceilings_h100.json): a Triton matmul, cuBLAS, cuDNN attention
(SDPA) and PyTorch kernels, both passes, the matmuls and the attention declaring their work.
Expected values are recomputed here from the recorded numbers, never typed in."""
from __future__ import annotations

import gzip

import pytest

from conftest import DATA, run_cli, shown
from kernelscope.analyze.analysis import analyze_session
from kernelscope.analyze.roofline import Ceilings
from kernelscope.collect.calibrate.ceilings import load_calibration
from kernelscope.model import Session

SESSION = DATA / "session_h100_analysis.json.gz"


@pytest.fixture(scope="module")
def recorded():
    s = Session.load(SESSION)
    cal = load_calibration(DATA / "ceilings_h100.json")
    assert cal.key.device_name == s.device.name  # the same GPU model, measured the same day
    return s, cal, analyze_session(s, Ceilings.from_metrics(cal.ceilings, "tests/data/ceilings_h100.json"))


def _kernel(analysis, fragment: str):
    return next(k for k in analysis.kernels if fragment in k.kernel.name)


@pytest.mark.parametrize("region,fragment", [("triton_mm", "matmul_kernel"), ("cublas_mm", "nvjet"),
                                             ("cudnn_attention", "cudnn_generated_fort_native_sdpa")])
def test_declared_work_places_each_kernel_against_the_measured_roof(recorded, region, fragment):
    s, cal, analysis = recorded
    declared = analysis.declared[region]
    assert declared.per_launch_kernel is not None and fragment in declared.per_launch_kernel
    point = next(p for p in analysis.regions if p.label == region)
    launches = [x for x in s.launches if region in x.regions and fragment in x.kernel]
    busy_ns = sum(x.duration_ns for x in launches)
    assert point.time_ns.value == busy_ns
    assert point.flop_rate.value == pytest.approx(declared.flops / (busy_ns * 1e-9))
    roof = max(float(cal.ceilings[k].value) for k in ("matmul_fp16_flop_per_s", "matmul_bf16_flop_per_s"))
    bw = float(cal.ceilings["copy_bandwidth_bytes_per_s"].value)
    attainable = min(roof, bw * point.intensity.value)
    assert point.pct_of_roof.value == pytest.approx(100 * point.flop_rate.value / attainable, rel=1e-6)
    # the kernels are compute-heavy: above the ridge point, on the compute side, and below the roof
    assert point.side == "compute" and 5 < point.pct_of_roof.value < 100


def test_every_profiled_kernel_gets_a_bound_with_its_basis(recorded):
    s, _, analysis = recorded
    profiled = [k for k in analysis.kernels if k.counter_launch is not None]
    assert len(profiled) >= 7
    for k in profiled:
        assert k.bound.bound != "unknown" and k.bound.basis in ("counters", "timeline"), k.kernel.name
        assert k.bound.evidence and k.bound.reason
    attention = _kernel(analysis, "cudnn_generated_fort_native_sdpa")
    assert attention.bound.bound == "compute-bound"
    pct = dict(attention.pct_of_peak)
    assert not pct["tensor pipe (ncu)"].is_missing and pct["tensor pipe (ncu)"].value > 30


def test_recommendations_name_their_evidence(recorded):
    _, _, analysis = recorded
    recs = [r for k in analysis.kernels for r in k.recommendations.recommendations]
    assert recs
    for r in recs:
        assert r.finding.evidence, r.finding.rule


def test_show_with_the_recorded_ceilings(tmp_path):
    """The ceilings file goes where calibrate caches it; show then draws roofs and % of roof."""
    cal = load_calibration(DATA / "ceilings_h100.json")
    (tmp_path / cal.key.file_name()).write_bytes((DATA / "ceilings_h100.json").read_bytes())
    session = tmp_path / "s.json"
    session.write_bytes(gzip.decompress(SESSION.read_bytes()))
    r = run_cli("show", str(session), "--kernel", "cudnn", "--width", "120", "--no-color",
                env={"KERNELSCOPE_CACHE_DIR": str(tmp_path)})
    assert r.returncode == 0, r.stderr
    assert "measured by kernelscope calibrate on 2026-11-22" in r.stdout
    assert "of the compute roof" in r.stdout


def test_many_shared_wavefronts_per_instruction_with_few_conflicts_are_explained():
    """The recorded cuDNN attention kernel: 277.14 shared-store wavefronts per instruction, 22,570 of 178,476 of
    them conflicts; the panel says what the rest is (issue 36 item 8), from a derived, named ratio."""
    from kernelscope.analyze.counters import transactions
    from kernelscope.model import Session

    s = Session.load(DATA / "session_h100_analysis.json.gz")
    x = next(x for x in s.launches if x.kernel.startswith("cudnn_generated_fort_native_sdpa")
             and "shared_store_wavefronts" in x.metrics)
    store = transactions(x).shared_access[1]
    assert store.unconflicted_per_instruction.value == pytest.approx((178_476 - 22_570) / 644)
    assert store.unconflicted_per_instruction.formula == "(shared wavefronts - bank conflicts) / shared instructions"
    r = run_cli("show", str(DATA / "session_h100_analysis.json.gz"), "--kernel", "cudnn_generated_fort", "--width",
                "160", "--no-color")
    said = " ".join(r.stdout.split())
    assert "Shared stores: 242.1 wavefronts per instruction without the bank conflicts" in said
    assert "Shared loads:" not in said  # 1 wavefront per instruction: nothing to explain


def test_shared_wavefronts_per_instruction_na_says_why(tmp_path):
    # copy_strided runs no shared-memory instruction: 0 instructions, so no ratio, and the panel says so
    counters = DATA / "counters_h100_cuda.json.gz"
    flat = " ".join(line.strip("│ ") for line in shown(counters, "--width", "160").splitlines())
    assert ("N/A shared load: wavefronts/inst: no shared-memory load instruction ran "
            "(smsp__inst_executed_op_shared_ld.sum = 0)") in flat
    out = tmp_path / "c.html"
    assert run_cli("report", str(counters), "-o", str(out)).returncode == 0
    assert "N/A shared store: wavefronts/inst: no shared-memory store instruction ran" in out.read_text()
