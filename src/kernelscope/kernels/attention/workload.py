"""One attention configuration as a workload: ``python -m kernelscope.kernels.attention.workload``.

`kernelscope profile attention` runs this module under the trace pass. The
first call (compilation, cuDNN plan) runs before the timed calls; the timed
calls run inside the region ``attention/<impl>`` so the session can tell them
apart. ``--print-config`` only runs the Triton autotuner and prints the chosen
config, so the profiled run can pin it and the trace holds no tuning launches.
"""
from __future__ import annotations

import argparse
import json
import sys
from functools import partial

import torch

from kernelscope.collect.trace.regions import region
from kernelscope.kernels.attention import IMPLEMENTATIONS, get_impl

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m kernelscope.kernels.attention.workload",
                                description="Run one attention forward configuration.")
    p.add_argument("--impl", default="flash", choices=IMPLEMENTATIONS)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq-len", type=int, default=1024)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--causal", action="store_true")
    p.add_argument("--dtype", default="fp16", choices=tuple(DTYPES))
    p.add_argument("--iters", type=int, default=10, help="timed calls inside the region")
    p.add_argument("--config", metavar="BM,BN,WARPS,STAGES[,ws] | gluon",
                   help="pin the flash kernel's launch config (ws: the warp-specialised kernel), or 'gluon': the "
                        "Gluon kernel, the default on sm_90 where it applies")
    p.add_argument("--print-config", action="store_true", help="autotune flash, print the config as JSON, exit")
    p.add_argument("--device", default="cuda")
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def _fn(args: argparse.Namespace):
    if args.impl == "flash" and args.config == "gluon":
        from kernelscope.kernels.attention.gluon_hopper import hopper_attention

        return hopper_attention
    if args.impl == "flash" and args.config:
        from kernelscope.kernels.attention.flash import FlashConfig, flash_attention

        fields = args.config.split(",")
        bm, bn, warps, stages = (int(x) for x in fields[:4])
        return partial(flash_attention, config=FlashConfig(bm, bn, warps, stages, fields[4:] == ["ws"]))
    return get_impl(args.impl)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    gen = torch.Generator(device=args.device).manual_seed(args.seed)
    shape = (args.batch, args.heads, args.seq_len, args.head_dim)
    q, k, v = (torch.randn(shape, generator=gen, device=args.device, dtype=DTYPES[args.dtype]) for _ in range(3))
    fn = _fn(args)
    out = fn(q, k, v, args.causal)  # compile / tune / plan outside the region
    if args.print_config:
        from kernelscope.kernels.attention.flash import tuned_config

        from kernelscope.kernels.attention.flash import gluon_runs

        if args.impl == "flash" and gluon_runs(q, k, v):  # the default path ran the Gluon kernel: no tuning
            print(json.dumps({"config": "gluon"}))
            return 0
        cfg = None
        if args.impl == "flash":  # the warp-specialised tuner ran if this GPU takes that kernel
            cfg = (tuned_config(args.head_dim, args.causal, args.seq_len, warp_specialize=True)
                   or tuned_config(args.head_dim, args.causal, args.seq_len))
        print(json.dumps({"config": None if cfg is None else
                          f"{cfg.block_m},{cfg.block_n},{cfg.num_warps},{cfg.num_stages}"
                          + (",ws" if cfg.warp_specialize else "")}))
        return 0
    with region(f"attention/{args.impl}"):
        for _ in range(args.iters):
            out = fn(q, k, v, args.causal)
    if args.device == "cuda":
        torch.cuda.synchronize()
    print(f"attention/{args.impl} B={args.batch} H={args.heads} S={args.seq_len} D={args.head_dim} "
          f"{'causal' if args.causal else 'full'} {args.dtype}: {args.iters} calls, "
          f"output checksum {float(out.float().sum()):.4g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
