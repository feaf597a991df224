"""Launches with many phase scope ids (kernelscope.cuh records ids 0..1,023): every view draws, naming the
busiest phases and counting the rest; overlaps are measured between the busiest only."""
from __future__ import annotations

import io
import json

import pytest

from conftest import DATA
from kernelscope.analyze.phases import OVERLAP_PHASES, scoped_view, summarize_phases
from kernelscope.cli import main
from kernelscope.collect.instrument.cuda_scopes import MAX_SCOPE_ID
from kernelscope.model import Launch, PhaseScopes, Session, WarpScopes
from kernelscope.render.kernel_phases import KernelPhasesPanel
from kernelscope.render.show import make_console
from kernelscope.render.warp_execution import WarpExecutionPanel, phase_letters

PHASES_DRAWN = OVERLAP_PHASES  # the busiest phases the panels name


def scopes(n_ids: int, warps: int = 8, per_warp: int | None = None) -> PhaseScopes:
    """Each warp runs ``per_warp`` (default: twice the ids) back-to-back scopes cycling through the ids; phase 0
    runs longest."""
    per_warp = 2 * n_ids if per_warp is None else per_warp
    out = []
    for w in range(warps):
        ids = [(w + k) % n_ids for k in range(per_warp)]
        starts, ends, t = [], [], 0
        for sc in ids:
            starts.append(t)
            t += 50 if sc == 0 else 8
            ends.append(t)
            t += 2
        out.append(WarpScopes(block_id=w // 4, warp=w % 4, smid=w, scope=ids, start_ns=starts, end_ns=ends,
                              block_offset_ns=w // 4))
    return PhaseScopes(names=[f"stage {k}" for k in range(n_ids)], warps=out, source="kernelscope.cuh")


def render(renderable, width: int = 120) -> str:
    buf = io.StringIO()
    make_console(width=width, file=buf, color=False).print(renderable)
    return buf.getvalue()


def test_phase_letters_never_run_out():
    marks = phase_letters([f"s{k}" for k in range(200)])
    named = marks.index("+")
    assert len(marks) == 200 and len(set(marks[:named])) == named >= 36 and set(marks[named:]) == {"+"}


@pytest.mark.parametrize("n_ids", [43, 100])
def test_panels_draw_more_than_42_phases_naming_the_busiest(n_ids):
    x = Launch("k", (2, 1, 1), (128, 1, 1), 1_000, 100_000, scopes=scopes(n_ids))
    view = scoped_view(x)
    phases = render(KernelPhasesPanel(view, "k"))
    warps = render(WarpExecutionPanel(view, "k"))
    assert f"{n_ids - PHASES_DRAWN:,} more phases" in phases and "stage 0" in phases
    assert f"+={n_ids - PHASES_DRAWN:,} other phases" in warps
    assert sum(1 for line in phases.splitlines() if " stage " in line) <= 2 * PHASES_DRAWN  # two table halves


def test_overlaps_are_measured_between_the_busiest_phases_only():
    v = summarize_phases(scopes(MAX_SCOPE_ID + 1, warps=4, per_warp=MAX_SCOPE_ID + 1))
    assert len(v.phases) == MAX_SCOPE_ID + 1 and v.overlap_phases == OVERLAP_PHASES
    assert max(v.phases, key=lambda p: p.total).name == "stage 0"


@pytest.mark.slow
def test_a_session_with_1024_scope_ids_shows_reports_and_writes_json(tmp_path, capsys):
    """1,024 phase ids, 64 warps of 1,024 scopes: show --json took 37 s and show failed with StopIteration
    before; about 4 s each now on the 2-core dev box, 45 MB peak."""
    s = Session.load(DATA / "cuda_scopes" / "session_h100_pipeline.json.gz")
    t = s.launch_table()
    i, _ = next(iter(t.detailed(having="scopes")))
    t.details[i].scopes = scopes(MAX_SCOPE_ID + 1, warps=64, per_warp=MAX_SCOPE_ID + 1)
    t._detailed.clear()
    s.set_launch_table(t)
    path = tmp_path / "s.json"
    s.save(path)
    assert main(["show", str(path)]) == 0
    assert "1,008 more phases" in capsys.readouterr().out
    assert main(["show", "--json", str(path)]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "pipeline_serial" in json.dumps(doc)  # it analyses the phases (build_report); it does not list them
    assert main(["report", str(path), "-o", str(tmp_path / "r.html")]) == 0
    assert "1,008 more phases" in (tmp_path / "r.html").read_text()
