"""Rules and recommendations on sessions recorded on an H100: the known-bad CUDA kernels'
problems are found with the numbers that show them, and nothing is claimed that the
counters do not support (Triton's async-copy loads are not called uncoalesced)."""
from __future__ import annotations


import pytest

from conftest import assert_snapshot, DATA, draw, ROOT, shown
from ncu_fixtures import report_file
from kernelscope.analyze.analysis import analyze_session
from kernelscope.analyze.recommend import rank_key
from kernelscope.analyze.rules import RULES, NotEvaluated, RuleContext
from kernelscope.analyze.rules.memory import SPILL_COUNTER, spills
from kernelscope.analyze.rules.occupancy import occupancy_limit
from kernelscope.model import Metric, Session
from kernelscope.render.kernel_analysis import SummaryPanel

DEMO = ROOT / "src" / "kernelscope" / "data" / "demo_session.json.gz"
RANKS = DATA / "ranks" / "session_h200x2_run_torchrun.json.gz"

CUDA = DATA / "counters_h100_cuda.json.gz"
TRITON = DATA / "session_h100_counters.json.gz"


@pytest.fixture(scope="module")
def cuda():
    return analyze_session(Session.load(CUDA))


@pytest.fixture(scope="module")
def triton():
    return analyze_session(Session.load(TRITON))


def ours(k, rule_id):
    return [r for r in k.recommendations.recommendations if r.source == "kernelscope" and r.finding.rule == rule_id]


def evidence(r) -> dict:
    return dict(r.finding.evidence)


def test_strided_copy_is_uncoalesced_with_4_of_32_bytes_per_sector_as_evidence(cuda):
    k = cuda.kernel("copy_strided")
    (r,) = ours(k, "uncoalesced-global")
    ev = evidence(r)
    assert ev["smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.ratio"] == 4.0
    assert ev["smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio"] == 4.0
    assert ev["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] == 16777216
    # gain = wasted sector bytes / memory traffic x memory throughput %, where the traffic is the larger of
    # L1/TEX bytes and L2 bytes less DRAM bytes; the recorded memory throughput is 61.40%
    sectors = (
        ev["l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"] + ev["l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum"]
    )
    traffic = max(ev["l1tex__t_bytes.sum"], ev["lts__t_bytes.sum"] - ev["dram__bytes.sum"])
    assert traffic >= sectors * 32
    assert r.gain_pct == pytest.approx(sectors * 28 / traffic * 61.403, abs=0.01)
    assert r.gain_pct <= 0.875 * 61.403 + 0.01  # never more than the old all-LSU bound
    assert "4 of each 32-byte sector" in r.finding.message
    assert k.recommendations.recommendations[0] is r  # the largest estimated gain of this kernel


def test_naive_transpose_has_32_way_bank_conflicts(cuda):
    (r,) = ours(cuda.kernel("transpose_smem"), "shared-bank-conflicts")
    ev = evidence(r)
    conflicts = ev["l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum"]
    waves = ev["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"]
    inst = ev["smsp__inst_executed_op_shared_ld.sum"]
    assert waves / inst == pytest.approx(32.2, abs=0.1)  # ~32-way: a column read of a 32x32 float tile
    assert conflicts / waves > 0.96
    assert "~32-way" in r.finding.message and "store" not in r.finding.message.split(".")[0]


def test_coalesced_copy_is_not_called_uncoalesced_nor_conflicted(cuda):
    k = cuda.kernel("copy_coalesced")
    assert not ours(k, "uncoalesced-global") and not ours(k, "shared-bank-conflicts")


def test_padded_transpose_is_not_flagged_but_the_naive_one_is(tmp_path):
    from kernelscope.collect.trace.api import new_session
    from kernelscope.collect.ncu.merge import session_from_report
    from kernelscope.collect.ncu.report_reader import read_report

    s = new_session(["ncu-report"])
    session_from_report(s, read_report(report_file("ncu_h100_access_patterns", tmp_path)))
    a = analyze_session(s)
    naive = next(k for k in a.kernels if "transpose_smem<(int)0>" in k.kernel.name)
    padded = next(k for k in a.kernels if "transpose_smem<(int)1>" in k.kernel.name)
    assert ours(naive, "shared-bank-conflicts")
    assert not ours(padded, "shared-bank-conflicts")
    x = padded.counter_launch  # the padded tile: one wavefront per shared load, as the fix intends
    assert x.metrics["shared_load_wavefronts"].value / x.metrics["shared_load_instructions"].value < 1.1


def test_wmma_gemm_low_tensor_pipe_and_a_half_wave_that_is_no_tail(cuda):
    k = cuda.kernel("wmma_gemm")
    (t,) = ours(k, "low-tensor-pipe")
    tensor = evidence(t)["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active"]
    assert tensor == pytest.approx(4.26, abs=0.01)
    # capped by the headroom: memory throughput is at 90.68% of peak
    assert t.gain_pct == pytest.approx(100 - 90.6808, abs=0.01)
    # 0.48 waves of 1,024 blocks: no tail (under one wave), and every one of the 132 SMs gets blocks
    assert k.counter_launch.metrics["waves_per_sm"].value == pytest.approx(0.4848, abs=1e-4)
    assert k.counter_launch.blocks >= 132
    assert not ours(k, "tail-effect") and not ours(k, "small-grid")


def test_triton_matmul_loads_are_async_copies_not_uncoalesced(triton):
    k = triton.kernel("matmul_kernel")
    assert not ours(k, "uncoalesced-global")
    skipped = {n.rule: n.reason for n in k.recommendations.not_evaluated}
    assert "asynchronous copies" in skipped["uncoalesced-global"]
    for r in k.recommendations.recommendations:
        assert "uncoalesced" not in (r.finding.title + r.finding.message).lower()


def test_every_kernelscope_finding_has_evidence_from_the_launch(cuda, triton):
    checked = 0
    for a in (cuda, triton):
        for k in a.kernels:
            x = k.counter_launch
            for r in k.recommendations.recommendations:
                if r.source != "kernelscope":
                    continue
                assert r.finding.evidence, r.finding.rule
                raw_names = {m.raw_name: m for m in x.metrics.values()} if x else {}
                for name, value in r.finding.evidence:
                    if x is not None and name in x.counters:
                        assert float(x.counters[name].value) == pytest.approx(float(value), rel=1e-3)
                    elif name in raw_names:
                        assert float(raw_names[name].value) == pytest.approx(float(value), rel=1e-3)
                    else:  # a derived number says so in its name
                        assert "(" in name or name == "grid blocks", name
                checked += 1
    assert checked >= 6


def test_nvidia_findings_are_merged_and_ranked_by_kind_of_estimate(cuda):
    recs = cuda.kernel("copy_strided").recommendations.recommendations
    ncu = [r for r in recs if r.source == "ncu-rule"]
    # one cause, one finding: ncu's long-scoreboard CPIStall is merged into kernelscope's dominant stall, and the
    # stall explains the uncoalesced access (the specific cause) rather than competing with it: folded into it,
    # NVIDIA's estimate kept
    assert not ours(cuda.kernel("copy_strided"), "dominant-stall")
    top = [r for r in recs if r.gain_pct is not None][0]
    assert top.finding.rule == "uncoalesced-global" and "dominant-stall" in top.merged
    assert ("CPIStall", "Long Scoreboard Stalls", pytest.approx(38.597, abs=0.001), "global") in top.ncu_estimates
    assert not any(r.finding.title == "Long Scoreboard Stalls" for r in ncu)
    # ncu's drain-stall CPIStall is another cause: kept, its estimate capped at the kernel's headroom
    drain = [r for r in ncu if r.finding.title == "Drain Stalls"]
    assert drain and all(r.gain_pct <= 100 - 61.403 + 0.01 for r in drain)
    local = [r for r in ncu if r.finding.estimate_type == "local"]
    assert local and all(r.gain_pct is None and r.local_pct == r.finding.kernel_gain_pct for r in local)
    assert not any(r.finding.message.startswith("The optional metric") for r in recs)
    keys = [rank_key(r) for r in recs]
    assert keys == sorted(keys)
    gains = [r.gain_pct for r in recs if r.gain_pct is not None]
    assert gains == sorted(gains, reverse=True)
    tiers = [0 if r.gain_pct is not None else 1 if (r.local_pct is not None or r.vendor_pct is not None) else 2
             for r in recs]
    assert tiers == sorted(tiers)


def test_stall_gain_is_capped_by_the_headroom_like_ncu(cuda):
    (r,) = ours(cuda.kernel("copy_coalesced"), "dominant-stall")
    assert "long scoreboard" in r.finding.message
    assert r.gain_pct == pytest.approx(100 - 63.3103, abs=0.01)  # ncu's own estimate is 36.69% too


def test_session_ranking_weights_by_share_of_kernel_time(triton):
    ranked = [r for r in triton.ranked if r.session_gain_pct is not None]
    for r in ranked:
        share = triton.kernel(r.kernel).kernel.share_of_kernel_time
        assert r.session_gain_pct == pytest.approx(r.gain_pct * share)
    assert [r.session_gain_pct for r in ranked] == sorted((r.session_gain_pct for r in ranked), reverse=True)


def _ctx(session: Session, kernel_short: str) -> RuleContext:
    a = analyze_session(session)
    k = a.kernel(kernel_short)
    from kernelscope.analyze.occupancy import arch_for_device

    return RuleContext(k.kernel, k.counter_launch, k.bound, arch_for_device(session.device), 132, a.ceilings)


def test_spill_rule_fires_on_spill_requests_only():
    s = Session.load(TRITON)
    x = next(x for x in s.launches if x.counters and "unrolled" in x.kernel)
    assert spills.check(_ctx(s, "unrolled_elementwise_kernel")) is None  # recorded: 0 spill requests
    x.counters[SPILL_COUNTER] = Metric(4096.0, "", "ncu", SPILL_COUNTER)
    f = spills.check(_ctx(s, "unrolled_elementwise_kernel"))
    assert dict(f.evidence)[SPILL_COUNTER] == 4096.0 and f.kernel_gain_pct > 0
    del x.counters[SPILL_COUNTER]
    assert isinstance(spills.check(_ctx(s, "unrolled_elementwise_kernel")), NotEvaluated)


def test_occupancy_rule_names_the_register_limit_and_what_lifts_it():
    s = Session.load(TRITON)
    for x in s.launches:  # as if the elementwise kernel needed 128 registers per thread
        if "unrolled_elementwise" in x.kernel:
            m = x.metrics["registers_per_thread"]
            x.metrics["registers_per_thread"] = Metric(128, m.unit, m.source, m.raw_name)
    ctx = _ctx(s, "unrolled_elementwise_kernel")
    f = occupancy_limit.check(ctx)
    assert "limited by registers" in f.message and "at most" in f.message and "registers per thread" in f.message
    assert dict(f.evidence)["theoretical occupancy % (kernelscope occupancy calculator)"] == 25.0
    assert 0 < f.kernel_gain_pct <= 100 - 47.8624  # never more than the headroom to the busiest unit


def test_rules_without_counters_say_why():
    a = analyze_session(Session.load(DATA / "session_h100_mixed.json.gz"))
    k = a.kernels[0]
    reasons = {n.rule: n.reason for n in k.recommendations.not_evaluated}
    assert "kernelscope run --counters" in reasons["uncoalesced-global"]
    assert len(RULES) == len(reasons) + k.recommendations.rules_run


@pytest.mark.parametrize("kernel", ["copy_strided", "transpose_smem"])
def test_summary_snapshot_cuda_kernels(cuda, kernel):
    assert_snapshot(f"summary_cuda_{kernel}.w120.txt", draw(SummaryPanel(cuda.kernel(kernel))))


def test_summary_snapshot_without_counters():
    a = analyze_session(Session.load(DATA / "session_h100_mixed.json.gz"))
    text = draw(SummaryPanel(a.kernels[0]))
    assert "N/A (no counters)" in text and "Excellent" not in text
    assert_snapshot("summary_mixed_no_counters.w120.txt", text)


def test_memory_bound_far_from_the_bandwidth_ceiling_when_dram_is_the_busiest_level():
    from kernelscope.analyze.roofline import Ceilings

    s = Session.load(CUDA)
    x = next(x for x in s.launches if x.kernel.startswith("copy_coalesced"))
    m = x.metrics["l2_throughput_pct"]  # recorded 69.0%; lowered so that DRAM (63.3%) is the busiest level
    x.metrics["l2_throughput_pct"] = Metric(50.0, m.unit, m.source, m.raw_name)
    k = analyze_session(s).kernel("copy_coalesced")
    assert k.bound.limiter == "DRAM"
    (r,) = ours(k, "far-from-bandwidth")
    assert r.gain_pct == pytest.approx(100 - 63.3103, abs=0.01) and "ncu's DRAM peak" in r.finding.message
    measured = Ceilings.from_metrics({"copy_bandwidth_bytes_per_s": Metric(3.5e12, "byte/s", "derived", "test",
                                                                           formula="test value")}, "test values")
    (r2,) = ours(analyze_session(s, measured).kernel("copy_coalesced"), "far-from-bandwidth")
    rate = x.metrics["dram_bytes"].value / (x.metrics["duration_ns"].value * 1e-9)
    assert r2.gain_pct == pytest.approx(100 - 100 * rate / 3.5e12, abs=0.01)
    assert "measured copy bandwidth" in r2.finding.message


def test_a_kernel_no_rule_could_run_on_says_so():
    text = shown(RANKS, "--width", "160", "--kernel", "AllReduce")
    assert "0 kernelscope rules" not in text and "looked" not in text
    assert ("Recommendations: none: no kernelscope kernel rule could run on this kernel's data (the reasons are "
            "below).") in text
    demo = shown(DEMO, "--width", "160")
    assert "none: the 5 kernelscope kernel rules that could run on the data collected found nothing." in demo
