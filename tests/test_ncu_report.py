"""Reading Nsight Compute reports, and fidelity: every value kernelscope reads from a
report equals what `ncu --import R --page details --print-units base` printed for it
(recorded on the H100 with the report)."""
from __future__ import annotations

import csv
import gzip
import io

import pytest

from conftest import DATA
from kernelscope.collect.ncu.merge import resolve_fields
from kernelscope.collect.ncu.report_reader import NcuReportError, read_report
from ncu_fixtures import report_file

NAME = "ncu_h100_access_patterns"


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    return read_report(report_file(NAME, tmp_path_factory.mktemp("rep")))


def _details():
    text = gzip.decompress((DATA / f"{NAME}.details.csv.gz").read_bytes()).decode()
    return list(csv.DictReader(io.StringIO(text)))


def _num(text: str) -> float | str:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return text


def test_kernels_names_and_launch_configuration(report):
    names = [k.function for k in report.kernels]
    assert names == ["copy_coalesced", "copy_strided", "transpose_smem", "transpose_smem", "wmma_gemm"]
    assert report.kernels[2].name != report.kernels[3].name  # the two template instances stay apart
    assert report.kernels[2].grid == (128, 128, 1) and report.kernels[2].block == (32, 32, 1)
    assert all(k.metrics["gpu__time_duration.sum"].source == "ncu" for k in report.kernels)


def test_every_labelled_value_equals_the_details_page(report):
    rows = _details()
    ids = sorted({int(r["ID"]) for r in rows})
    assert len(ids) == len(report.kernels)
    checked = 0
    for k, kid in zip(report.kernels, ids):
        page = {(r["Section Name"], r["Metric Name"]): r for r in rows if int(r["ID"]) == kid and r["Metric Name"]}
        assert k.labels, "the reader found no section metrics"
        for raw, (section, label) in k.labels.items():
            row = page.get((section, label))
            m = k.metrics.get(raw)
            if row is None or m is None:
                continue
            shown = _num(row["Metric Value"])
            if isinstance(shown, float):
                # the details page rounds to 2 decimals; compare at that precision
                assert float(m.value) == pytest.approx(shown, rel=1e-4, abs=0.006), (k.function, raw, label)
            else:
                assert str(m.value) == shown, (k.function, raw, label)
            checked += 1
    assert checked >= 100


def test_values_the_panels_use_equal_the_details_page(report):
    """The resolved model fields (what the panels draw) against the same page, where the page shows them."""
    rows = _details()
    ids = sorted({int(r["ID"]) for r in rows})
    seen = set()
    for k, kid in zip(report.kernels, ids):
        label_of = k.labels
        page = {(r["Section Name"], r["Metric Name"]): _num(r["Metric Value"]) for r in rows if int(r["ID"]) == kid}
        for model, m in resolve_fields(k.metrics).items():
            if m.is_missing or m.source != "ncu" or m.raw_name not in label_of:
                continue
            shown = page.get(label_of[m.raw_name])
            if isinstance(shown, float):
                assert float(m.value) == pytest.approx(shown, rel=1e-4, abs=0.006), model
                seen.add(model)
    assert {"duration_ns", "achieved_occupancy_pct", "dram_throughput_pct", "l2_hit_rate_pct"} <= seen


def test_rule_results_keep_nvidia_text_and_speedup(report):
    strided = report.kernels[1]
    access = [f for f in strided.findings if f.rule_id == "MemoryCacheAccessPattern"]
    assert access and "4.0 of the 32 bytes" in access[0].message
    assert access[0].speedup_pct is not None and access[0].speedup_type == "global"
    transpose = report.kernels[2]
    conflicts = [f for f in transpose.findings if "bank conflict" in f.message]
    assert conflicts and conflicts[0].evidence


def test_what_the_counters_show_about_known_kernels(report):
    coalesced, strided, t0, t1, wmma = (resolve_fields(k.metrics) for k in report.kernels)
    assert coalesced["global_load_bytes_per_sector"].value == 32  # every byte of every sector used
    assert strided["global_load_bytes_per_sector"].value == 4  # stride 32 floats: 4 of 32 bytes
    spr = strided["global_load_sectors_per_request"]
    assert spr.source == "derived" and spr.value == 32
    waves0 = t0["shared_load_wavefronts"].value / t0["shared_load_instructions"].value
    waves1 = t1["shared_load_wavefronts"].value / t1["shared_load_instructions"].value
    assert waves0 > 30 and waves1 < 1.5  # 32-way conflict without padding, none with it
    assert wmma["tensor_pipe_pct"].value > 0 and coalesced["tensor_pipe_pct"].value == 0


def test_a_truncated_report_is_one_sentence(tmp_path):
    good = report_file(NAME, tmp_path)
    bad = tmp_path / "bad.ncu-rep"
    bad.write_bytes(good.read_bytes()[:5000])
    with pytest.raises(NcuReportError) as e:
        read_report(bad)
    assert "\n" not in str(e.value)


def test_a_file_that_is_not_a_report(tmp_path):
    pytest.importorskip("ncu_report")
    p = tmp_path / "x.ncu-rep"
    p.write_text("not a report")
    with pytest.raises(NcuReportError):
        read_report(p)
    with pytest.raises(NcuReportError, match="no such report"):
        read_report(tmp_path / "missing.ncu-rep")


def test_a_hand_made_report_with_ncu_default_sections(tmp_path):
    """`ncu -o r ./app` with no options: the basic sections only. What the report has
    equals its details page; what it lacks is N/A with the raw names looked for."""
    rep = read_report(report_file("ncu_h100_handmade_default", tmp_path))
    text = gzip.decompress((DATA / "ncu_h100_handmade_default.details.csv.gz").read_bytes()).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    ids = sorted({int(r["ID"]) for r in rows})
    checked = 0
    for k, kid in zip(rep.kernels, ids):
        page = {(r["Section Name"], r["Metric Name"]): _num(r["Metric Value"]) for r in rows if int(r["ID"]) == kid}
        for raw, key in k.labels.items():
            if key in page and raw in k.metrics and isinstance(page[key], float):
                assert float(k.metrics[raw].value) == pytest.approx(page[key], rel=1e-4, abs=0.006)
                checked += 1
        fields = resolve_fields(k.metrics)
        assert (
            fields["stall_long_scoreboard"].is_missing
            and "WarpStateStats" in fields["stall_long_scoreboard"].missing_reason
        )
        assert not fields["duration_ns"].is_missing
    assert checked >= 20


SESSIONS_WITH_DETAILS = [
    # name, counter results, kernel-name fragments that must be among them (library)
    ("session_h100_counters", 4, ("matmul_kernel", "nvjet", "at::native")),  # Triton, cuBLAS, PyTorch
    ("session_h100_analysis", 12, ("matmul_kernel", "softmax_kernel", "nvjet", "cudnn_generated_fort_native_sdpa",
                                   "reduce_kernel", "elementwise_kernel")),  # + cuDNN attention, reductions
]


@pytest.mark.parametrize("name,results,libraries_expected", SESSIONS_WITH_DETAILS)
def test_session_counters_equal_the_details_page_for_several_libraries(report, name, results, libraries_expected):
    """`kernelscope run --counters` on the H100 stored each result's raw ncu metrics in the
    session; the same report's details page was printed there too. The raw-name <-> label
    map comes from the section definitions (read from the other report, same ncu)."""
    from kernelscope.model import Session

    label_to_raw = {}
    for k in report.kernels:
        for raw, key in k.labels.items():
            label_to_raw.setdefault(key, raw)
    s = Session.load(DATA / f"{name}.json.gz")
    text = gzip.decompress((DATA / f"{name}.details.csv.gz").read_bytes()).decode()
    rows = list(csv.DictReader(io.StringIO(text)))
    ids = sorted({int(r["ID"]) for r in rows})
    profiled = [x for x in s.launches if x.counters]
    assert len(ids) == len(profiled) == results
    libraries = set()
    checked = 0
    for x in profiled:  # report order = profiling order = launch order
        kid = ids[profiled.index(x)]
        page_rows = [r for r in rows if int(r["ID"]) == kid and r["Metric Name"]]
        assert page_rows[0]["Kernel Name"].split("(")[0].split("<")[0].split()[-1].split("::")[-1] in x.kernel
        libraries.add(x.kernel.split("<")[0].split("(")[0][-30:])
        for r in page_rows:
            raw = label_to_raw.get((r["Section Name"], r["Metric Name"]))
            if r["Section Name"] == "Command line profiler metrics":  # --metrics extras appear by raw name
                raw = r["Metric Name"]
            shown = _num(r["Metric Value"])
            if raw is None or raw not in x.counters or not isinstance(shown, float):
                continue
            assert float(x.counters[raw].value) == pytest.approx(shown, rel=1e-4, abs=0.006), (x.kernel[:40], raw)
            checked += 1
    assert checked >= 40 * results
    names = " ".join(x.kernel for x in profiled)
    assert all(lib in names for lib in libraries_expected), [lib for lib in libraries_expected if lib not in names]


def test_a_report_cut_short_is_refused_saying_how_much_was_read(tmp_path):
    from kernelscope.cli import main

    whole = report_file("ncu_h100_access_patterns", tmp_path)  # 5 kernel results, one block each
    cut = tmp_path / "cut.ncu-rep"
    cut.write_bytes(whole.read_bytes()[:-10])  # the last result loses its final bytes
    with pytest.raises(NcuReportError, match=r"ends early.*5 kernel results read, 4 of them whole"):
        read_report(cut)
    kept = read_report(cut, partial=True)
    assert len(kept.kernels) == 4 and "left out 1 cut off" in kept.partial_note
    assert [k.name for k in kept.kernels] == [k.name for k in read_report(whole).kernels][:4]
    with pytest.raises(SystemExit) as e:
        main(["import", str(cut), "-o", str(tmp_path / "s.json")])
    assert e.value.code == 2 and not (tmp_path / "s.json").exists()
    assert main(["import", str(cut), "-o", str(tmp_path / "s.json"), "--partial"]) == 0


def test_a_crash_of_nvidias_reader_on_a_damaged_file_is_one_sentence(tmp_path, monkeypatch):
    """Nsight Compute 2025.3.1's ncu_report segfaulted on bit-flipped reports in the long fuzz run; the
    reader runs in a child process, so the crash is the child's and the user gets a sentence."""
    fake = tmp_path / "fake"
    fake.mkdir()
    (fake / "ncu_report.py").write_text("import os, signal\n"
                                        "def load_report(path):\n    os.kill(os.getpid(), signal.SIGSEGV)\n")
    from kernelscope.collect.ncu import report_reader

    monkeypatch.setattr(report_reader, "locate_reader", lambda: report_reader.ReaderLocation(fake, False))
    report = report_file("ncu_h100_region", tmp_path)
    with pytest.raises(NcuReportError, match=r"is damaged: NVIDIA's report reader crashed on it \(signal SIGSEGV\)"):
        read_report(report)
