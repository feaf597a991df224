"""analyze.report.build_report: the one place a session is summarised, kernels selected and every
analysis run; renderers take its Report. Checked on sessions recorded on an H100."""
from __future__ import annotations

import dataclasses
import json

import pytest

from conftest import DATA, run_cli
from kernelscope.analyze.analysis import analyze_session
from kernelscope.analyze.counters import counter_launches, memory_hierarchy
from kernelscope.analyze.kernel_table import summarize
from kernelscope.analyze.phases import summarize_phases, warp_idle
from kernelscope.analyze.report import Report, ReportError, build_report
from kernelscope.analyze.roofline import Ceilings
from kernelscope.collect.calibrate.lookup import ceilings_for_session
from kernelscope.model import Session
from kernelscope.render.renderers import RENDERERS, get_renderer
from kernelscope.render.text import display_copy


def load(name: str) -> Session:
    return Session.load(DATA / name)


def test_selection_is_the_top_kernels_by_time_in_table_order():
    s = load("session_h100_mixed.json.gz")
    r = build_report(s, top=3)
    table = summarize(s).kernels
    assert [k.summary.name for k in r.kernels] == [k.name for k in table[:3]]
    assert len(build_report(s, top=0).kernels) == 0
    assert [k.summary.name for k in build_report(s, top=None).kernels] == [k.name for k in table]
    # the analysis always covers every kernel, whatever the selection
    assert len(r.analysis.kernels) == len(table) == len(r.summary.kernels)


def test_a_regex_selects_every_match_whatever_top():
    s = load("session_h100_mixed.json.gz")
    names = [k.name for k in summarize(s).kernels]
    r = build_report(s, kernel_regex="gemm|matmul", top=1)
    assert r.kernels and all("gemm" in k.summary.name or "matmul" in k.summary.name
                             or "gemm" in k.summary.short_name or "matmul" in k.summary.short_name
                             for k in r.kernels)
    assert [k.summary.name for k in r.kernels] == [n for n in names if n in {k.summary.name for k in r.kernels}]


def test_bad_selections_raise_one_sentence():
    s = load("session_h100_mixed.json.gz")
    with pytest.raises(ReportError, match=r"^--kernel '\(' is not a valid regular expression \(") as e:
        build_report(s, kernel_regex="(")
    assert isinstance(e.value, ValueError)
    n = len(summarize(s).kernels)
    with pytest.raises(ReportError) as e:
        build_report(s, kernel_regex="^no_such_kernel$")
    assert str(e.value) == f"no kernel matches --kernel '^no_such_kernel$'; {n} kernels are in the session"


def test_the_cli_prints_the_reports_error_texts():
    path = str(DATA / "session_h100_mixed.json.gz")
    r = run_cli("show", path, "--kernel", "(")
    assert r.returncode == 2 and "is not a valid regular expression" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("show", path, "--kernel", "^no_such_kernel$", "--json")
    assert r.returncode == 2 and "no kernel matches --kernel '^no_such_kernel$'" in r.stderr


def test_panels_get_precomputed_data_counters():
    s = load("session_h100_counters.json.gz")
    r = build_report(s, top=None)
    measured = [k for k in r.kernels if k.counter_launches]
    assert measured, "the recorded session has counter-pass launches"
    for k in r.kernels:
        assert list(k.counter_launches) == counter_launches(s, k.summary.name)
        assert (k.counters is None) == (not k.counter_launches)
    k = measured[0]
    assert k.counters.launch is k.counter_launches[0] and k.counters.profiled == len(k.counter_launches)
    assert k.counters.memory == memory_hierarchy(k.counter_launches[0])
    assert k.analysis is r.analysis.kernel(k.summary.name)


def test_panels_get_precomputed_data_scopes_and_layout():
    s = load("session_h100_proton.json.gz")
    r = build_report(s, top=None)
    scoped = [k for k in r.kernels if k.scoped_launch is not None]
    assert scoped, "the recorded session has Proton scopes"
    k = scoped[0]
    x = k.scoped_launch
    assert k.scoped.launch is x and k.scoped.phases == summarize_phases(x.scopes, x)
    assert k.scoped.warp_idle == tuple(warp_idle(w) for w in x.scopes.warps)
    inst = build_report(load("session_h100_instrumented.json.gz"), top=None)
    m = [k for k in inst.kernels if k.sm_layout.measured is not None]
    assert m and all(k.sm_layout.computed is None for k in m)
    assert m[0].sm_layout.measured.recorded_blocks > 0
    c = [k for k in r.kernels if k.sm_layout.measured is None]
    assert c and all(k.sm_layout.computed is not None for k in c)


def test_gpu_stats_only_with_samples_and_ceilings_carried():
    with_samples = build_report(load("session_h100_samples.json.gz"))
    assert with_samples.gpu_stats is not None and with_samples.gpu_stats.samples > 0
    assert build_report(load("session_h100_mixed.json.gz")).gpu_stats is None
    ceil = Ceilings.none("a reason given by the test")
    r = build_report(load("session_h100_mixed.json.gz"), ceilings=ceil)
    assert r.ceilings.missing_reason == "a reason given by the test"
    assert r.analysis == analyze_session(load("session_h100_mixed.json.gz"), ceil)


def test_report_is_plain_frozen_data():
    r = build_report(load("session_h100_proton.json.gz"))
    assert isinstance(r, Report) and dataclasses.is_dataclass(r)
    with pytest.raises(dataclasses.FrozenInstanceError):
        r.kernels = ()  # type: ignore[misc]


def test_renderers_are_chosen_by_name_and_take_the_report(tmp_path):
    assert set(RENDERERS) == {"terminal", "json", "chrome", "roofline-png", "html"}
    with pytest.raises(ValueError, match="no renderer 'pdf'"):
        get_renderer("pdf")
    s = load("session_h100_proton.json.gz")
    js = get_renderer("json")
    doc = json.loads(js.render(build_report(s, None, None)))
    assert doc["schema"] == "kernelscope-show/1" and len(doc["kernels"]) == len(summarize(s).kernels)
    term = get_renderer("terminal", width=100, color=False)
    text = term.render(build_report(display_copy(s), None, 1))
    assert "Block → SM layout" in text and max(len(line) for line in text.splitlines()) <= 100
    trace = json.loads(get_renderer("chrome").render(build_report(s, None, 0)))
    assert any(e["ph"] == "X" for e in trace["traceEvents"])


def test_show_json_is_byte_identical_through_the_report():
    """show --json from the CLI equals the json renderer on a report of the same session (the road is one)."""
    path = DATA / "session_h100_counters.json.gz"
    r = run_cli("show", str(path), "--json", "--timeline", "5")
    assert r.returncode == 0, r.stderr
    s = Session.load(path)
    js = get_renderer("json", timeline_limit=5)
    assert r.stdout == js.render(build_report(s, None, None, ceilings_for_session(s)))
