"""kernelscope.cuh on a real GPU (pytest -m gpu; needs cupy, nvcc where present): the header compiles with NVRTC,
nvcc and torch's cpp_extension; phases whose lengths are set by spinning on %globaltimer are recorded within 5 %;
the pipelined example overlaps its load and compute where the serial one does not; every block records once; a
small buffer counts what it dropped and is never written past; a plain build records nothing and says so; a
session from `kernelscope run` draws the panels. Set OUT to keep small raw buffers and a session (fixtures for
tests/data/cuda_scopes/) and the overhead measurement.
"""
from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.gpu

PHASE_NS = (20_000, 40_000, 10_000)  # spin lengths by construction (%globaltimer steps 32 ns on an H100)
SMALL_NS = (2_000, 4_000, 1_000)  # recorded and printed, not held to 5 %: a few timer steps of slack
NAMES = {0: "first", 1: "second", 2: "third"}
GRID, THREADS = 264, 128  # two blocks of four warps per SM of an H100

SPIN = r"""
#include "kernelscope.cuh"

__device__ __forceinline__ unsigned long long now_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t) :: "memory");
    return t;
}

__device__ __forceinline__ void spin_ns(unsigned long long d) {
    const unsigned long long t0 = now_ns();
    while (now_ns() - t0 < d) {}
}

extern "C" __global__ void spin_phases(unsigned long long a, unsigned long long b, unsigned long long c,
                                       long long* ks_blocks, long long* ks_scopes) {
    KS_BLOCK_BEGIN();
    KS_SCOPES_INIT(ks_scopes);
    KS_SCOPE_BEGIN(0); spin_ns(a); KS_SCOPE_END(0);
    KS_SCOPE_BEGIN(1); spin_ns(b); KS_SCOPE_END(1);
    KS_SCOPE_BEGIN(2); spin_ns(c); KS_SCOPE_END(2);
    KS_BLOCK_END(ks_blocks);
}
"""


def _out(name: str) -> Path | None:
    """Where to keep a fixture, under $OUT/cuda_scopes (None: not asked for)."""
    if not os.environ.get("OUT"):
        return None
    d = Path(os.environ["OUT"]) / "cuda_scopes"
    d.mkdir(parents=True, exist_ok=True)
    return d / name


def _keep_buffers(name: str, rec, note: str) -> None:
    path = _out(name)
    if path is None:
        return
    blocks = rec.blocks.get().tolist() if rec.record_blocks else None
    names = {str(k): v for k, v in rec.names.items()}
    path.write_text(json.dumps({"note": note, "grid": list(rec.grid), "names": names,
                                "scopes": rec.scopes.get().tolist(), "blocks": blocks}))


def _example():
    sys.path.insert(0, str(ROOT / "examples"))
    import cuda_pipeline

    return cuda_pipeline


def _spin_module(record: bool = True):
    import cupy

    from kernelscope.collect.instrument.cuda_scopes import compile_options

    return cupy.RawModule(code=SPIN, options=compile_options(record))


def _launch_spin(fn, rec, grid: int = GRID, lengths: tuple[int, int, int] = PHASE_NS) -> None:
    import numpy as np

    fn((grid,), (THREADS,), (*(np.uint64(d) for d in lengths), rec.blocks, rec.scopes))


def _timer_step(scopes) -> int | None:
    """The smallest step between distinct recorded times: the %globaltimer granularity this run saw."""
    times = sorted({w.block_offset_ns + t for w in scopes.warps for t in w.start_ns + w.end_ns})
    steps = [b - a for a, b in zip(times, times[1:]) if b > a]
    return min(steps) if steps else None


def _check_durations(scopes, lengths: tuple[int, int, int] = PHASE_NS, hold: bool = True) -> None:
    durations: dict[str, list[int]] = {n: [] for n in NAMES.values()}
    for w in scopes.warps:
        assert [scopes.names[i] for i in w.scope] == list(NAMES.values()), (w.block_id, w.warp, w.scope)
        for i, s, e in zip(w.scope, w.start_ns, w.end_ns):
            durations[scopes.names[i]].append(e - s)
    print(f"timer step seen: {_timer_step(scopes)} ns")
    for (name, got), want in zip(durations.items(), lengths):
        med = statistics.median(got)
        within = sum(1 for d in got if abs(d - want) <= 0.05 * want) / len(got)
        print(f"{name}: set {want} ns, recorded median {med:.0f} ns, min {min(got)}, max {max(got)}, "
              f"{100 * within:.1f}% of {len(got)} within 5%")
        if hold:
            assert abs(med - want) <= 0.05 * want
            assert within >= 0.99, f"{name}: only {100 * within:.1f}% of its scopes within 5% of {want} ns"


def _check_blocks(blocks, grid: int) -> None:
    assert blocks.problems == [], blocks.problems
    assert sorted(blocks.block_id) == list(range(grid))  # every block exactly once
    assert blocks.nsmid is not None and all(0 <= s < blocks.nsmid for s in blocks.smid)
    assert all(e > s for s, e in zip(blocks.start_ns, blocks.end_ns))


def test_nvrtc_build_records_the_phase_lengths_it_spins_for():
    from kernelscope.collect.instrument.cuda_scopes import CudaScopes

    fn = _spin_module().get_function("spin_phases")
    rec = CudaScopes((GRID, 1, 1), NAMES, block=THREADS, scopes_per_warp=3, array="cupy")
    _launch_spin(fn, rec)
    got = rec.read()
    assert got.scopes.problems == [], got.scopes.problems
    assert len(got.scopes.warps) == GRID * THREADS // 32
    _check_durations(got.scopes)
    _check_blocks(got.blocks, GRID)
    # the blocks' recorded spans hold their phases: at least the three spins
    shortest = min(e - s for s, e in zip(got.blocks.start_ns, got.blocks.end_ns))
    print("shortest block span", shortest, "ns")
    assert shortest >= sum(PHASE_NS)
    small = CudaScopes((8, 1, 1), NAMES, block=THREADS, scopes_per_warp=3, array="cupy")  # a small fixture too
    _launch_spin(fn, small, grid=8, lengths=SMALL_NS)
    _check_durations(small.read().scopes, SMALL_NS, hold=False)
    _keep_buffers("spin_phases_small.json", small, f"spin_phases, NVRTC, grid 8, block {THREADS}, phases "
                  f"{SMALL_NS} ns")


def test_nvcc_build_records_and_the_plain_build_says_how_to_enable_it(tmp_path):
    import cupy

    from kernelscope.collect.instrument.cuda_scopes import CudaScopes, NotInstrumentedError, include_dir

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not on PATH")
    arch = f"sm_{cupy.cuda.Device().compute_capability}"  # "90" on an H100
    src = tmp_path / "spin.cu"
    src.write_text(SPIN)
    mods = {}
    for record in (True, False):
        cubin = tmp_path / f"spin_{record}.cubin"
        cmd = [nvcc, f"-arch={arch}", "-cubin", f"-I{include_dir()}", "-o", str(cubin), str(src)]
        r = subprocess.run(cmd + (["-DKS_RECORD"] if record else []), capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        mods[record] = cupy.RawModule(path=str(cubin))
    rec = CudaScopes((GRID, 1, 1), NAMES, block=THREADS, scopes_per_warp=3, array="cupy")
    _launch_spin(mods[True].get_function("spin_phases"), rec)
    got = rec.read()
    assert got.scopes.problems == [] and len(got.scopes.warps) == GRID * THREADS // 32
    _check_durations(got.scopes)
    _check_blocks(got.blocks, GRID)
    plain = CudaScopes((GRID, 1, 1), NAMES, block=THREADS, scopes_per_warp=3, array="cupy")
    _launch_spin(mods[False].get_function("spin_phases"), plain)
    with pytest.raises(NotInstrumentedError) as e:
        plain.read()
    print(e.value)
    assert "-DKS_RECORD" in str(e.value) and "no block record and no phase scope" in str(e.value)


def test_a_small_buffer_counts_what_it_dropped_and_is_never_written_past():
    import cupy

    from kernelscope.collect.instrument.cuda_scopes import (
        HEADER_VALUES, RECORD_VALUES, SCOPES_CHUNK, SCOPES_MAGIC, read_scope_buffer)

    capacity, slack = 64, 1000  # room for 8 warps' claims; the kernel is told 64 and the array is larger
    buf = cupy.zeros(HEADER_VALUES + RECORD_VALUES * (capacity + slack), dtype=cupy.int64)
    buf[:HEADER_VALUES] = cupy.asarray([capacity, 0, SCOPES_MAGIC, 0], dtype=cupy.int64)
    blocks = cupy.zeros(GRID * 4, dtype=cupy.int64)
    import numpy as np

    _spin_module().get_function("spin_phases")((GRID,), (THREADS,), (*(np.uint64(d // 40) for d in PHASE_NS),
                                                                      blocks, buf))
    values = buf.get().tolist()
    assert not any(values[HEADER_VALUES + RECORD_VALUES * capacity:]), "a record was written past the capacity"
    warps = GRID * THREADS // 32
    claimed, dropped = values[1], values[3]
    assert claimed == warps * SCOPES_CHUNK  # one claim per warp
    assert dropped == (warps - capacity // SCOPES_CHUNK) * 6  # every record of the warps whose claim found no room
    s = read_scope_buffer(values[:HEADER_VALUES + RECORD_VALUES * capacity], NAMES)
    print(s.problems)
    assert len(s.warps) == capacity // SCOPES_CHUNK
    assert any(f"{dropped:,} of {dropped + 6 * len(s.warps):,} records were dropped" in p for p in s.problems)


def test_the_pipelined_kernel_overlaps_load_and_compute_and_the_serial_one_does_not():
    from kernelscope.analyze.phases import summarize_phases

    ex = _example()
    import cupy

    blocks, warps, stages, iters = 1056, 1, 8, 256
    x = cupy.random.rand(ex.values(blocks, warps, stages) * 4, dtype=cupy.float32)
    y = cupy.zeros_like(x)
    plain, instrumented = ex.build(record=False), ex.build(record=True)
    want = ex.reference(x, iters)
    overlap, times = {}, {}
    for kernel in ex.KERNELS:
        ex.launch(plain, kernel, x, y, blocks, warps, stages, iters, None)
        cupy.cuda.get_current_stream().synchronize()
        assert bool((y == want).all()), kernel  # the same FMAs in the same order
        times[kernel] = ex.time_plain_us(plain, kernel, x, y, blocks, warps, stages, iters)
        got = ex.record(instrumented, kernel, x, y, blocks, warps, stages, iters, submit=False)
        assert got.scopes.problems == [], got.scopes.problems
        _check_blocks(got.blocks, blocks)
        assert len(got.scopes.warps) == blocks * warps
        assert all(len(w.scope) == 3 * stages for w in got.scopes.warps)
        v = summarize_phases(got.scopes)
        pairs = {frozenset((o.a, o.b)): o.fraction_median for o in v.overlaps}
        overlap[kernel] = pairs.get(frozenset(("load", "compute")), 0.0)
        print(kernel, f"{times[kernel]:.1f} us plain;", [(p.name, round(p.per_warp_median)) for p in v.phases],
              f"load/compute overlap {overlap[kernel]:.3f}", f"block span median {v.block_span_median}")
    assert overlap["pipeline_serial"] == 0.0  # one warp a block: its scopes follow each other
    assert overlap["pipeline_overlap"] > overlap["pipeline_serial"]
    for kernel in ex.KERNELS:  # small launches as fixtures
        rec = ex.CudaScopes((4, 1, 1), ex.NAMES, block=64, scopes_per_warp=3 * 4, array="cupy")
        xs, ys = x[:ex.values(4, 2, 4) * 4], y[:ex.values(4, 2, 4) * 4]
        ex.launch(instrumented, kernel, xs, ys, 4, 2, 4, iters, rec)
        rec.read()
        _keep_buffers(f"{kernel}.json", rec, f"{kernel}, NVRTC, 4 blocks of 2 warps, 4 stages, {iters} FMAs")


def test_cpp_extension_build_records_through_torch_tensors():
    import torch
    from torch.utils import cpp_extension

    from kernelscope.collect.instrument.cuda_scopes import CudaScopes, include_dir

    try:
        cpp_extension.verify_ninja_availability()
    except RuntimeError:
        pytest.skip("ninja is not installed: torch.utils.cpp_extension cannot build")
    cuda = SPIN + r"""
#include <torch/extension.h>
void launch_spin(torch::Tensor blocks, torch::Tensor scopes, int64_t grid, int64_t threads) {
    spin_phases<<<grid, threads>>>(20000ULL, 40000ULL, 10000ULL, (long long*)blocks.data_ptr<int64_t>(),
                                   (long long*)scopes.data_ptr<int64_t>());
}
"""
    cpp = "void launch_spin(torch::Tensor blocks, torch::Tensor scopes, int64_t grid, int64_t threads);"
    ext = cpp_extension.load_inline("ks_spin_ext", cpp_sources=cpp, cuda_sources=cuda, functions=["launch_spin"],
                                    extra_include_paths=[str(include_dir())], extra_cuda_cflags=["-DKS_RECORD"],
                                    verbose=False)
    rec = CudaScopes((GRID, 1, 1), NAMES, block=THREADS, scopes_per_warp=3)
    ext.launch_spin(rec.blocks, rec.scopes, GRID, THREADS)
    torch.cuda.synchronize()
    got = rec.read()
    assert got.scopes.problems == [] and len(got.scopes.warps) == GRID * THREADS // 32
    _check_durations(got.scopes)
    _check_blocks(got.blocks, GRID)


def test_a_profiled_launch_gets_its_records_and_the_panels_draw_them(tmp_path):
    import io

    import kernelscope
    from kernelscope.analyze.report import build_report
    from kernelscope.collect.instrument.cuda_scopes import CudaScopes
    from kernelscope.model import Session
    from kernelscope.render.chrome_trace import session_to_chrome_trace
    from kernelscope.render.show import ShowView, make_console

    fn = _spin_module().get_function("spin_phases")
    with kernelscope.profile() as s:
        rec = CudaScopes((8, 1, 1), NAMES, block=THREADS, scopes_per_warp=3, array="cupy")
        _launch_spin(fn, rec, grid=8)
        rec.submit("spin_phases")
    assert s.collectors["instrument"].status == "ok", s.collectors["instrument"]
    assert s.collectors["scopes"].status == "ok", s.collectors["scopes"]
    x = next(x for x in s.launches if x.kernel.endswith("spin_phases"))
    assert x.block_records is not None and x.scopes is not None and len(x.scopes.warps) == 8 * 4
    path = s.save(tmp_path / "spin.json.gz")
    keep = _out("session_spin.json.gz")
    if keep is not None:
        shutil.copy(path, keep)
    back = Session.load(path)
    buf = io.StringIO()
    make_console(width=140, file=buf, color=False).print(ShowView(build_report(back, "spin_phases", 1),
                                                                  with_analysis=False))
    text = buf.getvalue()
    print(text)
    assert "Warp execution" in text and "measured" in text
    trace = session_to_chrome_trace(back)
    assert sum(1 for e in trace.events if e.get("cat") == "scope") == 8 * 4 * 3


def test_kernelscope_run_then_show_draws_the_pipeline(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    out = tmp_path / "p.json"
    r = subprocess.run([sys.executable, "-m", "kernelscope", "run", "-o", str(out), "--", sys.executable,
                        str(ROOT / "examples" / "cuda_pipeline.py"), "--blocks", "132", "--stages", "8"],
                       capture_output=True, text=True, env=env, cwd=ROOT)
    print(r.stdout[-3000:], r.stderr[-3000:])
    assert r.returncode == 0, r.stderr
    keep = _out("session_pipeline.json")
    if keep is not None:
        shutil.copy(out, keep)
    show = subprocess.run([sys.executable, "-m", "kernelscope", "show", str(out), "--kernel", "pipeline", "--width",
                           "140", "--no-color"], capture_output=True, text=True, env=env)
    print(show.stdout[-6000:])
    assert show.returncode == 0, show.stderr
    assert "pipeline_overlap" in show.stdout and "load" in show.stdout and "compute" in show.stdout


def test_overhead_with_four_scopes_per_warp_is_measured():
    sys.path.insert(0, str(ROOT / "scripts"))
    import cuda_scopes_overhead as ov

    rows = [ov.measure(132 * 16, iters) for iters in (256, 32)]
    for r in rows:
        print(f"iters {r['iters']}: plain {r['plain_us']:.2f} us (range {r['plain_range_us']}, "
              f"{r['plain_registers']} registers)")
        for name, v in r["variants"].items():
            print(f"  {name}: {v['us']:.2f} us, overhead {v['overhead_pct']:+.2f}% (range {v['range_us']}, "
                  f"{v['registers']} registers)")
        assert r["plain_us"] > 0 and r["instrumented_us"] > 0
    keep = _out("overhead.json")
    if keep is not None:
        keep.write_text(json.dumps(rows))
    assert rows[0]["overhead_pct"] < 10.0  # the long-phase row; the target is under 3 %, reported, not asserted
