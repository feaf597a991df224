"""kernelscope.load: a session for notebooks, its summary as HTML and its data as pandas DataFrames."""
from __future__ import annotations

import sys

import pytest

import kernelscope
from html_fixtures import DATA, hostile
from kernelscope.model import SessionFileError
from kernelscope.notebook import LoadedSession

pd = pytest.importorskip("pandas")


@pytest.fixture(scope="module")
def counters():
    return kernelscope.load(DATA / "session_h100_counters.json.gz")


def test_kernels_df_is_the_kernel_table(counters) -> None:
    df = counters.kernels_df()
    table = counters.report.summary.kernels
    assert list(df["kernel"]) == [k.name for k in table]  # every kernel, most time first
    assert list(df["total_ns"]) == [k.total_ns for k in table]
    assert df["launches"].sum() == len(counters.session.launches)
    assert df.attrs["units"]["total_ns"] == "ns"
    top = df.iloc[0]
    assert top["verdict"] == counters.report.analysis.kernels[0].verdict


def test_launches_df_has_a_row_per_launch(counters) -> None:
    df = counters.launches_df()
    s = counters.session
    assert len(df) == len(s.launches)
    assert list(df["duration_ns"]) == [x.duration_ns for x in s.launches]
    assert list(df["grid_x"]) == [x.grid[0] for x in s.launches]
    assert df["counter_pass"].sum() == sum(1 for x in s.launches if x.counters)


def test_counters_df_columns_are_raw_ncu_names(counters) -> None:
    df = counters.counters_df()
    measured = [x for x in counters.session.launches if x.counters]
    assert len(df) == len(measured)
    x = measured[0]
    raw = next(n for n, m in x.counters.items() if not m.is_missing and isinstance(m.value, (int, float)))
    assert raw in df.columns and ("." in raw or "__" in raw)  # ncu's own spelling, e.g. dram__bytes.sum
    assert df.loc[df["launch"] == counters.session.launches.index(x), raw].iloc[0] == x.counters[raw].value
    # what users do with it: group by kernel like any DataFrame
    assert set(df.groupby("kernel").size().index) == {x.kernel for x in measured}


def test_collectives_df_one_process_session_has_no_rows(counters) -> None:
    df = counters.collectives_df()
    assert len(df) == 0 and {"rank", "collective", "duration_ns", "bytes", "wait_ns"} <= set(df.columns)


def test_collectives_df_rows_follow_the_recorded_nccl_kernels() -> None:
    s = kernelscope.load(DATA / "ranks" / "session_h200x2_run_torchrun.json.gz")  # 2x H200, torchrun
    df = s.collectives_df()
    nccl = [x for x in s.session.launches if x.collective is not None]
    assert len(df) == len(nccl) and set(df["rank"]) == {0, 1}
    # each row is one rank's NCCL kernel, as recorded
    recorded = {(x.rank, x.start_ns, x.start_ns + x.duration_ns) for x in nccl}
    assert set(zip(df["rank"], df["start_ns"], df["end_ns"])) == recorded
    for _, group in df.groupby(["process_group", "index"]):
        assert len(group) == 2 and group["last_to_arrive"].sum() == 1
        last = group["start_ns"].max()
        # the rank that came first waited for the other: wait = last arrival - its own arrival
        assert list(group["wait_ns"]) == [last - t for t in group["start_ns"]]
        assert group["spread_ns"].iloc[0] == last - group["start_ns"].min()
    moved = df[df["collective"] != "barrier"]  # a barrier moves no message (0 bytes in the trace)
    assert (moved["bytes"] > 0).all() and (df.loc[df["collective"] == "barrier", "bytes"] == 0).all()
    assert df.attrs["units"]["busbw_gb_s"] == "GB/s"


def test_memory_df_replays_the_allocator_to_the_reported_peak() -> None:
    s = kernelscope.load(DATA / "memory" / "steps50-52_memory.json.gz")  # run --memory on an H100
    df = s.memory_df()
    h = s.session.memory
    assert len(df) == len(h) and list(df["t_ns"]) == list(h.t_ns)
    assert df["allocated_bytes"].max() == s.report.memory.peak_allocated_bytes
    steps = df["allocated_bytes"].diff().iloc[1:]
    sizes = df["size_bytes"].iloc[1:]
    signs = df["action"].iloc[1:].map({"alloc": 1, "free_requested": -1}).fillna(0)
    assert (steps == signs * sizes).all()  # allocated bytes move by exactly each alloc / free
    with_stack = df[df["stack"].map(len) > 0]
    assert len(with_stack) and (with_stack["frame"] == with_stack["stack"].map(lambda st: st[0])).all()


def test_memory_df_without_history_says_why(counters) -> None:
    df = counters.memory_df()
    assert len(df) == 0 and "run --memory" in df.attrs["missing"]["memory"]


def test_repr_html_is_the_summary_and_escapes() -> None:
    s = LoadedSession(hostile(), "hostile")
    page = s._repr_html_()
    assert "<script" not in page.lower() and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "Kernels by total GPU time" in page and "Verdicts" in page
    assert "body{" not in page  # styles scoped to the cell


def test_missing_pandas_is_one_sentence(counters, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'kernelscope\[pandas\]'"):
        counters.kernels_df()


def test_load_bad_file_is_one_sentence(tmp_path) -> None:
    with pytest.raises(SessionFileError):
        kernelscope.load(tmp_path / "nope.json")
