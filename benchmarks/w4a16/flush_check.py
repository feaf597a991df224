"""How the L2 flush before each timed call changes the measured time of a memory-bound GEMM.

    PYTHONPATH=src python3 benchmarks/w4a16/flush_check.py --out flush.json

Zeroing a buffer twice the size of L2 (the benchmark's flush until 09:21 UTC on 2026-11-22, also Triton's
do_bench's way) leaves L2 full of dirty lines: the timed call then pays for writing them
back to DRAM as it evicts them. Reading a second such buffer after the zeroing evicts them before the
timed call, still leaving no weight in L2. Modes: write (zero_ only), write+read, read (sum of a
buffer only), warm (no flush: weights may be L2 hits). Implementations are timed interleaved.
"""
from __future__ import annotations

import argparse
import json
import time

import torch

from kernelscope.collect.timing import time_cuda_interleaved
from kernelscope.bench.w4a16 import W4A16Case, make_weights
from kernelscope.bench.w4a16_impls import build_cublas, build_tinygemm
from kernelscope.kernels.marlin import to_kernel_layout, w4a16_matmul


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--points", default='[[8192, 8192, 1, {"split_k": 4, "num_stages": 4}]]',
                    help="JSON list of [k, n, m, w4a16 launch overrides]")
    ap.add_argument("--repeats", type=int, default=30)
    args = ap.parse_args()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    wbuf = torch.empty(2 * l2, dtype=torch.int8, device="cuda")
    rbuf = torch.ones(2 * l2 // 8, dtype=torch.int64, device="cuda")
    flushes = {"write": lambda: wbuf.zero_(), "write+read": lambda: (wbuf.zero_(), rbuf.sum()),
               "read": lambda: rbuf.sum(), "warm": None}
    base = dict(block_m=16, block_n=64, block_k=128, num_warps=4, num_stages=3, swap_ab=True, prefetch=0)
    rows = []
    for k, n, m, over in json.loads(args.points):
        wt = make_weights(k, n, 128, "cuda", 0)
        bk, sk = to_kernel_layout(wt.B, wt.s, 128)
        a = torch.randn((m, k), device="cuda").half()
        cfg = dict(base, **over)
        impls = {"w4a16": lambda: w4a16_matmul(a, bk, sk, 128, **cfg),
                 "cublas": (lambda f: lambda: f(a))(build_cublas(wt)),
                 "tinygemm": (lambda f: lambda: f(a))(build_tinygemm(wt))}
        floor_us = W4A16Case(m, k, n).bytes_moved / 3.0e12 * 1e6
        for mode, flush in flushes.items():
            timings = time_cuda_interleaved(impls, warmup=1, repeats=args.repeats, flush_l2=flush is not None,
                                            flush=flush)
            for name, t in timings.items():
                us = t.median_ms * 1e3
                rows.append(dict(k=k, n=n, m=m, flush=mode, impl=name, median_us=us, floor_us_at_3tbps=floor_us,
                                 launch=cfg if name == "w4a16" else None))
                print(f"{k}x{n} m={m} {mode:<11} {name:<9} {us:8.1f} us  floor@3TB/s {floor_us:6.1f} us", flush=True)
        del wt, bk, sk
    with open(args.out, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                   "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
