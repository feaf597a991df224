"""Where the time of one W4A16 launch goes across its programs: kernelscope's block recorder on the kernel.

    kernelscope run -o blocks.json -- python3 benchmarks/w4a16/block_timeline.py --points 8192x8192x1,28672x8192x1
    kernelscope show blocks.json --kernel _w4a16_kernel

Each point runs the tuned launch of this GPU (configs.choose_launch), L2 flushed before every call: two
plain calls, then one call whose programs write the SM they ran on and their start and end time
(%globaltimer). The records go into the session (the Block -> SM layout panel, measured); this script
also prints, per point, the span of the launch and how it divides: from the first program's start to
the last one's, the programs' own durations, and from the last start to the end.
"""
from __future__ import annotations

import argparse
import statistics

import torch

from kernelscope.collect.timing import L2Flush
from kernelscope.bench.w4a16 import make_weights
from kernelscope.collect.instrument.recorder import BlockRecorder
from kernelscope.kernels.marlin import launch_grid, tma_supported, to_kernel_layout, w4a16_matmul
from kernelscope.kernels.marlin.configs import choose_launch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", default="8192x8192x1,28672x8192x1", help="KxNxM,...")
    args = ap.parse_args()
    flush = L2Flush()
    name = torch.cuda.get_device_name()
    tma = tma_supported("cuda")
    for point in args.points.split(","):
        k, n, m = (int(x) for x in point.split("x"))
        wt = make_weights(k, n, 128, "cuda", 0)
        bk, sk = to_kernel_layout(wt.B, wt.s, 128)
        a = torch.randn((m, k), device="cuda").half()
        choice = choose_launch(m, k, n, 128, name, tma)
        lc = choice.launch
        for _ in range(2):
            flush()
            w4a16_matmul(a, bk, sk, 128, **lc)
        rec = BlockRecorder(launch_grid(m, n, lc["block_m"], lc["block_n"], lc.get("split_k", 1)))
        flush()
        w4a16_matmul(a, bk, sk, 128, recorder=rec, **lc)
        r = rec.submit("_w4a16_kernel")
        t0 = min(r.start_ns)
        dur = [e - s for s, e in zip(r.start_ns, r.end_ns)]
        print(f"{k}x{n} m={m} launch {lc} ({choice.source})")
        print(f"  {len(r)} of {r.expected_blocks} programs recorded on {len(set(r.smid))} SMs; "
              f"first start to last end {(max(r.end_ns) - t0) / 1e3:.1f} us; "
              f"last program started {(max(r.start_ns) - t0) / 1e3:.1f} us after the first; "
              f"program duration median {statistics.median(dur) / 1e3:.1f} us "
              f"(min {min(dur) / 1e3:.1f}, max {max(dur) / 1e3:.1f}); "
              f"first end {(min(r.end_ns) - t0) / 1e3:.1f} us", flush=True)
        del wt, bk, sk
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
