"""The session's findings never contradict each other (issue 48): the verdict and the kernels' notes class every GPU
gap the same way (a gap after a synchronize, explicit or implicit, is a sync wait whatever its length); library
kernels get advice their user controls; a session too short to judge says so. Held on sessions recorded on an H100
(tests/data/diagnosis: the kernel suite and whole programs)."""
from __future__ import annotations

import pytest

from conftest import DATA
from kernelscope.analyze import breakdown as bd
from kernelscope.analyze.host_syncs import sync_waits_by_kernel
from kernelscope.analyze.report import build_report
from kernelscope.model import Session

DIAG = DATA / "diagnosis"
PROGRAMS = DIAG / "programs"


def _report(path):
    return build_report(Session.load(path))


def _rules(recs) -> set[str]:
    return {r.finding.rule_id for r in recs.recommendations}


@pytest.fixture(scope="module")
def host_gaps():
    """The kernel suite's host_gaps case: a cudaDeviceSynchronize after each of 60 timed launches, each begun after the
    kernel had finished (the GPU was already idle: the call did not wait)."""
    return _report(DIAG / "host_gaps_defect.json.gz")


def test_a_gap_after_a_synchronize_that_did_not_wait_is_still_a_sync_wait(host_gaps):
    (b,) = host_gaps.verdict.breakdown.ranks
    k = host_gaps.analysis.kernels[0]
    # the 59 gaps between the window's launches each follow a synchronize: none is launch overhead
    assert b.count(bd.AFTER_SYNC) >= 59 and b.count(bd.LAUNCHING) == 0
    rules = [f.rule for f in host_gaps.verdict.findings]
    assert rules[0] == "sync-in-loop" and "launch-bound" not in rules
    note = next(r for r in k.recommendations.recommendations if r.finding.rule_id == "host-gaps")
    assert "synchronize" in note.finding.message


@pytest.mark.parametrize("name", ["holdout_sync_cpu_print_defect", "sync_item_train_defect", "host_gaps_defect"])
def test_kernel_notes_and_the_breakdown_match_the_same_synchronize_calls_to_the_same_gaps(name):
    """Every launch in the window that a kernel's note counts as following a synchronize sits after a gap the
    breakdown classes "after host syncs", and the other way round."""
    path = (PROGRAMS if (PROGRAMS / f"{name}.json.gz").exists() else DIAG) / f"{name}.json.gz"
    s = Session.load(path)
    r = build_report(s)
    (b,) = r.verdict.breakdown.ranks
    _, gaps = bd.breakdown(s)
    waits = sync_waits_by_kernel(s, r.analysis.timeline)
    seen: dict[str, int] = {}
    noted, kind_at = set(), {}
    for row in r.analysis.timeline.rows:
        if row.kind == "region" or not row.gap_before_ns:
            if row.kind == "kernel" and row.gap_before_ns is not None:
                seen[row.name] = seen.get(row.name, 0) + 1
            continue
        g0 = row.start_ns - row.gap_before_ns
        kind_at[g0] = row.kind
        if row.kind == "kernel":
            i = seen.get(row.name, 0)
            seen[row.name] = i + 1
            if waits[row.name][i] > 0 and b.window_start_ns < g0 < b.window_end_ns:
                noted.add(g0)
    classed = {g.start_ns for g in gaps[0] if g.category == bd.AFTER_SYNC and kind_at.get(g.start_ns) == "kernel"
               and b.window_start_ns < g.start_ns}
    assert noted and noted == classed


def test_launch_bound_notes_of_a_loop_that_synchronizes_say_to_remove_the_syncs_first():
    """holdout_sync_nonzero: a data-dependent shape (nonzero) syncs each image; kernels that are launch-bound in the
    same loop must not be told to go to a CUDA graph without removing the synchronizations, as the verdict says."""
    r = _report(PROGRAMS / "holdout_sync_nonzero_defect.json.gz")
    rules = [f.rule for f in r.verdict.findings]
    assert rules.index("sync-in-loop") < rules.index("launch-bound")
    told = 0
    for k in r.analysis.kernels:
        for rec in k.recommendations.recommendations:
            ev = dict(rec.finding.evidence)
            if rec.finding.rule_id == "launch-bound" and ev.get(
                    "launches after a synchronize call (trace pass: CUDA runtime calls)"):
                assert "remove those synchronizations first" in rec.finding.message
                told += 1
    assert told
