"""Host time of one eager gluon_w4a16 call, plain and in clusters (the cluster launch binds its arguments twice).

    PYTHONPATH=src python3 benchmarks/w4a16/host_overhead.py

A 4096x4096 layer at m = 1 (about 7 us of GPU time a call), 2000 calls back to back after a warm-up: the host issues
calls faster than the GPU runs them only if its time a call is below the GPU's, so the wall time a call is the
larger of the two; the table gives it per launch, with the GPU's graph time a call for comparison.
"""
from __future__ import annotations

import statistics
import sys
import time


def main() -> int:
    import torch

    from kernelscope.bench.graph_timing import time_cuda_graph
    from kernelscope.bench.w4a16_impls import make_weights
    from kernelscope.kernels.marlin import to_kernel_layout
    from kernelscope.kernels.marlin.gluon_hopper import gluon_w4a16

    k = n = 4096
    wt = make_weights(k, n, 128, "cuda", 1)
    bk, sk = to_kernel_layout(wt.B, wt.s, 128)
    a = torch.randn((1, k), device="cuda").half()
    out = torch.empty((1, n), device="cuda", dtype=torch.float16)
    print(f"{torch.cuda.get_device_name()}, {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
    print("| launch | wall us a call (eager, median of 5 x 2000) | graph us a call |\n|---|---:|---:|")
    for name, kw in [("128 programs", dict(programs=128, stages=6, sync_mma=True)),
                     ("128 programs, clusters of 2", dict(programs=128, stages=6, sync_mma=True, cluster=2))]:
        def call(kw=kw):
            return gluon_w4a16(a, bk, sk, 128, n, out=out, **kw)
        for _ in range(50):
            call()
        torch.cuda.synchronize()
        walls = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(2000):
                call()
            torch.cuda.synchronize()
            walls.append((time.perf_counter() - t0) / 2000 * 1e6)
        graph = time_cuda_graph([call], replays=10).median_ms * 1e3
        print(f"| {name} | {statistics.median(walls):.1f} | {graph:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
