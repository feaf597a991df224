"""The notebook's DataFrames read one way (issue 36 item 9): snake_case columns with the unit in the name, a share
as a percentage, one missing-value marker per column, a unit for every number column, and a rank column in
launches_df of a multi-rank session. On every recorded session that has the frame's data."""
from __future__ import annotations

import math
import re

import pytest

from conftest import DATA
import kernelscope
from kernelscope.render.frames import column_name

pytest.importorskip("pandas")

SESSIONS = ["session_h100_counters.json.gz", "session_h100_samples.json.gz", "session_h100_instrumented.json.gz",
            "ranks/session_h200x2_run_torchrun.json.gz", "memory/steps50-52_memory.json.gz"]
FRAMES = ("kernels_df", "launches_df", "counters_df", "collectives_df", "memory_df")
SNAKE = re.compile(r"[a-z][a-z0-9_]*")


@pytest.fixture(scope="module", params=SESSIONS)
def loaded(request):
    return kernelscope.load(DATA / request.param)


def test_column_names_are_snake_case_with_their_unit() -> None:
    assert column_name("SM (ncu)", "%") == "sm_ncu_pct"
    assert column_name("compute", "FLOP/s") == "compute_flop_per_s"
    assert column_name("DRAM", "byte/s") == "dram_byte_per_s"


@pytest.mark.parametrize("frame", FRAMES)
def test_frames_read_one_way(loaded, frame) -> None:
    df = getattr(loaded, frame)()
    if frame != "counters_df":  # counters_df names its columns as ncu does (dram__bytes.sum), on purpose
        assert all(SNAKE.fullmatch(c) for c in df.columns), [c for c in df.columns if not SNAKE.fullmatch(c)]
    for c in df.columns:
        values = list(df[c])
        nan = any(isinstance(v, float) and math.isnan(v) for v in values)
        assert not (nan and any(v is None for v in values)), f"{c}: None and NaN in one column"
        if df[c].dtype.kind in "iuf":
            assert c in df.attrs["units"], f"{frame}.{c} has no unit"


def test_kernel_share_is_a_percentage(loaded) -> None:
    df = loaded.kernels_df()
    assert "share_of_kernel_time" not in df.columns
    assert df["share_of_kernel_time_pct"].sum() == pytest.approx(100.0)
    assert df.attrs["units"]["share_of_kernel_time_pct"].startswith("%")


def test_launches_of_a_multi_rank_session_say_their_rank() -> None:
    s = kernelscope.load(DATA / "ranks" / "session_h200x2_run_torchrun.json.gz")
    df = s.launches_df()
    assert list(df["rank"]) == [x.rank for x in s.session.launches]
    assert set(df["rank"]) == {0, 1}
    one = kernelscope.load(DATA / "session_h100_counters.json.gz").launches_df()
    assert set(one["rank"]) == {None} and "one-process" in one.attrs["missing"]["rank"]
