"""`kernelscope plot`: draw a benchmark results file as PNGs (works without a GPU)."""
from __future__ import annotations

import argparse
import importlib.util
import re
import sys

from kernelscope.cli.common import fail, output_path
from kernelscope.bench.plots import DEFAULT_BASELINES  # no matplotlib import until a plot is drawn


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plot", help="draw a benchmark results file as PNGs (attention: latency, TFLOP/s, memory, "
                                    "speedup; W4A16: time, %% of bytes floor, speedup)",
                       description="Draw a results file from `kernelscope bench` as PNGs.")
    p.add_argument("results", help="results JSON written by kernelscope bench (or the same gzip-compressed)")
    p.add_argument("--output-dir", default="plots", metavar="DIR", help="where the PNGs go (default plots/)")
    p.add_argument("-f", "--force-overwrite", action="store_true", help="overwrite PNGs already in DIR")
    p.add_argument("--baseline", metavar="IMPL",
                   help="implementation the speedup plot divides by: speedup = IMPL median / median at the same "
                        "point (default: " + ", ".join(f"{v} for {k}" for k, v in DEFAULT_BASELINES.items())
                        + " results, when it was run)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from kernelscope.bench.results import BenchResults, ResultsFileError

    try:
        results = BenchResults.load(args.results)
    except ResultsFileError as e:
        fail(str(e))
    impls = sorted({r.impl for r in results.rows})
    if not results.rows:
        fail(f"{args.results} has no results rows to plot")
    baseline = args.baseline
    if baseline is not None and not any(r.impl == baseline and r.status == "ok" for r in results.rows):
        fail(f"--baseline {baseline} has no successful rows in {args.results}; it has {', '.join(impls)}")
    default = DEFAULT_BASELINES.get(results.benchmark)
    if baseline is None and any(r.impl == default and r.status == "ok" for r in results.rows):
        baseline = default
    if importlib.util.find_spec("matplotlib") is None:
        fail("kernelscope plot needs matplotlib (pip install 'kernelscope[plot]')")
    from kernelscope.bench.plots import write_plots

    try:
        paths = write_plots(results, args.output_dir, baseline=baseline, prefix=_file_prefix(results.benchmark),
                            check=lambda path: output_path(path, args.force_overwrite, [args.results], "plot"),
                            force=args.force_overwrite)
    except OSError as e:
        fail(f"cannot write the plots into {args.output_dir}: {e.strerror or e}")
    for path in paths:
        print(path)
    if baseline is None:
        print(f"kernelscope: no speedup plot: {default or 'no default baseline'} has no successful rows; choose one "
              "with --baseline.", file=sys.stderr)
    return 0


def _file_prefix(benchmark: str) -> str:
    """The benchmark's name from the results file as the PNGs' name prefix: letters, digits, '_', '-' and inner
    dots only, at most 64 characters, so a name such as '../../x' never writes outside --output-dir."""
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", benchmark).strip(".-")[:64]
    return slug or "results"
