"""Every panel of every recorded session at 80, 100, 120 and 160 columns: no number or word is cut, no number
is folded across two lines, no line is wider than the terminal (tests/narrow_check.py watches Rich while it
draws). The sessions are every file under tests/data that kernelscope.load accepts, each drawn with every kernel's
panels, the timeline, GPU stats, memory and, for a multi-rank session, the Ranks and Collectives panels with every
collective; the H100 sessions with the ceilings measured on that H100, so the roofline panels are drawn too."""
from __future__ import annotations

import io

import pytest

from conftest import DATA, ROOT, recorded_session_files
from kernelscope.analyze.report import build_report
from kernelscope.analyze.roofline import Ceilings
from kernelscope.collect.calibrate.ceilings import load_calibration
from kernelscope.model import Session
from kernelscope.render.console import make_console
from kernelscope.render.text import display_copy
from kernelscope.render.show import ShowView
from narrow_check import text_problems, watch_rich

pytestmark = pytest.mark.slow

WIDTHS = (80, 100, 120, 160)
CEILINGS = DATA / "ceilings_h100.json"  # measured by kernelscope calibrate on the H100 the sessions ran on
DIAGNOSIS_CEILINGS = DATA / "diagnosis" / "ceilings.json"  # ... and on the one the defect suite ran on
SHIPPED = ROOT / "src" / "kernelscope" / "data"  # the sessions `demo` and `learn` show without a GPU


SESSIONS = recorded_session_files(DATA, SHIPPED)


def _name(path) -> str:
    return str(path.relative_to(ROOT))


def test_every_recorded_session_is_drawn() -> None:
    names = {_name(p) for p in SESSIONS}
    assert len(names) >= 42, sorted(names)
    assert {"tests/data/ranks/session_h200x2_run_torchrun.json.gz", "tests/data/memory/steps50-52_memory.json.gz",
            "src/kernelscope/data/marlin_session_h100.json.gz"} <= names, sorted(names)


def _ceilings(path, session: Session):
    if session.device is None or "H100" not in session.device.name:
        return None
    c = DIAGNOSIS_CEILINGS if path.parent.name == "diagnosis" else CEILINGS
    return Ceilings.from_metrics(load_calibration(c).ceilings, _name(c))


@pytest.mark.parametrize("path", SESSIONS, ids=[_name(p) for p in SESSIONS])
def test_every_panel_cuts_no_number(path) -> None:
    session = display_copy(Session.load(path))
    report = build_report(session, top=None, ceilings=_ceilings(path, session))
    view = ShowView(report, table_limit=len(report.summary.kernels), timeline_limit=200, collectives_limit=None)
    problems = []
    for width in WIDTHS:
        buf = io.StringIO()
        with watch_rich() as w:
            make_console(width=width, file=buf, color=False).print(view)
        problems += [f"{width} cols: {p}" for p in w.cuts + w.splits + text_problems(buf.getvalue(), width)]
    assert not problems, f"{len(problems)} problems:\n" + "\n".join(problems[:30])
