"""One W4A16 point for `kernelscope run --counters`: the kernel at one shape, m and launch configuration,
called a few times inside a kernelscope.region that declares its work (FLOPs and the bytes floor).

    kernelscope run --counters --kernel _w4a16_kernel -o s.json -- \
        python3 benchmarks/w4a16/profile_point.py --k 8192 --n 8192 --m 1 --config '{"split_k": 8, ...}'

``--gluon``: the Gluon decode kernel instead (`--kernel _w4a16_gluon`), its launch tune_space.gluon_launch updated
by ``--config`` (w4a16_matmul keyword arguments); ``--config '{"layout": "bk"}'`` reads the Triton kernel's
weights instead of to_gluon_layout's.
"""
from __future__ import annotations

import argparse
import json

import torch

import kernelscope
from kernelscope.collect.timing import L2Flush
from kernelscope.bench.w4a16 import W4A16Case, make_weights
from kernelscope.kernels.marlin import to_kernel_layout, w4a16_matmul


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=8192)
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--m", type=int, default=1)
    ap.add_argument("--config", default="{}", help="w4a16_matmul keyword arguments as JSON")
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--gluon", action="store_true", help="the Gluon decode kernel (kernels/marlin/gluon_hopper.py)")
    args = ap.parse_args()
    wt = make_weights(args.k, args.n, 128, "cuda", 0)
    bk, sk = to_kernel_layout(wt.B, wt.s, 128)
    a = torch.randn((args.m, args.k), device="cuda").half()
    cfg = json.loads(args.config)
    if args.gluon:
        from kernelscope.kernels.marlin.gluon_args import kernel_kwargs
        from kernelscope.kernels.marlin.gluon_hopper import gluon_w4a16, to_gluon_layout
        from kernelscope.kernels.marlin.tune_space import gluon_launch

        cfg = {**gluon_launch(args.k, args.n, torch.cuda.get_device_properties(0).multi_processor_count, args.m), **cfg}
        if cfg.pop("layout", "bg") == "bk":
            call = lambda: w4a16_matmul(a, bk, sk, 128, **cfg)  # noqa: E731
        else:
            bg = to_gluon_layout(bk)
            call = lambda: gluon_w4a16(a, bg, sk, 128, args.n, **kernel_kwargs(cfg))  # noqa: E731
    else:
        call = lambda: w4a16_matmul(a, bk, sk, 128, **cfg)  # noqa: E731
    case = W4A16Case(args.m, args.k, args.n)
    flush = L2Flush()
    for _ in range(args.calls):
        flush()  # weights come from DRAM, as in the benchmark
        with kernelscope.region("w4a16", flops=2 * args.m * args.k * args.n, bytes=case.bytes_moved):
            call()
    torch.cuda.synchronize()
    print(f"profile_point: {'gluon' if args.gluon else 'triton'} m={args.m} k={args.k} n={args.n} config={cfg}")


if __name__ == "__main__":
    main()
