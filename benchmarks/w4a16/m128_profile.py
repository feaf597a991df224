"""Launches at one (k, n, m) point for Nsight Compute: the Triton kernel's launch (autotune.launch_for), Gluon
launches given as JSON, and cuBLAS fp16, each called ``--calls`` times (profile with ``ncu --launch-skip`` to skip
the first, compiling call).

    ncu --clock-control none --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats \
        python3 benchmarks/w4a16/m128_profile.py --k 4096 --n 4096 --m 128 \
        --gluon '[{"programs": 128, "stages": 3, "maxnreg": 168}, {"programs": 128, "block_n": 128}]'
"""
from __future__ import annotations

import argparse
import json

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--m", type=int, default=128)
    ap.add_argument("--gluon", default="[]", help="gluon_w4a16 keyword arguments, a JSON list")
    ap.add_argument("--calls", type=int, default=2)
    args = ap.parse_args()
    from kernelscope.bench.w4a16_impls import make_weights
    from kernelscope.kernels.marlin import to_kernel_layout, w4a16_matmul
    from kernelscope.kernels.marlin.autotune import launch_for
    from kernelscope.kernels.marlin.gluon_hopper import gluon_w4a16, to_gluon_layout

    wt = make_weights(args.k, args.n, 128, "cuda", 0)
    bk, sk = to_kernel_layout(wt.B, wt.s, 128)
    bg = to_gluon_layout(bk)
    a = torch.randn((args.m, args.k), device="cuda").half()
    w16 = torch.randn(args.k, args.n, device="cuda").half()  # cuBLAS's operand: its values do not matter here
    launch = launch_for(args.m, args.k, args.n, 128, bk, sk).launch
    print("triton launch", launch, flush=True)
    for _ in range(args.calls):
        w4a16_matmul(a, bk, sk, 128, **launch)
    for kw in json.loads(args.gluon):
        for _ in range(args.calls):
            gluon_w4a16(a, bg, sk, 128, args.n, **kw)
    for _ in range(args.calls):
        torch.matmul(a, w16)
    torch.cuda.synchronize()


if __name__ == "__main__":
    main()
