"""The one rule type and its registry (analyze/rule.py): a rule registered in one place runs, and its declared
relations order the verdict."""
from __future__ import annotations

import pytest

from conftest import DATA
from kernelscope.analyze import breakdown as bd
from kernelscope.analyze.program_rules import program_rule
from kernelscope.analyze.report import build_report
from kernelscope.analyze.rule import (KERNEL, PROGRAM, REGISTRY, Finding, explained, prerequisites, replaced_by,
                                      rule_by_id)
from kernelscope.model import Session

SYNC = DATA / "diagnosis" / "programs" / "sync_item_train_defect.json.gz"


@pytest.fixture
def registered():
    before = list(REGISTRY[PROGRAM])
    yield
    REGISTRY[PROGRAM][:] = before


def test_a_program_rule_registered_with_the_decorator_runs_and_its_needs_order_it(registered):
    @program_rule("test-big", "a planted finding", "nothing: a test", needs=("sync-in-loop",))
    def big(ctx):
        b = ctx.breakdown.ranks[0]
        return [Finding("test-big", bd.KERNELS, "a planted finding", "planted", 90.0, "planted", (("x", 1),),
                               "nothing", None, b.rank)]

    assert rule_by_id("test-big") is big and big.scope == PROGRAM
    assert prerequisites()["test-big"] == ("sync-in-loop",)
    rules = [f.rule for f in build_report(Session.load(SYNC)).verdict.findings]
    assert rules.index("test-big") == rules.index("sync-in-loop") + 1  # 90% of wall, yet after the sync it needs


def test_a_rule_is_registered_once(registered):
    with pytest.raises(ValueError, match="registered twice"):
        program_rule("sync-in-loop", "again", "nothing")(lambda ctx: [])


def test_relations_are_declared_by_the_rules():
    assert prerequisites()["launch-bound"] == ("sync-in-loop", "sync-at-op", "optimizer-per-tensor")
    assert prerequisites()["unfused-elementwise"] == ("unfused-norm", "unfused-attention")
    assert replaced_by() == {"sync-in-loop": {"sync-at-op"}}
    assert explained() == {"dominant-stall"}


def test_program_kernel_and_nvidia_findings_are_one_finding_type():
    """Program rules, kernel rules, NVIDIA's imported rule results and the verdict's ranked list: one Finding."""
    program = build_report(Session.load(SYNC))
    assert {f.scope for f in program.verdict.findings} >= {PROGRAM}
    assert all(type(f) is Finding for f in program.verdict.findings)
    counters = build_report(Session.load(DATA / "session_h100_counters.json.gz"))
    recs = [r for k in counters.kernels for r in k.analysis.recommendations.recommendations]
    assert {r.source for r in recs} == {"kernelscope", "ncu-rule"}
    assert all(type(r.finding) is Finding and r.finding.scope == KERNEL for r in recs)
    assert all(type(f) is Finding for f in counters.verdict.findings)
