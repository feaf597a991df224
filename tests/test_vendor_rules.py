"""NVIDIA's rule results beside kernelscope's findings (analyze/vendor_rules.py): one row per cause either side
names, with why they differ."""
from __future__ import annotations

from kernelscope.analyze.recommend import KernelRecommendations, Recommendation
from kernelscope.analyze.rule import vendor_finding
from kernelscope.analyze.rules import NotEvaluated
from kernelscope.analyze.vendor_rules import (AGREE, DIFFER, KERNELSCOPE_ONLY, NVIDIA_ONLY, compare_with_nvidia,
                                              nvidia_causes)
from kernelscope.model import Launch, VendorRuleResult


def _finding(source: str, rule_id: str, section: str = "", title: str = "", pct: float | None = None,
             kind: str | None = None) -> VendorRuleResult:
    return VendorRuleResult(source=source, rule_id=rule_id, name=rule_id, section=section, severity="optimization",
                            title=title, message="m", speedup_type=kind, speedup_pct=pct)


def _rec(f: VendorRuleResult, gain: float | None, ncu=()) -> Recommendation:
    return Recommendation("k", "k", vendor_finding(f), gain, "the rule's formula", gain, ncu_estimates=tuple(ncu))


def _launch(*findings: VendorRuleResult) -> Launch:
    x = Launch(kernel="k", grid=(1, 1, 1), block=(32, 1, 1), start_ns=None, duration_ns=1)
    x.findings = list(findings)
    return x


def test_estimates_far_apart_are_explained_with_what_each_is_a_share_of():
    ours = _rec(_finding("kernelscope", "uncoalesced-global"), 30.0,
                [("UncoalescedGlobalAccess", "", 87.0, "global")])
    (row,) = compare_with_nvidia(KernelRecommendations("k", (ours,), (), 1), _launch())
    assert row.agreement == DIFFER and "30%" in row.explanation and "87% (global)" in row.explanation
    close = _rec(_finding("kernelscope", "uncoalesced-global"), 80.0, [("UncoalescedGlobalAccess", "", 87.0, "global")])
    assert compare_with_nvidia(KernelRecommendations("k", (close,), (), 1), _launch())[0].agreement == AGREE


def test_nvidia_alone_on_a_cause_kernelscope_could_not_judge_says_what_kernelscope_lacked():
    theirs = _rec(_finding("ncu-rule", "SharedMemoryConflicts", "MemoryWorkloadAnalysis_Tables", pct=40.0,
                           kind="global"), None)
    recs = KernelRecommendations("k", (theirs,), (NotEvaluated("shared-bank-conflicts", "no wavefronts: add X"),), 1)
    (row,) = compare_with_nvidia(recs, _launch())
    assert (row.cause, row.kernelscope, row.agreement) == ("shared-bank-conflicts", "not evaluated", NVIDIA_ONLY)
    assert "could not run: no wavefronts: add X" in row.explanation


def test_kernelscope_alone_names_the_section_nvidia_needed_when_the_report_has_none_of_its_results():
    ours = _rec(_finding("kernelscope", "local-memory"), 45.0)
    (row,) = compare_with_nvidia(KernelRecommendations("k", (ours,), (), 1),
                                 _launch(_finding("ncu-rule", "TheoreticalOccupancy", "Occupancy")))
    assert row.agreement == KERNELSCOPE_ONLY and "MemoryWorkloadAnalysis_Tables" in row.explanation
    (ran,) = compare_with_nvidia(KernelRecommendations("k", (ours,), (), 1),
                                 _launch(_finding("ncu-rule", "MemoryCacheAccessPattern",
                                                  "MemoryWorkloadAnalysis_Tables", title="L2 Global Load")))
    assert "raised nothing on this cause" in ran.explanation


def test_nvidia_local_access_pattern_findings_are_local_memory_not_coalescing():
    assert "local-memory" in nvidia_causes(vendor_finding(_finding("ncu-rule", "MemoryCacheAccessPattern",
                                                                   title="L1TEX Local Load Access Pattern")))
    assert nvidia_causes(vendor_finding(_finding("ncu-rule", "MemoryCacheAccessPattern",
                                                 title="L2 Global Load Access Pattern"))) == ("uncoalesced-global",)
