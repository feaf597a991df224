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


def test_collectives_df_is_empty_with_its_columns(counters) -> None:
    df = counters.collectives_df()
    assert len(df) == 0 and {"rank", "collective", "duration_ns", "bytes"} <= set(df.columns)


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
