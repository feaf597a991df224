"""Session model: round-trips, invariants, and one-sentence errors for bad files."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from kernelscope.model import SCHEMA_VERSION, CollectorStatus, Device, Launch, Metric, Session, SessionFileError

DATA = Path(__file__).parent / "data"


def _session() -> Session:
    dev = Device(0, "NVIDIA H100 80GB HBM3", (9, 0), {
        "sm_count": Metric(132, "SM", "device-spec", "CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT")})
    launch = Launch("k", (2, 66, 1), (384, 1, 1), 10, 179458, stream=7, regions=["gemm"], metrics={
        "registers_per_thread": Metric(168, "register/thread", "cupti", "registers per thread"),
        "achieved_occupancy_pct": Metric.missing("sm__warps_active.avg.pct_of_peak_sustained_active",
                                                 "needs the counter pass (ncu)", "ncu", "%"),
    })
    return Session(command=["python", "x.py"], created_utc="2026-11-22T00:00:00+00:00", exit_code=0,
                   device=dev, launches=[launch], collectors={"trace": CollectorStatus("ok")})


@pytest.mark.parametrize("name", ["s.json", "s.json.gz"])
def test_save_load_round_trip(tmp_path, name):
    s = _session()
    p = s.save(tmp_path / name)
    back = Session.load(p)
    assert back.to_dict() == s.to_dict()
    assert back.launches[0].metrics["achieved_occupancy_pct"].is_missing
    assert back.launches[0].blocks == 132 and back.launches[0].threads_per_block == 384
    assert (gzip.open(p).read(1) if name.endswith(".gz") else p.read_bytes()[:1]) == b"{"  # JSON, gzipped by name


def test_missing_value_needs_reason_and_derived_needs_formula():
    with pytest.raises(ValueError, match="no value and no reason"):
        Metric(None, "%", "ncu", "x")
    with pytest.raises(ValueError, match="formula"):
        Metric(1.0, "", "derived", "x")
    with pytest.raises(ValueError, match="unknown metric source"):
        Metric(1, "", "datasheet", "x")


def _one_sentence(e: SessionFileError) -> str:
    msg = str(e)
    assert "\n" not in msg and msg.endswith(".")
    return msg


def test_damaged_json(tmp_path):
    p = tmp_path / "s.json"
    p.write_text(json.dumps(_session().to_dict())[:-40])
    with pytest.raises(SessionFileError) as e:
        Session.load(p)
    assert "damaged" in _one_sentence(e.value)


def test_truncated_gzip(tmp_path):
    p = _session().save(tmp_path / "s.json.gz")
    p.write_bytes(p.read_bytes()[:30])
    with pytest.raises(SessionFileError) as e:
        Session.load(p)
    assert "damaged" in _one_sentence(e.value)


def test_other_schema_version(tmp_path):
    d = _session().to_dict()
    d["schema_version"] = SCHEMA_VERSION + 1
    p = tmp_path / "s.json"
    p.write_text(json.dumps(d))
    with pytest.raises(SessionFileError) as e:
        Session.load(p)
    assert f"version {SCHEMA_VERSION + 1}" in _one_sentence(e.value)


def test_json_that_is_not_a_session(tmp_path):
    p = tmp_path / "s.json"
    p.write_text('{"traceEvents": []}')
    with pytest.raises(SessionFileError) as e:
        Session.load(p)
    assert "not a kernelscope session" in _one_sentence(e.value)


def test_a_damaged_launch_shape_is_skipped_with_its_launches_and_named_by_its_field_path(tmp_path):
    d = _session().to_dict()
    assert d["schema_version"] == SCHEMA_VERSION == 2 and "launches" not in d  # the one writer: columns
    d["launch_shapes"][0]["grid"] = [1, 2]
    p = tmp_path / "s.json"
    p.write_text(json.dumps(d))
    s = Session.load(p)
    assert s.launches == []
    assert s.skipped_on_load == ["skipped launch_shapes[0] and its launches (launch_shapes[0].grid: expected three "
                                 "dimensions [x, y, z], found a list of 2 items)",
                                 "skipped launches[0] (launch_shapes[0] was skipped)"]


def test_a_schema_1_file_loads_as_the_same_session_and_its_damaged_launch_is_named(tmp_path):
    """Schema 1 (one object per launch, files of kernelscope < 2) is read into the same Session that its
    schema-2 file gives back; a damaged launch is skipped and named by its field path."""
    doc = json.loads(gzip.decompress((DATA / "session_h100_mixed.json.gz").read_bytes()))
    assert doc["schema_version"] == 1
    old = Session.from_dict(doc)
    again = Session.load(old.save(tmp_path / "s2.json"))
    assert again.to_dict() == old.to_dict() and len(again.launches) == len(doc["launches"]) > 1
    doc["launches"][0]["grid"] = [1, 2]
    p = tmp_path / "s1.json"
    p.write_text(json.dumps(doc))
    s = Session.load(p)
    assert len(s.launches) == len(doc["launches"]) - 1
    assert s.skipped_on_load == ["skipped launches[0] (launches[0].grid: expected three dimensions [x, y, z], "
                                 "found a list of 2 items)"]


def test_a_damaged_field_the_session_needs_refuses_the_file_naming_the_field(tmp_path):
    d = _session().to_dict()
    d["command"] = "python x.py"
    p = tmp_path / "s.json"
    p.write_text(json.dumps(d))
    with pytest.raises(SessionFileError) as e:
        Session.load(p)
    msg = _one_sentence(e.value)
    assert "damaged" in msg and "command: expected a list, found the string 'python x.py'" in msg


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(SessionFileError, match="no such session file"):
        Session.load(tmp_path / "nope.json")
    with pytest.raises(SessionFileError, match="directory"):
        Session.load(tmp_path)


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path):
    s = _session()
    s.save(tmp_path / "s.json")
    s.save(tmp_path / "s.json")
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]


def test_the_session_file_format_lives_in_one_module():
    """Only model/session_file.py names the file format or parses its launch columns; Session delegates to it."""
    src = Path(__file__).parent.parent / "src" / "kernelscope"
    naming = sorted(str(p.relative_to(src)) for p in src.rglob("*.py")
                    if any(word in p.read_text() for word in ('"kernelscope-session"', '"launch_columns"')))
    assert naming == ["model/session_file.py"]
    assert Session.from_dict(_session().to_dict()).to_dict() == _session().to_dict()
