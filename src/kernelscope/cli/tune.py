"""`kernelscope tune w4a16`: pre-tune the W4A16 launch for layer shapes and token counts on this GPU, or rebuild
the shipped table.

The launches go into the per-device tuning cache that the first-use tuner reads
(:mod:`kernelscope.kernels.marlin.autotune`), so a model's first forward does not tune. ``--rebuild-table OUT``
tunes every point of the shipped table of this GPU (or of --shapes x --m) by graph time within ``--budget``
seconds and writes a table in the shipped format (copy it over ``kernels/marlin/tuned_<gpu>.json`` to ship it).
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
    w.add_argument("--shapes", metavar="LIST", help="comma-separated KxN layer shapes (required unless "
                                                     "--rebuild-table, whose default is the shipped table's)")
    w.add_argument("--m", default=None, metavar="LIST", help="comma-separated token counts "
                                                             "(default 1,16,64,128)")
    w.add_argument("--groupsize", type=int, default=128, help="rows per scale: 128, or -1 for one (default 128)")
    w.add_argument("--deadline", type=_seconds, default=30.0, help="seconds per shape and m (default 30)")
    w.add_argument("--candidates", type=positive, default=10, help="launches tried at most per point (default 10)")
    w.add_argument("--retune", action="store_true", help="tune again points the cache already holds")
    w.add_argument("--rebuild-table", metavar="OUT", help="tune every point of the shipped table (or of --shapes "
                                                          "x --m) by graph time and write a new table to OUT")
    w.add_argument("--budget", type=_seconds, default=300.0, help="seconds for the whole --rebuild-table "
                                                                  "(default 300)")
    w.add_argument("-f", "--force-overwrite", action="store_true", help="overwrite OUT if it exists")
    w.set_defaults(func=main_w4a16)


def _points(args: argparse.Namespace) -> list[tuple[int, int, int]]:
    """(m, k, n) to tune: --shapes x --m, or for a rebuild without --shapes the shipped table's points."""
    from kernelscope.bench.w4a16 import make_cases, parse_shapes
    from kernelscope.cli.bench.common import int_list

    if args.shapes is None:
        if args.rebuild_table is None:
            fail("tune w4a16: --shapes is required (comma-separated KxN layer shapes)")
        return []
    ms = int_list(args.m or "1,16,64,128", "--m")
    try:
        cases = make_cases(ms, parse_shapes(args.shapes), args.groupsize)
    except ValueError as e:
        fail(str(e))
    return [(c.m, c.k, c.n) for c in cases]


def main_w4a16(args: argparse.Namespace) -> int:
    points = _points(args)
    if args.rebuild_table is not None:
        from kernelscope.cli.common import output_path

        output_path(args.rebuild_table, args.force_overwrite, what="table")
    require_gpu("tune w4a16", "times kernel launches", "torch", "triton")
    import torch

    if not torch.cuda.is_available():  # the interpreter's times say nothing about a GPU's launches
        fail("kernelscope tune times kernel launches on an NVIDIA GPU, and PyTorch sees no CUDA GPU here")
    from kernelscope.bench.w4a16_impls import make_weights
    from kernelscope.kernels.marlin import autotune, launch, to_kernel_layout

    done: dict[tuple[int, int], tuple] = {}

    def weights(k: int, n: int) -> tuple:
        if (k, n) not in done:
            done.clear()  # one shape's weights on the GPU at a time
            wt = make_weights(k, n, args.groupsize, "cuda", 0)
            done[(k, n)] = to_kernel_layout(wt.B, wt.s, wt.groupsize)
        return done[(k, n)]

    if args.rebuild_table is not None:
        return _rebuild(args, points, weights, launch)
    for m, k, n in points:
        words, scales = weights(k, n)
        if args.retune:
            launch.forget(m, k, n, args.groupsize, words)
        decision = launch.decide_launch(m, k, n, args.groupsize, words, scales, tune=True, deadline_s=args.deadline,
                                 limit=args.candidates)
        print(f"k={k} n={n} m={m} (bucket m<={autotune.m_bucket(m)}): {decision.config.to_dict()} "
              f"from {decision.source}")
    return 0


def _rebuild(args: argparse.Namespace, points: list[tuple[int, int, int]], weights, launch) -> int:
    """--rebuild-table: every point tuned by graph time, the table written to OUT (JSON, the shipped format)."""
    import json
    import time

    import torch

    from kernelscope.model.files import write_atomic

    if not points:
        table = launch.tuned_tables().get(torch.cuda.get_device_properties(0).name)
        if table is None:
            fail("tune w4a16 --rebuild-table: no shipped table for this GPU; give the points with --shapes and --m")
        points = sorted((r["m"], r["k"], r["n"]) for r in table["rows"])
        points.sort(key=lambda p: (p[1], p[2], p[0]))  # one shape's weights at a time
    t0 = time.perf_counter()
    doc = launch.rebuild_table(points, args.groupsize, weights, budget_s=args.budget, limit=args.candidates,
                                 on_point=lambda r: print(f"k={r['k']} n={r['n']} m={r['m']}: {r['median_us']} us "
                                                          f"{r['launch']}", flush=True))
    write_atomic(args.rebuild_table, (json.dumps(doc, indent=1) + "\n").encode())
    print(f"{len(doc['rows'])} of {len(points)} points in {time.perf_counter() - t0:.0f} s -> {args.rebuild_table}")
    return 0
