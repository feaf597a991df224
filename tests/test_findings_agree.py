"""The session's findings never contradict each other (issue 48): the verdict and the kernels' notes class every GPU
gap the same way (a gap after a synchronize, explicit or implicit, is a sync wait whatever its length); library
kernels get advice their user controls; a session too short to judge says so. Held on sessions recorded on an H100
(tests/data/diagnosis: the kernel suite and whole programs)."""
from __future__ import annotations

import pytest

from conftest import DATA
from kernelscope.analyze import breakdown as bd
from kernelscope.analyze.host_syncs import sync_waits_by_kernel
from kernelscope.analyze.program_rules import PROGRAM_RULES
from kernelscope.analyze.report import build_report
from kernelscope.model import Session

DIAG = DATA / "diagnosis"
PROGRAMS = DIAG / "programs"


def _report(path):
    return build_report(Session.load(path))


def _words(text: str) -> str:
    """Terminal text as one line of words, the panels' borders left out (a sentence folds across rows)."""
    return " ".join(w for w in text.split() if w not in ("│", "┃"))


def _rules(recs) -> set[str]:
    return {r.finding.rule for r in recs.recommendations}


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
    note = next(r for r in k.recommendations.recommendations if r.finding.rule == "host-gaps")
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
            if rec.finding.rule == "launch-bound" and ev.get(
                    "launches after a synchronize call (trace pass: CUDA runtime calls)"):
                assert "remove those synchronizations first" in rec.finding.message
                told += 1
    assert told


# -- library kernels: advice the user controls -----------------------------------------------------------------------

LAUNCH_ADVICE = ("registers per thread (now", "threads (now", "bytes of shared memory per block (now",
                 "Split the work into", "split the work into more", "torch.matmul")


def _advice(k) -> list[str]:
    return [r.finding.message for r in k.recommendations.recommendations]


@pytest.mark.parametrize("name", ["programs/tc_mlp_train_defect", "programs/straggler_ddp_n2_defect",
                                  "programs/control_graphed_decode_control", "../session_h100_analysis",
                                  "../counters_h100_region", "control_sdpa_control"])
def test_library_kernels_get_no_launch_configuration_or_register_advice(name):
    """cuBLAS (nvjet, xmma gemm), CUTLASS (the SIMT sgemm of 202 registers per thread), cuDNN and FlashAttention
    kernels: no occupancy or register rule judges them (kernelscope's or NVIDIA's), and a grid finding names what
    the user controls, not the grid."""
    from kernelscope.analyze.analysis import analyze_session
    from kernelscope.analyze.libraries import LAUNCH_CONFIG_RULES, NCU_LAUNCH_CONFIG_RULES, library_of

    a = analyze_session(Session.load(DIAG / f"{name}.json.gz"))
    libs = [k for k in a.kernels if library_of(k.kernel.name) and not library_of(k.kernel.name).communication]
    assert libs
    for k in libs:
        lib = library_of(k.kernel.name)
        assert not _rules(k.recommendations) & set(LAUNCH_CONFIG_RULES + NCU_LAUNCH_CONFIG_RULES), k.kernel.name
        skipped = {n.rule: n.reason for n in k.recommendations.not_evaluated}
        assert all(f"a {lib.name} kernel" in skipped[r] for r in LAUNCH_CONFIG_RULES)
        for text in _advice(k):
            assert not any(a in text for a in LAUNCH_ADVICE), (k.kernel.name, text)
        for r in k.recommendations.recommendations:
            if r.finding.rule in ("small-grid", "tail-effect"):
                assert "what you control is the precision" in r.finding.message


def test_the_cutlass_simt_sgemm_is_named_for_its_library():
    from kernelscope.analyze.analysis import analyze_session

    a = analyze_session(Session.load(PROGRAMS / "tc_mlp_train_defect.json.gz"))
    k = next(k for k in a.kernels if "cutlass_80_simt_sgemm" in k.kernel.name)
    assert k.kernel.configs[0].config.registers_per_thread == 202
    reason = {n.rule: n.reason for n in k.recommendations.not_evaluated}["occupancy-limit"]
    assert reason.startswith("a CUTLASS kernel") and "TF32" in reason


def test_the_fma_finding_of_a_library_matmul_names_precision_not_cublas(monkeypatch):
    """The kernel suite's FP32 SIMT matmul (its recorded counters fire fma-instead-of-tensor), read as if cuBLAS had
    launched it (the counter pass recorded no cuBLAS FP32 SIMT kernel): the fix is TF32 or bf16, never "use cuBLAS
    through torch.matmul"; its own kernel keeps the advice to write tensor-core code."""
    from kernelscope.analyze import analysis
    from kernelscope.analyze.libraries import LIBRARIES

    s = Session.load(DIAG / "fma_matmul_fp32_defect.json.gz")
    own = analysis.analyze_session(s).kernels[0]
    mine = next(r for r in own.recommendations.recommendations if r.finding.rule == "fma-instead-of-tensor")
    assert "torch.matmul" in mine.finding.message
    cublas = next(lib for lib in LIBRARIES if lib.name == "cuBLAS")
    monkeypatch.setattr(analysis, "library_of", lambda name: cublas)
    k = analysis.analyze_session(s).kernels[0]
    fma = next(r for r in k.recommendations.recommendations if r.finding.rule == "fma-instead-of-tensor")
    assert "torch.matmul" not in fma.finding.message and "TF32" in fma.finding.message
    assert fma.gain_pct == mine.gain_pct  # the same measurement, another fix
    assert not _rules(k.recommendations) & {"occupancy-limit", "LaunchConfiguration", "TheoreticalOccupancy"}


# -- a session too short to judge ------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", [DIAG / "occupancy_smem_256_defect.json.gz", DIAG / "divergence_lane4_defect.json.gz",
                                  DATA / "cuda_scopes" / "session_h100_spin.json.gz"])
def test_a_session_too_short_to_judge_says_so_instead_of_program_findings(path):
    """The kernel suite's recordings (a warm-up and 3 timed launches, no steps) were called "98% the GPU starves:
    DataLoader(num_workers > 0)"; a one-launch spin kernel "launch-bound 64.5%". No program rule judges them; kernel
    findings stay."""
    r = _report(path)
    v = r.verdict
    assert v.too_short and "a loop's pattern cannot be told from a one-off" in v.too_short
    assert not [f for f in v.findings if f.scope == "program"]
    assert {n.rule for n in v.not_evaluated if n.reason == v.too_short} == {p.rule_id for p in PROGRAM_RULES}


def test_too_short_is_said_in_the_terminal_html_and_json():
    import json

    from conftest import run_cli
    from kernelscope.render.html.verdict import verdict_section

    path = DIAG / "occupancy_smem_256_defect.json.gz"
    text = " ".join(run_cli("show", str(path), "--brief", "--width", "120", "--no-color").stdout.split())
    assert "the session is too short to judge" in text and "DataLoader" not in text
    doc = json.loads(run_cli("show", str(path), "--json").stdout)["verdict"]
    assert doc["too_short"] and not [f for f in doc["findings"] if f["scope"] == "program"]
    assert "too short to judge" in str(verdict_section(_report(path).verdict))


@pytest.mark.parametrize("path", [DIAG / "host_gaps_defect.json.gz", DIAG / "launch_bound_defect.json.gz",
                                  PROGRAMS / "sync_item_train_defect.json.gz",
                                  DATA / "memory" / "steps50-52_memory.json.gz"])
def test_loops_long_enough_are_judged(path):
    v = _report(path).verdict
    assert v.too_short is None and [f for f in v.findings if f.scope == "program"]


# -- one list: the verdict's findings, shown in the kernels' panels --------------------------------------------------

def test_a_kernel_the_verdict_names_shows_that_finding_in_its_panel_html_and_notebook(tmp_path):
    """tc_mlp_train (FP32 training): the verdict's first finding is the FP32 matmuls on the FMA pipes; the top
    kernel is one of them, and its panel used to say "Recommendations: none" beside a second list of its own."""
    import html as html_lib

    import kernelscope
    from conftest import run_cli
    from kernelscope.render.html import render_html

    path = PROGRAMS / "tc_mlp_train_defect.json.gz"
    r = _report(path)
    first = r.verdict.findings[0]
    top = r.kernels[0].summary.name
    assert first.rule == "tensor-cores-unused" and top in first.kernels
    assert r.verdict.for_kernel(top)[0] == (1, first)
    text = _words(run_cli("show", str(path), "--width", "160", "--no-color").stdout)
    panel = text[text.index("Profiling summary"):]
    assert f"#1 · {first.gain_pct:.1f}% of wall · {first.title}" in panel
    assert "fix: allow TF32" in panel and "evidence: FP32 FMA matmul kernels" in panel
    assert "gain: FMA matmul time" in panel
    assert "Recommendations across the session" not in text
    page = " ".join(html_lib.unescape(render_html(r)).split())
    assert f"#1 · {first.gain_pct:.1f}% of wall · {first.title}" in page and "Recommendations across the session" \
        not in page
    cell = html_lib.unescape(kernelscope.load(path)._repr_html_())
    assert f"in the verdict: #1 {first.title}" in cell
    doc = __import__("json").loads(run_cli("show", str(path), "--json").stdout)["verdict"]
    assert top in doc["findings"][0]["kernels"]


def test_verdict_findings_show_evidence_and_formula_in_the_terminal():
    from conftest import run_cli

    path = PROGRAMS / "sync_item_train_defect.json.gz"
    v = _report(path).verdict
    text = _words(run_cli("show", str(path), "--brief", "--width", "200", "--no-color").stdout)
    for f in v.gains:
        assert f"gain: {f.gain_formula}" in text
        name, value = f.evidence[0]
        assert f"evidence: {name} = " in text


def test_a_stall_finding_names_the_stall():
    v = _report(DATA / "session_h100_analysis.json.gz").verdict
    stalls = [f for f in v.findings if f.rule == "dominant-stall"]
    assert stalls and all("'long scoreboard'" in f.title for f in stalls)


# -- one window: step times from the GPU ----------------------------------------------------------------------------

def test_step_times_come_from_the_gpu_spans_of_steps():
    """sync_item_train: the profiler recorded each step's GPU span; the median step is the median time from one
    step's first GPU activity to the next's, not the host's step spans (the host runs ahead of the GPU)."""
    import statistics

    s = Session.load(PROGRAMS / "sync_item_train_defect.json.gz")
    (b,) = bd.breakdown(s)[0].ranks
    steps = {int(r.name.split("#")[1]): r for r in s.regions if r.name.startswith("ProfilerStep#")}
    assert b.window_basis.startswith("steps 5-14") and sorted(steps) == list(range(5, 15))
    periods = [steps[n + 1].gpu_start_ns - steps[n].gpu_start_ns for n in range(5, 14)]
    periods.append(steps[14].gpu_duration_ns)  # the last step: its GPU span (no later step)
    assert b.step_basis == bd.GPU_STEPS and b.median_step_ns == int(statistics.median(periods))
    assert b.median_step_ns != int(statistics.median(r.cpu_duration_ns for r in steps.values()))
    memory = bd.breakdown(Session.load(DATA / "memory" / "steps50-52_memory.json.gz"))[0].ranks[0]
    assert memory.step_basis == bd.HOST_STEPS  # that recording kept no GPU span of its steps


def test_numbers_not_over_the_window_are_labelled_with_their_span():
    """The straggler's kernel time over the whole run sat beside its share of the window's wall time, and the
    session's kernel time beside the window, both unlabelled."""
    from conftest import run_cli

    path = PROGRAMS / "straggler_allreduce_n4_defect.json.gz"
    v = _report(path).verdict
    f = next(f for f in v.findings if f.rule == "straggler-rank")
    keys = [k for k, _ in f.evidence]
    assert "its kernel time in the window, % of wall" in keys
    assert all("over the whole run" in k for k in keys if "kernel time, ms" in k or "kernel time over" in k)
    assert any("kernel time over the whole run, ms" in k for k in keys)
    text = _words(run_cli("show", str(path), "--brief", "--width", "160", "--no-color").stdout)
    assert f"Whole run {text.split('Whole run ')[1].split(' of kernel time')[0]} of kernel time" in text
    assert text.index("Window") < text.index("where the wall time goes") < text.index("Whole run") < \
        text.index("by kernel")


def test_the_timeline_opens_on_the_window_on_the_session_clock():
    """session_h100_analysis (no steps): the verdict judges the window from the end of the first launch of the last
    repeating kernel; the timeline drew the set-up before it. It opens on the window now, on the session clock
    (the window's start in ms is the first drawn row's start or before it); --whole-run draws the run's start."""
    import re

    from conftest import run_cli

    path = DATA / "session_h100_analysis.json.gz"
    (b,) = _report(path).verdict.breakdown.ranks
    lines = run_cli("show", str(path), "--timeline", "5", "--width", "160", "--no-color").stdout.splitlines()
    text = _words("\n".join(lines))
    assert f"the verdict's window at {b.window_start_ns / 1e6:,.3f} ms" in text
    first = next(float(m.group(1).replace(",", "")) for line in lines
                 if (m := re.match(r"│\s+([\d,]+\.\d{3})\s", line)))
    assert first * 1e6 >= b.window_start_ns - 1_000
    whole = run_cli("show", str(path), "--timeline", "5", "--whole-run", "--width", "160", "--no-color").stdout
    assert "the verdict's window at" not in whole
    first_whole = next(float(m.group(1).replace(",", "")) for line in whole.splitlines()
                       if (m := re.match(r"│\s+([\d,]+\.\d{3})\s", line)))
    assert first_whole * 1e6 < b.window_start_ns
