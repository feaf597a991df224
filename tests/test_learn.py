"""`kernelscope learn marlin` without a GPU: the bundled H100 launch, its figures checked by independent arithmetic."""
from __future__ import annotations

import gzip
import io
import json
import statistics

import pytest

pytest.importorskip("torch")

from conftest import assert_snapshot, ROOT, run_cli  # noqa: E402
from kernelscope.model import Session  # noqa: E402

BUNDLED = ROOT / "src" / "kernelscope" / "data" / "marlin_session_h100.json.gz"


ks = run_cli


def _no_gpu() -> None:
    from kernelscope.collect.driver import gpu_available

    if gpu_available()[0]:
        pytest.skip("this machine has a GPU: learn marlin records a launch (see tests/gpu)")


@pytest.fixture(scope="module")
def bundled() -> Session:
    return Session.from_dict(json.loads(gzip.decompress(BUNDLED.read_bytes())))


@pytest.fixture(scope="module")
def learn_out():
    _no_gpu()
    return ks("learn", "marlin", "--width", "120", "--no-color")


def _expected(s: Session) -> dict:
    """Bytes, FLOPs and rates from the recorded shapes and launches, without kernelscope's code."""
    p = s.environment["w4a16_plan"]
    m, k, n, gs, split = p["m"], p["k"], p["n"], p["groupsize"], p["split_k"]
    grid = (-(-m // p["block_m"]) * -(-n // p["block_n"]), split, 1)
    launches = [x for x in s.launches if x.kernel == "_w4a16_kernel" and "w4a16_gemm" in x.regions]
    assert launches and all(x.grid == grid and x.block == (32 * p["num_warps"], 1, 1) for x in launches)
    a, bk, scales = m * k * 2, (k // 8) * n * 4, (k // gs) * n * 2
    c = split * m * n * 4 if split > 1 else m * n * 2  # fp32 partials, or fp16 C
    if split > 1 and p.get("fused_split_sum"):
        c += m * n * 2  # the last program of each tile writes fp16 C too
    total, flops = a + bk + scales + c, 2 * m * n * k
    seconds = statistics.median(x.duration_ns for x in launches) * 1e-9
    copies = [2 * x.bytes / (x.duration_ns * 1e-9) for x in s.activities if x.kind == "memcpy" and "DtoD" in x.name]
    return {"grid": grid, "launch": launches[0], "a_all": -(-n // p["block_n"]) * a, "total": total,
            "flops": flops, "intensity": flops / total, "bandwidth": total / seconds, "flop_rate": flops / seconds,
            "copy": statistics.median(copies), "pct": 100 * total / seconds / statistics.median(copies)}


def test_bundled_session_is_a_real_h100_recording(bundled):
    assert bundled.device is not None and "H100" in bundled.device.name
    assert bundled.collectors["trace"].status == "ok"
    assert bundled.environment["w4a16_relative_error"] < 1e-2
    p = bundled.environment["w4a16_plan"]
    assert (p["m"], p["k"], p["n"]) == (16, 8192, 8192)


def test_learn_without_gpu_exits_0_and_says_what_needs_a_gpu(learn_out, bundled):
    r = learn_out
    assert r.returncode == 0, r.stderr
    first = " ".join(r.stdout.split("╭")[0].split())  # the banner sentence, however it wrapped
    assert first.startswith("No CUDA GPU is available here (") and bundled.device.name in first
    assert first.count(". ") == 0 and first.endswith(".")
    assert "Data packing · Marlin INT4 (real weights)" in r.stdout
    assert "Needs a GPU" in r.stdout and "Works here without one" in r.stdout
    assert "N/A: this recording has" in r.stdout  # the time per phase (the cell wraps after this)


def test_learn_figures_equal_independent_arithmetic(learn_out, bundled):
    e, out = _expected(bundled), learn_out.stdout
    x = e["launch"]
    for text in (
        " x ".join(map(str, e["grid"])),
        f"{x.value('registers_per_thread')} registers/thread",
        f"{x.value('shared_memory_per_block_bytes'):,} B",
        f"{e['a_all']:,} B",
        f"{e['flops']:,} FLOP",
        f"{e['total']:,} B",
        f"{e['intensity']:.2f} FLOP/B",
        f"{e['bandwidth'] / 1e9:,.1f} GB/s",
        f"{e['flop_rate'] / 1e12:,.2f} TFLOP/s",
        f"{e['copy'] / 1e9:,.1f} GB/s",
        f"{e['pct']:.1f}%",
    ):
        assert text in out, text


def test_walkthrough_data_equals_independent_arithmetic(bundled):
    from kernelscope.kernels.marlin.walkthrough import build_walkthrough, plan_of

    e = _expected(bundled)
    w = build_walkthrough(bundled, plan_of(bundled))
    assert w.figure("bytes the kernel must move").value == e["total"]
    assert w.figure("useful FLOPs").value == e["flops"]
    assert w.figure("arithmetic intensity").value == pytest.approx(e["intensity"], rel=1e-12)
    assert w.figure("achieved bandwidth").value == pytest.approx(e["bandwidth"], rel=1e-12)
    assert w.figure("device-to-device copy bandwidth").value == pytest.approx(e["copy"], rel=1e-12)
    assert w.figure("programs").value == e["grid"][0] * e["grid"][1]
    assert w.figure("registers per thread").source == "cupti"
    assert w.figure("arithmetic intensity").formula.startswith("2·m·n·k /")
    assert w.figure("time per phase").is_missing


def test_copy_bandwidth_without_a_recorded_copy_says_why(bundled):
    import copy

    from kernelscope.kernels.marlin.walkthrough import copy_bandwidth

    s = copy.copy(bundled)
    s.activities = [a for a in bundled.activities if not (a.kind == "memcpy" and "DtoD" in a.name)]
    m = copy_bandwidth(s)
    assert m.is_missing and "no device-to-device copy" in m.missing_reason and "calibrate" not in m.missing_reason
    assert not copy_bandwidth(bundled).is_missing  # the bundled session recorded its copies


@pytest.mark.parametrize("args,phrase", [
    (["learn", "nonsense"], "no walkthrough for 'nonsense'"),
    (["learn", "marlin", "--session", "no_such_session.json"], "no such session file"),
    (["learn", "marlin", "--session", "tests/data/session_h100_mixed.json.gz"], "no _w4a16_kernel launch"),
    (["learn", "marlin", "--session", str(BUNDLED), "--k", "100"], "k must be a positive multiple of 128"),
    (["learn", "marlin", "--session", str(BUNDLED), "--n", "4096"], "no _w4a16_kernel launch in the session has"),
])
def test_bad_input_is_one_sentence(args, phrase):
    r = ks(*args)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernelscope: error: ") and lines[0].endswith(".")
    assert phrase in r.stderr


def test_other_shapes_without_a_gpu_say_so():
    _no_gpu()
    r = ks("learn", "marlin", "--m", "32")
    assert r.returncode == 2 and "bundled recording is of m=16, k=8192, n=8192 only" in r.stderr


def test_walkthrough_snapshot_at_120_columns(bundled):
    from kernelscope.kernels.marlin.walkthrough import build_walkthrough, plan_of
    from kernelscope.render.show import make_console
    from kernelscope.kernels.marlin.panels import NeedsGpuNote, WalkthroughView

    buf = io.StringIO()
    console = make_console(width=120, file=buf, color=False)
    walk = build_walkthrough(bundled, plan_of(bundled))
    console.print(WalkthroughView(walk))
    console.print(NeedsGpuNote(walk))
    text = buf.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 120
    assert_snapshot("learn_marlin_h100.w120.txt", text)


def test_plan_for_a_smaller_k_splits_it_into_whole_blocks():
    """--k below the default split's 8 blocks of 128 rows: split_k halves until k divides, not an error."""
    import argparse

    from kernelscope.cli.learn import _plan

    plan = _plan(None, argparse.Namespace(m=None, k=512, n=256))
    assert (plan.k, plan.split_k, plan.block_k) == (512, 4, 128)
    assert _plan(None, argparse.Namespace(m=None, k=128, n=256)).split_k == 1
    assert _plan(None, argparse.Namespace(m=None, k=None, n=None)).split_k == 8  # the default stays


def test_a_stage_buffer_estimate_past_the_allocation_is_explained(bundled):
    """Issue 36: the estimate (36,864 B on the bundled H100 launch) exceeds what the compiler allocated (28,976 B);
    the walkthrough says by how much and how many stages' tiles the allocation holds, not nothing."""
    from kernelscope.kernels.marlin.walkthrough import build_walkthrough, plan_of

    w = build_walkthrough(bundled, plan_of(bundled))
    estimate, allocated = w.figure("stage buffers (estimate)").value, w.figure("shared memory the compiler "
                                                                                 "allocated").value
    assert estimate > allocated  # what the recording holds: the case to explain
    said = w.figure("estimate vs compiler")
    assert said.value.startswith(f"{estimate - allocated:,} B more than allocated") and "room for 2 of the 3" in \
        said.value
