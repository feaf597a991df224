"""What kernelscope.cuh's warp phase scopes cost: one kernel, built plain and with -DKS_RECORD, timed on a GPU.

    python scripts/cuda_scopes_overhead.py [--results benchmarks/results/RESULTS.md] [--copy-to DIR]

The kernel has four scopes per warp (load, compute, reduce, store: eight records,
one slot claim per warp) and the block recorder; two variants leave out one of them. Each warp loads 16 float4 per
lane, runs ``iters`` FMAs on each value, sums them across the warp and stores
them; two settings of ``iters`` give long and short phases, because the
recorder's cost is per record, not per unit of work.

Timing: CUDA events around a batch of back-to-back launches (the kernel is
GPU-bound, so the batch time over the launch count is the kernel's time),
plain and instrumented batches alternating, the median batch of each. The
instrumented launches of a batch share one buffer with room for all of their
records, so none is dropped (checked after the run). Writes (replacing a
previous one) the subsection "CUDA C++ phase scopes" of the results file, with the
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

SECTION = "### CUDA C++ phase scopes (kernelscope.cuh)"
NAMES = {0: "load", 1: "compute", 2: "reduce", 3: "store"}
VECS = 16  # float4 per lane
THREADS = 256

VARIANTS = {"scopes + blocks": (), "scopes only": ("-DONLY_SCOPES",), "blocks only": ("-DONLY_BLOCKS",)}

SOURCE = r"""
#include "kernelscope.cuh"

// the variants: -DONLY_SCOPES leaves out the block recorder, -DONLY_BLOCKS the scopes
#if defined(ONLY_BLOCKS)
#define SCOPE_BEGIN(i) ((void)0)
#define SCOPE_END(i) ((void)0)
#else
#define SCOPE_BEGIN(i) KS_SCOPE_BEGIN(i)
#define SCOPE_END(i) KS_SCOPE_END(i)
#endif
#if defined(ONLY_SCOPES)
#define BLOCK_BEGIN() ((void)0)
#define BLOCK_END(r) ((void)(r))
#else
#define BLOCK_BEGIN() KS_BLOCK_BEGIN()
#define BLOCK_END(r) KS_BLOCK_END(r)
#endif

extern "C" __global__ void four_phases(const float4* __restrict__ x, float* __restrict__ y, int iters,
                                       long long* ks_blocks, long long* ks_scopes) {
    BLOCK_BEGIN();
    KS_SCOPES_INIT(ks_scopes);
    const long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    const int lane = threadIdx.x & 31;
    float4 v[16];
    SCOPE_BEGIN(0);
    #pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = x[warp * (16 * 32) + i * 32 + lane];
    float s = 0.f;
    #pragma unroll
    for (int i = 0; i < 16; ++i) s += v[i].x;  // use the loads inside the scope: they have landed at its end
    SCOPE_END(0);
    SCOPE_BEGIN(1);
    for (int k = 0; k < iters; ++k) {
        #pragma unroll
        for (int i = 0; i < 16; ++i) {
            v[i].x = fmaf(v[i].x, 0.999f, 0.001f); v[i].y = fmaf(v[i].y, 0.999f, 0.001f);
            v[i].z = fmaf(v[i].z, 0.999f, 0.001f); v[i].w = fmaf(v[i].w, 0.999f, 0.001f);
        }
    }
    SCOPE_END(1);
    SCOPE_BEGIN(2);
    #pragma unroll
    for (int i = 0; i < 16; ++i) s += v[i].x + v[i].y + v[i].z + v[i].w;
    #pragma unroll
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    SCOPE_END(2);
    SCOPE_BEGIN(3);
    y[warp * 32 + lane] = s;
    SCOPE_END(3);
    BLOCK_END(ks_blocks);
}
"""


def build(record: bool, extra: tuple[str, ...] = (), include: str | None = None):
    """The kernel, plain or recording; ``include``: the folder of another copy of the header (to compare two)."""
    import cupy

    options = compile_options(record)
    if include:
        options = (f"-I{include}",) + options[1:]
    return cupy.RawModule(code=SOURCE, options=(*options, *extra)).get_function("four_phases")


def _armed_buffer(cupy, capacity: int):
    buf = cupy.zeros(HEADER_VALUES + RECORD_VALUES * capacity, dtype=cupy.int64)
    buf[:HEADER_VALUES] = cupy.asarray([capacity, 0, SCOPES_MAGIC, 0], dtype=cupy.int64)
    return buf


def measure(blocks: int, iters: int, launches: int = 50, repeats: int = 15, include: str | None = None) -> dict:
    """Per-launch times (µs) of the plain build and of each instrumented variant, batches alternating; the medians
    and overheads, with the scope buffers checked: every record of every launch written, none dropped."""
    import cupy
    import numpy as np

    plain = build(False, include=include)
    variants = {name: build(True, extra, include) for name, extra in VARIANTS.items()}
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

    batch(plain, placeholder, placeholder)  # warm-up: load the modules
    for fn in variants.values():
        batch(fn, block_rows, scopes)
    times: dict[str, list[float]] = {"plain": [], **{name: [] for name in variants}}
    for _ in range(repeats):
        times["plain"].append(batch(plain, placeholder, placeholder))
        for name, fn in variants.items():
            scopes[1] = 0  # the slot counter back to the start: every launch of the batch finds room
            scopes[3] = 0
            cupy.cuda.get_current_stream().synchronize()
            times[name].append(batch(fn, block_rows, scopes))
            claimed, dropped = (int(v) for v in scopes[1:4:2].get())
            want = 0 if name == "blocks only" else per_launch * launches
            if dropped or claimed != want:
                raise RuntimeError(f"{name}: a batch claimed {claimed:,} slots (expected {want:,}) and dropped "
                                   f"{dropped:,} records: its timing is not of complete recording")
    p = statistics.median(times["plain"])
    out = {name: {"us": statistics.median(t), "overhead_pct": 100.0 * (statistics.median(t) / p - 1.0),
                  "range_us": [min(t), max(t)], "registers": variants[name].num_regs}
           for name, t in times.items() if name != "plain"}
    full = out["scopes + blocks"]
    return {"blocks": blocks, "threads": THREADS, "iters": iters, "launches_per_batch": launches,
            "batches": repeats, "records_per_launch": warps * 2 * len(NAMES), "plain_us": p,
            "plain_range_us": [min(times["plain"]), max(times["plain"])], "plain_registers": plain.num_regs,
            "instrumented_us": full["us"], "overhead_pct": full["overhead_pct"], "variants": out,
            "times_us": times}


def device_line() -> str:
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    driver = cupy.cuda.runtime.driverGetVersion()
    runtime = cupy.cuda.runtime.runtimeGetVersion()
    return (f"**{name}** (CUDA driver API {driver // 1000}.{driver % 1000 // 10}, runtime {runtime // 1000}."
            f"{runtime % 1000 // 10}), cupy {cupy.__version__}")


def section(rows: list[dict], device: str, date: str) -> str:
    names = list(VARIANTS)
    lines = [SECTION, "",
             f"Measured on {device} on **{date}** with `python scripts/cuda_scopes_overhead.py`. Clocks were left "
             "as they were.", "",
             f"Kernel: `four_phases` in that script, {THREADS} threads a block, four scopes per warp (load, compute, "
             "reduce, store: eight records, one slot claim) and the block recorder, built plain and with "
             "`-DKS_RECORD` by NVRTC; the variants leave out the block recorder or the scopes. Each warp loads 16 "
             "float4 a lane, runs the FMAs on each value, sums across the warp and stores. Per launch: CUDA events "
             "around a batch of back-to-back launches divided by the launch count; the median batch of each build, "
             "batches alternating; every record of every launch was written (none dropped).", "",
             "| blocks | FMAs per value | records / launch | plain µs (range) | "
             + " | ".join(names) + " | registers (plain / " + " / ".join(names) + ") |",
             "| ---: | ---: | ---: | ---: | " + " | ".join("---:" for _ in names) + " | ---: |"]
    for r in rows:
        v = r["variants"]
        cells = [f"{v[n]['us']:.2f} µs (**{v[n]['overhead_pct']:+.2f} %**)" for n in names]
        regs = " / ".join(str(v[n]["registers"]) for n in names)
        lines.append(f"| {r['blocks']:,} | {r['iters']:,} | {r['records_per_launch']:,} | {r['plain_us']:.2f} "
                     f"({r['plain_range_us'][0]:.2f} – {r['plain_range_us'][1]:.2f}) | " + " | ".join(cells)
                     + f" | {r['plain_registers']} / {regs} |")
    lines += ["", "overhead = 100 × (median instrumented / median plain − 1). Where it is smaller than the plain "
              "build's own range over its batches, no cost could be told from run-to-run variation. Both rows "
              "write the same records per launch; they differ in the work between them.", ""]
    return "\n".join(lines)


def write_section(path: Path, text: str) -> str:
    old = path.read_text() if path.exists() else ""
    pattern = re.compile(re.escape(SECTION) + r".*?(?=^#{1,3} |\Z)", re.S | re.M)  # up to the next heading
    new = pattern.sub(lambda _: text, old) if pattern.search(old) else old.rstrip("\n") + "\n\n" + text
    path.write_text(new)
    return new


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--results", default=None,
                   help="the results file (default benchmarks/results/RESULTS.md; with "
                        "--include-dir, none unless given)")
    p.add_argument("--copy-to", default=None, help="also write the results file and the raw times (JSON) here")
    p.add_argument("--blocks", type=int, default=132 * 16)
    p.add_argument("--iters", default="256,32", help="FMAs per value, one row each")
    p.add_argument("--include-dir", default=None, help="the folder of another kernelscope.cuh to measure instead")
    a = p.parse_args(argv)
    try:
        import cupy  # noqa: F401
    except ImportError:
        print("cuda_scopes_overhead: needs cupy and an NVIDIA GPU", file=sys.stderr)
        return 2
    rows = [measure(a.blocks, int(it), include=a.include_dir) for it in a.iters.split(",")]
    date = dt.datetime.now(dt.timezone.utc).date().isoformat()
    text = section(rows, device_line(), date)
    if a.include_dir:
        note = f"Header measured: `{a.include_dir}/kernelscope.cuh`, not the shipped one."
        text = text.replace("\n\n", f"\n\n{note}\n\n", 1)
    print(text)
    results = a.results or (None if a.include_dir else str(ROOT / "benchmarks" / "results" / "RESULTS.md"))
    full = write_section(Path(results), text) if results else text
    if a.copy_to:
        out = Path(a.copy_to)
        out.mkdir(parents=True, exist_ok=True)
        (out / "RESULTS.md").write_text(full)
        (out / "cuda_scopes_overhead.json").write_text(json.dumps({"date": date, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
