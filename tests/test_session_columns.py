"""Session schema 2 (launches as shapes and columns): compact, lossless, and checked like schema 1."""
from __future__ import annotations

import copy
import io
import json

import pytest

from conftest import DATA
from kernelscope.model import Launch, Metric, Session
from kernelscope.model.launch_table import LaunchTable
from kernelscope.analyze.report import build_report
from kernelscope.render.show import ShowView, make_console
from kernelscope.render.text import display_copy

FIXTURES = sorted(DATA.glob("**/*.json.gz"))
FIXTURES = [p for p in FIXTURES if p.name.startswith(("session_", "counters_")) or p.parent.name == "diagnosis"]
MIXED = DATA / "session_h100_mixed.json.gz"


def _repeated(n: int) -> Session:
    """The mixed session's launches repeated until there are n, each step later than the last."""
    s = Session.load(MIXED)
    timed = [x for x in s.launches if x.start_ns is not None]
    span = max(x.start_ns + x.duration_ns for x in timed) + 1000
    out = []
    for i in range(n):
        x = copy.copy(timed[i % len(timed)])
        step = i // len(timed)
        x.start_ns += step * span
        x.duration_ns += step % 7  # durations differ between steps, as measured ones do
        x.correlation_id = i
        x.metrics = dict(x.metrics, queued_ns=Metric(step % 5, "ns", "cupti", "queued"))  # varies per launch
        out.append(x)
    s.launches = out
    return s


@pytest.mark.parametrize("path", FIXTURES, ids=[p.name for p in FIXTURES])
def test_every_fixture_round_trips_through_schema_2(tmp_path, path):
    old = Session.load(path)
    saved = old.save(tmp_path / "s.json")
    assert json.loads(saved.read_text())["schema_version"] == 2
    back = Session.load(saved)
    assert back.skipped_on_load == []
    assert back.to_dict() == old.to_dict()


def test_ten_thousand_launches_fit_in_150_bytes_each_and_round_trip(tmp_path):
    s = _repeated(10_000)
    path = s.save(tmp_path / "s.json")  # plain JSON, as `run` writes by default
    per_launch = path.stat().st_size / 10_000
    assert per_launch <= 150, per_launch
    back = Session.load(path)
    table = back.launch_table()
    assert len(table.shapes) < 100 and "queued_ns" in table.metric_values  # shared per shape, queued per launch
    assert back.to_dict() == s.to_dict()


def test_show_draws_the_same_from_schema_2_as_from_schema_1(tmp_path):
    def render(session: Session) -> str:
        buf = io.StringIO()
        make_console(width=120, file=buf, color=False).print(ShowView(
            build_report(display_copy(session), None, 3), timeline_limit=40))
        return buf.getvalue()

    for path in (MIXED, DATA / "session_h100_counters.json.gz", DATA / "session_h100_instrumented.json.gz"):
        old = Session.load(path)
        new = Session.load(old.save(tmp_path / path.name))
        assert render(new) == render(old), path.name


def _saved_doc(tmp_path) -> tuple[dict, int]:
    s = _repeated(50)
    doc = json.loads(s.save(tmp_path / "s.json").read_text())
    return doc, len(s.launches)


def test_a_damaged_launch_row_is_skipped_and_named(tmp_path):
    doc, n = _saved_doc(tmp_path)
    doc["launch_columns"]["duration_ns"][3] = -1
    doc["launch_columns"]["start_ns"][7] = "soon"
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    s = Session.load(p)
    assert len(s.launches) == n - 2
    assert s.skipped_on_load == [
        "skipped launches[3] (launch_columns.duration_ns[3]: expected an integer >= 0, found the number -1)",
        "skipped launches[7] (launch_columns.start_ns[7]: expected an integer or null, found the string 'soon')"]
    good = Session.load(_repeated(50).save(tmp_path / "good.json"))
    assert [x.correlation_id for x in s.launches] == [x.correlation_id for x in good.launches if
                                                      x.correlation_id not in (3, 7)]


def test_a_damaged_shape_drops_its_launches_and_says_so(tmp_path):
    doc, n = _saved_doc(tmp_path)
    doc["launch_shapes"][0]["grid"] = [1, 2]
    uses = doc["launch_columns"]["shape"].count(0)
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    s = Session.load(p)
    assert len(s.launches) == n - uses
    assert s.skipped_on_load[0] == ("skipped launch_shapes[0] and its launches (launch_shapes[0].grid: expected "
                                    "three dimensions [x, y, z], found a list of 2 items)")
    assert len(s.skipped_on_load) == 1 + uses


def test_columns_of_different_lengths_refuse_the_file(tmp_path):
    doc, n = _saved_doc(tmp_path)
    doc["launch_columns"]["duration_ns"].pop()
    p = tmp_path / "bad.json"
    p.write_text(json.dumps(doc))
    with pytest.raises(Exception, match=r"launch_columns.duration_ns: expected one entry per launch \(50\)"):
        Session.load(p)


def test_table_rebuilds_launches_exactly():
    launches = [Launch("k", (2, 1, 1), (128, 1, 1), 10 * i, 5 + i, stream=7, correlation_id=i, regions=["r"],
                       metrics={"registers_per_thread": Metric(32, "register/thread", "cupti", "registers per thread"),
                                "queued_ns": Metric(i % 3, "ns", "cupti", "queued")}) for i in range(6)]
    launches.append(Launch("k", (2, 1, 1), (128, 1, 1), None, 9, metrics={
        "queued_ns": Metric.missing("queued", "not in this trace", "cupti", "ns")}))
    t = LaunchTable.from_launches(launches)
    assert len(t.shapes) == 2 and set(t.shapes[0].varying) == {"queued_ns"}
    assert [t.launch(i) for i in range(len(t))] == launches
