"""`kernelscope tune w4a16`: pre-tune the W4A16 launch for layer shapes and token counts on this GPU.

The launches go into the per-device tuning cache that the kernel reads on every call
(:mod:`kernelscope.kernels.marlin.autotune`), so a model's first forward does not tune.
"""
from __future__ import annotations

import argparse
import sys

from kernelscope.cli.common import fail, positive, require_gpu


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 seconds, got {text}")
    return value


def register(sub: argparse._SubParsersAction) -> None:
    t = sub.add_parser("tune", help="pre-tune kernel launches on this GPU (kernelscope tune w4a16 --help)",
                       description="Tune kernel launches for given shapes on this GPU and keep them in the "
                                   "per-device cache (~/.cache/kernelscope or $KERNELSCOPE_CACHE_DIR).")
    t.set_defaults(func=lambda args: (t.print_help(sys.stderr), 2)[1])
    kinds = t.add_subparsers(dest="kernel", metavar="KERNEL")
    w = kinds.add_parser("w4a16", help="the Triton W4A16 GEMM on Marlin INT4 weights",
                         description="Tune the W4A16 launch per layer shape KxN and token count m (bucketed to the "
                                     "next power of two); every candidate is checked against the fp32 reference "
                                     "before it is timed.")
    w.add_argument("--shapes", required=True, metavar="LIST", help="comma-separated KxN layer shapes")
    w.add_argument("--m", default="1,16,64,128", metavar="LIST", help="comma-separated token counts "
                                                                      "(default 1,16,64,128)")
    w.add_argument("--groupsize", type=int, default=128, help="rows per scale: 128, or -1 for one (default 128)")
    w.add_argument("--deadline", type=_seconds, default=30.0, help="seconds per shape and m (default 30)")
    w.add_argument("--candidates", type=positive, default=10, help="launches tried at most per point (default 10)")
    w.add_argument("--retune", action="store_true", help="tune again points the cache already holds")
    w.set_defaults(func=main_w4a16)


def main_w4a16(args: argparse.Namespace) -> int:
    require_gpu("tune w4a16", "times kernel launches", "torch", "triton")
    from kernelscope.bench.w4a16 import make_cases, parse_shapes
    from kernelscope.cli.bench.common import int_list

    ms = int_list(args.m, "--m")
    try:
        cases = make_cases(ms, parse_shapes(args.shapes), args.groupsize)
    except ValueError as e:
        fail(str(e))
    import torch

    if not torch.cuda.is_available():  # the interpreter's times say nothing about a GPU's launches
        fail("kernelscope tune times kernel launches on an NVIDIA GPU, and PyTorch sees no CUDA GPU here")
    from kernelscope.bench.w4a16_impls import make_weights
    from kernelscope.kernels.marlin import autotune, to_kernel_layout

    done: dict[tuple[int, int], tuple] = {}
    for case in cases:
        if (case.k, case.n) not in done:
            wt = make_weights(case.k, case.n, case.groupsize, "cuda", 0)
            done.clear()  # one shape's weights on the GPU at a time
            done[(case.k, case.n)] = to_kernel_layout(wt.B, wt.s, wt.groupsize)
        words, scales = done[(case.k, case.n)]
        if args.retune:
            autotune.forget(case.m, case.k, case.n, case.groupsize, words)
        choice = autotune.launch_for(case.m, case.k, case.n, case.groupsize, words, scales, tune=True,
                                     deadline_s=args.deadline, limit=args.candidates)
        print(f"k={case.k} n={case.n} m={case.m} (bucket m<={autotune.m_bucket(case.m)}): {choice.launch} "
              f"from {choice.source}")
    return 0
