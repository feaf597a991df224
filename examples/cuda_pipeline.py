"""A software pipeline inside a CUDA C++ kernel, seen with kernelscope's warp phase scopes.

Each warp streams its share of a vector through shared memory in stages: copy a
stage in (``cp.async``), compute on it (a chain of FMAs per value), store it.
Two kernels from one source:

- ``pipeline_serial``: load stage k, wait for it, compute, store; then stage k+1.
- ``pipeline_overlap``: double buffering. Before computing stage k, the warp
  starts copying stage k+1 into the other buffer, so the copy is in flight
  while it computes; it waits for it only at the top of the next stage.

The kernel marks three scopes per stage with ``KS_SCOPE_BEGIN`` / ``KS_SCOPE_END``
(kernelscope.cuh): "load" from issuing a stage's copies to the moment they have
landed, "compute", and "store" (issuing the stores). In the serial kernel they
follow each other; in the pipelined one each "load" spans the previous stage's
compute and store, and the Kernel timeline panel measures that overlap (per
block, between any of its warps: with the default one warp per block it is the
warp's own pipeline; with ``--warps 4`` the serial kernel's warps overlap one
another too, the other way a GPU hides a copy's latency)::

    kernelscope run -o p.json -- python examples/cuda_pipeline.py
    kernelscope show p.json --kernel pipeline

Needs an NVIDIA GPU of compute capability 8.0 or newer (``cp.async``) and cupy,
which compiles the kernel with NVRTC: ``kernelscope.collect.instrument.cuda_scopes.compile_options()``
adds ``-I<kernelscope include-dir>`` and ``-DKS_RECORD``; without ``-DKS_RECORD`` the
macros compile to nothing, and that build is the one timed below.
"""
from __future__ import annotations

import argparse
import statistics
import sys
from typing import Any

from kernelscope.collect.instrument.cuda_scopes import CudaRecords, CudaScopes, compile_options

NAMES = {0: "load", 1: "compute", 2: "store"}
KERNELS = ("pipeline_serial", "pipeline_overlap")
VECS = 4  # 16-byte copies per lane per stage: 2 KiB a warp a stage
TILE_BYTES = 2 * VECS * 32 * 16  # shared memory per warp: two stages

SOURCE = r"""
#include "kernelscope.cuh"

#define LOAD 0
#define COMPUTE 1
#define STORE 2
#define VECS 4

__device__ __forceinline__ unsigned shared_u32(const void* p) {
    unsigned a;
    asm volatile("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
    return a;
}

// One warp's stage: each lane copies VECS float4s (coalesced across the warp) and later reads back only its own.
__device__ __forceinline__ void copy_stage(float4* tile, const float4* src, int lane) {
    #pragma unroll
    for (int i = 0; i < VECS; ++i)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;"
                     :: "r"(shared_u32(tile + i * 32 + lane)), "l"(src + i * 32 + lane) : "memory");
    asm volatile("cp.async.commit_group;" ::: "memory");
}

__device__ __forceinline__ void wait_copies() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

template <bool PIPELINED>
__device__ void pipeline(const float4* __restrict__ x, float4* __restrict__ y, int stages, int iters,
                         long long* ks_blocks, long long* ks_scopes) {
    KS_BLOCK_BEGIN();
    KS_SCOPES_INIT(ks_scopes);
    extern __shared__ __align__(16) float4 tiles[];  // per warp: two stages of VECS * 32 float4s
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    float4* mine = tiles + warp * 2 * (VECS * 32);
    const long long first = ((long long)blockIdx.x * (blockDim.x >> 5) + warp) * stages * (VECS * 32);
    const float4* src = x + first;
    float4* dst = y + first;
    if (PIPELINED) {  // the first stage's copy starts before the loop
        KS_SCOPE_BEGIN(LOAD);
        copy_stage(mine, src, lane);
    }
    for (int s = 0; s < stages; ++s) {
        float4* cur = mine + (PIPELINED ? (s & 1) : 0) * (VECS * 32);
        if (!PIPELINED) {
            KS_SCOPE_BEGIN(LOAD);
            copy_stage(cur, src + s * (VECS * 32), lane);
        }
        wait_copies();  // stage s has landed (the only copy in flight)
        KS_SCOPE_END(LOAD);
        if (PIPELINED && s + 1 < stages) {  // stage s+1 flies while stage s is computed and stored
            KS_SCOPE_BEGIN(LOAD);
            copy_stage(mine + ((s + 1) & 1) * (VECS * 32), src + (s + 1) * (VECS * 32), lane);
        }
        KS_SCOPE_BEGIN(COMPUTE);
        float4 v[VECS];
        #pragma unroll
        for (int i = 0; i < VECS; ++i) v[i] = cur[i * 32 + lane];
        for (int k = 0; k < iters; ++k) {
            #pragma unroll
            for (int i = 0; i < VECS; ++i) {
                v[i].x = fmaf(v[i].x, 0.999f, 0.001f);
                v[i].y = fmaf(v[i].y, 0.999f, 0.001f);
                v[i].z = fmaf(v[i].z, 0.999f, 0.001f);
                v[i].w = fmaf(v[i].w, 0.999f, 0.001f);
            }
        }
        KS_SCOPE_END(COMPUTE);
        KS_SCOPE_BEGIN(STORE);
        #pragma unroll
        for (int i = 0; i < VECS; ++i) dst[s * (VECS * 32) + i * 32 + lane] = v[i];
        KS_SCOPE_END(STORE);
    }
    KS_BLOCK_END(ks_blocks);
}

extern "C" __global__ void pipeline_serial(const float4* x, float4* y, int stages, int iters,
                                           long long* ks_blocks, long long* ks_scopes) {
    pipeline<false>(x, y, stages, iters, ks_blocks, ks_scopes);
}

extern "C" __global__ void pipeline_overlap(const float4* x, float4* y, int stages, int iters,
                                            long long* ks_blocks, long long* ks_scopes) {
    pipeline<true>(x, y, stages, iters, ks_blocks, ks_scopes);
}
"""


def build(record: bool = True) -> Any:
    """Both kernels compiled with NVRTC (cupy.RawModule); ``record=False`` is the plain build."""
    import cupy

    return cupy.RawModule(code=SOURCE, options=compile_options(record))


def values(blocks: int, warps: int, stages: int) -> int:
    """float4s one launch reads (and writes)."""
    return blocks * warps * stages * VECS * 32


def launch(module: Any, kernel: str, x: Any, y: Any, blocks: int, warps: int, stages: int, iters: int,
           rec: CudaScopes | None) -> None:
    import cupy
    import numpy as np

    placeholder = cupy.zeros(1, dtype=cupy.int64) if rec is None else None
    module.get_function(kernel)((blocks,), (warps * 32,),
                                (x, y, np.int32(stages), np.int32(iters), rec.blocks if rec else placeholder,
                                 rec.scopes if rec else placeholder), shared_mem=warps * TILE_BYTES)


def record(module: Any, kernel: str, x: Any, y: Any, blocks: int, warps: int, stages: int, iters: int,
           submit: bool = True) -> CudaRecords:
    """One instrumented launch; its records handed to the session when ``submit`` (else only read)."""
    rec = CudaScopes((blocks, 1, 1), NAMES, block=warps * 32, scopes_per_warp=3 * stages, array="cupy")
    launch(module, kernel, x, y, blocks, warps, stages, iters, rec)
    out = rec.submit(kernel) if submit else rec.read()
    assert out is not None
    return out


def time_plain_us(module: Any, kernel: str, x: Any, y: Any, blocks: int, warps: int, stages: int, iters: int,
                  launches: int = 20, batches: int = 5) -> float:
    """One launch's time (µs), the plain build: CUDA events around ``launches`` back-to-back launches over their
    count, the median of ``batches`` such batches."""
    import cupy
    import numpy as np

    fn, placeholder = module.get_function(kernel), cupy.zeros(1, dtype=cupy.int64)
    args = (x, y, np.int32(stages), np.int32(iters), placeholder, placeholder)
    times = []
    for _ in range(batches):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record()
        for _ in range(launches):
            fn((blocks,), (warps * 32,), args, shared_mem=warps * TILE_BYTES)
        end.record()
        end.synchronize()
        times.append(cupy.cuda.get_elapsed_time(start, end) * 1000.0 / launches)
    return statistics.median(times)


def reference(x: Any, iters: int) -> Any:
    """What both kernels compute, by cupy in one elementwise launch (the same FMAs in the same order)."""
    import cupy

    k = cupy.ElementwiseKernel("float32 x, int32 n", "float32 y",
                               "float v = x; for (int i = 0; i < n; ++i) v = fmaf(v, 0.999f, 0.001f); y = v;",
                               "pipeline_reference")
    return k(x, cupy.int32(iters))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--blocks", type=int, default=1056, help="thread blocks (default 1056: 8 per SM of an H100)")
    p.add_argument("--warps", type=int, default=1, help="warps per block, 1 to 32")
    p.add_argument("--stages", type=int, default=16, help="stages each warp streams")
    p.add_argument("--iters", type=int, default=256, help="FMAs per value in the compute phase")
    a = p.parse_args(argv)
    if min(a.blocks, a.warps, a.stages, a.iters) < 1 or a.warps > 32:
        print("cuda_pipeline: --blocks, --stages and --iters are positive, --warps 1 to 32", file=sys.stderr)
        return 2
    try:
        import cupy
    except ImportError:
        print("cuda_pipeline: needs cupy (pip install cupy-cuda12x) and an NVIDIA GPU", file=sys.stderr)
        return 2
    from kernelscope.analyze.phases import summarize_phases

    n = values(a.blocks, a.warps, a.stages) * 4
    x = cupy.random.rand(n, dtype=cupy.float32)
    y = cupy.zeros_like(x)
    plain, instrumented = build(record=False), build(record=True)
    want = reference(x, a.iters)
    for kernel in KERNELS:
        launch(plain, kernel, x, y, a.blocks, a.warps, a.stages, a.iters, None)  # warm-up: load the module
        cupy.cuda.get_current_stream().synchronize()
        if not bool((y == want).all()):
            print(f"cuda_pipeline: {kernel} computed a wrong result (max error {float(abs(y - want).max()):.3g})",
                  file=sys.stderr)
            return 1
        us = time_plain_us(plain, kernel, x, y, a.blocks, a.warps, a.stages, a.iters)
        got = record(instrumented, kernel, x, y, a.blocks, a.warps, a.stages, a.iters)
        v = summarize_phases(got.scopes)
        print(f"{kernel}: {us:.1f} µs a launch (plain build, CUDA events over 20 launches, median of 5); one "
              "instrumented launch:")
        for ph in v.phases:
            print(f"  {ph.name:8s} {ph.per_warp_median / 1000:8.1f} µs per warp (median)")
        pairs = {(o.a, o.b): o.fraction_median for o in v.overlaps}
        lc = pairs.get(("load", "compute"), pairs.get(("compute", "load"), 0.0))
        print(f"  load and compute overlap {100 * lc:.0f}% of the block's span (median over blocks)")
        for problem in got.scopes.problems:
            print(f"  problem: {problem}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
