"""`kernelscope bench`: benchmark kernels against their peers and write a results file.

One module per benchmark (attention.py, w4a16.py), each adding its parser with the
options of common.py. The results file is rewritten after every
row, so an interrupted run keeps what it measured; ``kernelscope plot`` draws it.
"""
from __future__ import annotations

import argparse
import sys

from kernelscope.cli.bench import attention, w4a16
from kernelscope.cli.bench.common import add_common


def register(sub: argparse._SubParsersAction) -> None:
    b = sub.add_parser("bench", help="benchmark kernels against their peers (kernelscope bench attention --help)",
                       description="Benchmark a kernel against its peers on the GPU and write a JSON results file.")
    b.set_defaults(func=lambda args: _no_benchmark(b))
    benches = b.add_subparsers(dest="benchmark", metavar="BENCHMARK")
    attention.add_parser(benches, add_common)
    w4a16.add_parser(benches, add_common)


def _no_benchmark(parser: argparse.ArgumentParser) -> int:
    parser.print_help(sys.stderr)
    return 2
