"""What kernelscope.cuh's warp phase scopes cost: one kernel, built plain and with -DKS_RECORD, timed on a GPU.

    python scripts/cuda_scopes_overhead.py [--results benchmarks/results/instrumentation_overhead.md] [--copy-to DIR]

The kernel has four scopes per warp (load, compute, reduce, store: eight records,
one slot claim per warp) and the block recorder. Each warp loads 16 float4 per
lane, runs ``iters`` FMAs on each value, sums them across the warp and stores
them; two settings of ``iters`` give long and short phases, because the
recorder's cost is per record, not per unit of work.

Timing: CUDA events around a batch of back-to-back launches (the kernel is
GPU-bound, so the batch time over the launch count is the kernel's time),
plain and instrumented batches alternating, the median batch of each. The
instrumented launches of a batch share one buffer with room for all of their
records, so none is dropped (checked after the run). Writes (replacing a
previous one) the section "CUDA C++ phase scopes" of the results file, with the
device, driver and date of the run; ``--copy-to`` also writes the file and the
raw times (JSON) there.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from kernelscope.collect.instrument.cuda_scopes import (  # noqa: E402  the checkout's kernelscope
    HEADER_VALUES,
    RECORD_VALUES,
    SCOPES_MAGIC,
    compile_options,
    scope_capacity,
)

SECTION = "## CUDA C++ phase scopes (kernelscope.cuh)"
NAMES = {0: "load", 1: "compute", 2: "reduce", 3: "store"}
VECS = 16  # float4 per lane
THREADS = 256

SOURCE = r"""
#include "kernelscope.cuh"

extern "C" __global__ void four_phases(const float4* __restrict__ x, float* __restrict__ y, int iters,
                                       long long* ks_blocks, long long* ks_scopes) {
    KS_BLOCK_BEGIN();
    KS_SCOPES_INIT(ks_scopes);
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    float4 v[16];
    KS_SCOPE_BEGIN(0);
    #pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = x[warp * (16 * 32) + i * 32 + lane];
    float s = 0.f;
    #pragma unroll
    for (int i = 0; i < 16; ++i) s += v[i].x;  // use the loads inside the scope: they have landed at its end
    KS_SCOPE_END(0);
    KS_SCOPE_BEGIN(1);
    for (int k = 0; k < iters; ++k) {
        #pragma unroll
        for (int i = 0; i < 16; ++i) {
            v[i].x = fmaf(v[i].x, 0.999f, 0.001f); v[i].y = fmaf(v[i].y, 0.999f, 0.001f);
            v[i].z = fmaf(v[i].z, 0.999f, 0.001f); v[i].w = fmaf(v[i].w, 0.999f, 0.001f);
        }
    }
    KS_SCOPE_END(1);
    KS_SCOPE_BEGIN(2);
    #pragma unroll
    for (int i = 0; i < 16; ++i) s += v[i].x + v[i].y + v[i].z + v[i].w;
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    KS_SCOPE_END(2);
    KS_SCOPE_BEGIN(3);
    y[warp * 32 + lane] = s;
    KS_SCOPE_END(3);
    KS_BLOCK_END(ks_blocks);
}
"""


def build(record: bool):
    import cupy

    return cupy.RawModule(code=SOURCE, options=compile_options(record)).get_function("four_phases")


def _armed_buffer(cupy, capacity: int):
    buf = cupy.zeros(HEADER_VALUES + RECORD_VALUES * capacity, dtype=cupy.int64)
    buf[:HEADER_VALUES] = cupy.asarray([capacity, 0, SCOPES_MAGIC, 0], dtype=cupy.int64)
    return buf


def measure(blocks: int, iters: int, launches: int = 50, repeats: int = 15) -> dict:
    """Per-launch times (µs) of the plain and the instrumented build, alternating batches; the medians and the
    overhead, with the instrumented buffers checked for drops."""
    import cupy
    import numpy as np

    plain, rec = build(False), build(True)
    warps = blocks * THREADS // 32
    x = cupy.random.rand(warps * VECS * 32 * 4, dtype=cupy.float32)
    y = cupy.zeros(warps * 32, dtype=cupy.float32)
    per_launch = scope_capacity((blocks, 1, 1), THREADS, len(NAMES))
    scopes = _armed_buffer(cupy, per_launch * launches)
    block_rows = cupy.zeros(blocks * 4, dtype=cupy.int64)
    placeholder = cupy.zeros(1, dtype=cupy.int64)

    def batch(fn, blk, sc) -> float:
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        for _ in range(launches):
            fn((blocks,), (THREADS,), (x, y, np.int32(iters), blk, sc))
        end.record()
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end) * 1000.0 / launches

    batch(plain, placeholder, placeholder)  # warm-up: load both modules
    batch(rec, block_rows, scopes)
    times: dict[str, list[float]] = {"plain": [], "instrumented": []}
    for _ in range(repeats):
        times["plain"].append(batch(plain, placeholder, placeholder))
        scopes[1] = 0  # the slot counter back to the start: every launch of the batch finds room
        scopes[3] = 0
        cupy.cuda.get_current_stream().synchronize()
        times["instrumented"].append(batch(rec, block_rows, scopes))
        claimed, dropped = (int(v) for v in scopes[1:4:2].get())
        if dropped or claimed != per_launch * launches:
            raise RuntimeError(f"the instrumented batch claimed {claimed:,} slots (expected {per_launch * launches:,}) "
                               f"and dropped {dropped:,} records: its timing is not of complete recording")
    p, i = statistics.median(times["plain"]), statistics.median(times["instrumented"])
    return {"blocks": blocks, "threads": THREADS, "iters": iters, "launches_per_batch": launches,
            "batches": repeats, "records_per_launch": warps * 2 * len(NAMES), "plain_us": p, "instrumented_us": i,
            "overhead_pct": 100.0 * (i / p - 1.0), "plain_range_us": [min(times["plain"]), max(times["plain"])],
            "instrumented_range_us": [min(times["instrumented"]), max(times["instrumented"])],
            "registers": {"plain": plain.num_regs, "instrumented": rec.num_regs}, "times_us": times}


def device_line() -> str:
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    driver = cupy.cuda.runtime.driverGetVersion()
    runtime = cupy.cuda.runtime.runtimeGetVersion()
    return (f"**{name}** (CUDA driver API {driver // 1000}.{driver % 1000 // 10}, runtime {runtime // 1000}."
            f"{runtime % 1000 // 10}), cupy {cupy.__version__}")


def section(rows: list[dict], device: str, date: str) -> str:
    lines = [SECTION, "",
             f"Measured on {device} on **{date}** with `python scripts/cuda_scopes_overhead.py`. Clocks were left "
             "as they were.", "",
             f"Kernel: `four_phases` in that script, {THREADS} threads a block, four scopes per warp (load, compute, "
             "reduce, store: eight records, one slot claim) plus the block recorder, built plain and with "
             "`-DKS_RECORD` by NVRTC. Per launch: CUDA events around a batch of back-to-back launches divided by "
             "the launch count; the median batch of each build, batches alternating.", "",
             "| blocks | FMAs per value | records / launch | registers (plain / instrumented) | plain µs | "
             "instrumented µs | overhead | plain range µs |",
             "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['blocks']:,} | {r['iters']:,} | {r['records_per_launch']:,} | "
                     f"{r['registers']['plain']} / {r['registers']['instrumented']} | {r['plain_us']:.2f} | "
                     f"{r['instrumented_us']:.2f} | **{r['overhead_pct']:+.2f} %** | "
                     f"{r['plain_range_us'][0]:.2f} – {r['plain_range_us'][1]:.2f} |")
    lines += ["", "overhead = 100 × (median instrumented / median plain − 1). Where it is smaller than the plain "
              "build's own range over its batches, no cost could be told from run-to-run variation.", ""]
    return "\n".join(lines)


def write_section(path: Path, text: str) -> str:
    old = path.read_text() if path.exists() else ""
    pattern = re.compile(re.escape(SECTION) + r".*?(?=^## |\Z)", re.S | re.M)
    new = pattern.sub(lambda _: text, old) if pattern.search(old) else old.rstrip("\n") + "\n\n" + text
    path.write_text(new)
    return new


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", default=str(ROOT / "benchmarks" / "results" / "instrumentation_overhead.md"))
    p.add_argument("--copy-to", default=None, help="also write the results file and the raw times (JSON) here")
    p.add_argument("--blocks", type=int, default=132 * 16)
    p.add_argument("--iters", default="256,32", help="FMAs per value, one row each")
    a = p.parse_args(argv)
    try:
        import cupy  # noqa: F401
    except ImportError:
        print("cuda_scopes_overhead: needs cupy and an NVIDIA GPU", file=sys.stderr)
        return 2
    rows = [measure(a.blocks, int(it)) for it in a.iters.split(",")]
    date = dt.datetime.now(dt.timezone.utc).date().isoformat()
    text = section(rows, device_line(), date)
    print(text)
    full = write_section(Path(a.results), text)
    if a.copy_to:
        out = Path(a.copy_to)
        out.mkdir(parents=True, exist_ok=True)
        (out / "instrumentation_overhead.md").write_text(full)
        (out / "cuda_scopes_overhead.json").write_text(json.dumps({"date": date, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
