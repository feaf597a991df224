"""Kernel rules on Nsight Compute reports of any set: the importer's field table resolves each model metric from
the names a report holds (alternatives across ncu's sets and versions, or a named derivation from its parts), a
rule that cannot run names what is missing and the ncu option that adds it, and on the defect suite recorded under
--set basic / detailed / full and kernelscope's targeted pass (tests/data/ncu_sets, an H200) the planted defect
comes first in the cases whose report holds its evidence."""
from __future__ import annotations

import sys

import pytest

from conftest import DATA, ROOT

if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kernelscope.collect.ncu.derive import resolve_field  # noqa: E402
from kernelscope.collect.ncu.fields import NCU_FIELDS, OPCODE_METRIC, opcode_metric  # noqa: E402
from kernelscope.model import Metric  # noqa: E402

FIELD = {f.model_name: f for f in NCU_FIELDS}
SETS_DIR = DATA / "ncu_sets"


def _named(pairs: dict[str, float]) -> dict[str, Metric]:
    return {k: Metric(v, "", "ncu", k) for k, v in pairs.items()}


def test_l1_bytes_are_the_per_op_sectors_times_32_when_the_report_has_no_total():
    lsu = {f"l1tex__t_sectors_pipe_lsu_mem_{op}.sum": 10.0 for op in
           ("global_op_ld", "global_op_st", "local_op_ld", "local_op_st")}
    got = resolve_field(FIELD["l1_bytes"], _named({**lsu, "l1tex__t_sectors_pipe_tex_mem_texture.sum": 5.0}))
    assert got.value == 45 * 32 and got.source == "derived"
    assert "l1tex__t_sectors_pipe_tex_mem_texture.sum" in got.raw_name and "x 32" in got.formula


def test_a_name_the_report_holds_wins_over_a_derivation():
    got = resolve_field(FIELD["l2_bytes"], _named({"lts__t_bytes.sum": 64.0, "lts__t_sectors.sum": 1.0}))
    assert (got.value, got.source, got.raw_name) == (64.0, "ncu", "lts__t_bytes.sum")
    got = resolve_field(FIELD["l2_bytes"], _named({"lts__t_sectors.sum": 3.0}))
    assert (got.value, got.source, got.raw_name) == (96.0, "derived", "(lts__t_sectors.sum) x 32")


def test_mma_instructions_come_from_the_sass_opcode_counts_and_are_zero_when_none_ran():
    raw = _named({OPCODE_METRIC: 100.0, opcode_metric("FFMA"): 60.0, opcode_metric("HGMMA"): 8.0})
    gmma, hmma = resolve_field(FIELD["mma_gmma_instructions"], raw), resolve_field(FIELD["mma_hmma_instructions"], raw)
    assert (gmma.value, gmma.source) == (8.0, "derived") and opcode_metric("HGMMA") in gmma.raw_name
    assert hmma.value == 0 and not hmma.is_missing and "no HMMA instruction ran" in hmma.raw_name
    # without the opcode table, or without its per-opcode instances, a count is missing, not zero
    assert resolve_field(FIELD["mma_hmma_instructions"], _named({})).is_missing
    assert resolve_field(FIELD["mma_hmma_instructions"], _named({OPCODE_METRIC: 100.0})).is_missing


def test_threads_per_instruction_is_derived_from_the_source_counters():
    got = resolve_field(FIELD["threads_per_instruction"], _named({"thread_inst_executed": 800.0,
                                                                  "inst_executed": 100.0}))
    assert got.value == 8.0 and got.raw_name == "thread_inst_executed / inst_executed"


def test_a_missing_metric_names_its_parts_and_the_section_that_adds_it():
    got = resolve_field(FIELD["local_sectors"], _named({"l1tex__t_sectors_pipe_lsu_mem_local_op_st.sum": 1.0}))
    assert got.is_missing
    reason = got.missing_reason or ""
    assert "l1tex__t_sectors_pipe_lsu_mem_local_op_ld.sum" in reason and "local_op_st" not in reason
    assert "`--section MemoryWorkloadAnalysis_Tables` (in `--set full`)" in reason


@pytest.fixture(scope="module")
def full_report():
    pytest.importorskip("ncu_report", reason="the ncu-report package reads .ncu-rep files (pip install ncu-report)")
    from benchmarks.diagnosis.ncu_sets_score import load_report_session

    return load_report_session(SETS_DIR / "planted_full.ncu-rep.xz")


def _case(session, case):
    from benchmarks.diagnosis.ncu_sets_score import case_session

    return case_session(session, case).launches[0]


@pytest.mark.slow
def test_a_full_report_gives_the_tensor_and_local_memory_rules_their_evidence(full_report):
    from kernelscope.analyze.rules.base import value, is_matmul

    matmul = _case(full_report, "fma_matmul_fp32")
    assert opcode_metric("FFMA") in matmul.counters  # the reader keeps each opcode's count
    assert is_matmul(matmul) is False  # MMA instructions from the opcode table: none
    assert matmul.metrics["fma_pipe_instructions"].source == "derived"
    assert value(matmul, "tensor_tf32_peak_ops_per_cycle") is not None
    local = _case(full_report, "local_memory")
    assert value(local, "local_sectors")[0] > 0 and value(local, "l2_bytes") is not None
    assert local.metrics["l2_bytes"].formula and local.metrics["dram_bytes"].source == "derived"


@pytest.mark.slow
def test_the_planted_defect_comes_first_per_set_where_the_report_holds_its_evidence():
    pytest.importorskip("ncu_report", reason="the ncu-report package reads .ncu-rep files (pip install ncu-report)")
    from benchmarks.diagnosis.ncu_sets_score import score_reports, summary

    by_set = score_reports(SETS_DIR)
    full_first, full_evaluated, full_cases = summary(by_set["full"])
    assert full_evaluated == full_cases == 20  # --set full holds every kernel rule's evidence
    for name, scores in by_set.items():
        for c in scores:  # a case left out says what the report lacks and which ncu option adds it
            assert c.evaluated or (c.not_evaluated and "adds it" in c.not_evaluated), (name, c)
        ranked = [c for c in scores if c.evaluated]
        first = sum(c.planted_first for c in ranked)
        assert ranked and first >= 0.9 * len(ranked), (name, [(c.case, c.top_rule) for c in ranked
                                                             if not c.planted_first])
    # the targeted pass carries ncu's peak rates: with no calibration, fma-instead-of-tensor still has a gain
    fma = [c for c in by_set["targeted"] if c.expected == ("fma-instead-of-tensor",)]
    assert len(fma) == 3 and all(c.planted_first and c.planted_gain_pct is not None for c in fma), fma


def test_the_counter_pass_asks_for_the_peak_rates_the_tensor_rule_reads_where_ncu_lists_them():
    import tarfile

    from kernelscope.collect.ncu.runner import NcuOptions, build_command

    argv = build_command("ncu", SETS_DIR / "x", ["prog"], NcuOptions(arch="sm_90"))
    asked = set(argv[argv.index("--metrics") + 1].split(","))
    for field in ("fp32_fma_peak_inst_per_cycle", "tensor_tf32_peak_ops_per_cycle"):
        assert asked & set(FIELD[field].candidates), field
    # ncu refuses the whole pass for a name it does not know: on the H200 (ncu 2025.3.1) `--list-metrics` of
    # the pass's own options listed every name it asks for
    with tarfile.open(SETS_DIR / "ncu_lists_2025.3.1.tar.xz") as tar:
        listed = set(tar.extractfile("lists/metrics_targeted.txt").read().decode().split())
    assert asked <= listed, asked - listed


def test_stall_reasons_come_from_warp_sampling_without_the_warp_state_section():
    from kernelscope.collect.ncu.merge import resolve_fields

    out = resolve_fields(_named({"smsp__pcsamp_warps_issue_stalled_long_scoreboard": 300.0,
                                 "smsp__pcsamp_warps_issue_stalled_selected": 100.0}))
    got = out["stall_long_scoreboard"]
    assert (got.value, got.source) == (3.0, "derived") and "sampled" in (got.formula or "")
    assert "`--section WarpStateStats`" in (out["stall_barrier"].missing_reason or "")


@pytest.mark.slow
def test_nvidia_findings_on_the_same_cause_are_shown_beside_kernelscopes(full_report):
    from benchmarks.diagnosis.ncu_sets_score import case_session
    from kernelscope.analyze.analysis import analyze_session
    from kernelscope.analyze.roofline import Ceilings
    from kernelscope.render.json_view import kernel_analysis_json

    session = case_session(full_report, "local_memory")
    k = analyze_session(session, Ceilings.none()).kernel(session.launches[0].kernel)
    rows = {r["cause"]: r for r in kernel_analysis_json(k)["nvidia_comparison"]}
    local = rows["local-memory"]  # NVIDIA's local-load access-pattern findings judge the same cause
    assert local["kernelscope"] == "fired" and "MemoryCacheAccessPattern" in {n["rule_id"] for n in local["nvidia"]}
    assert all(r["explanation"] for r in rows.values())
