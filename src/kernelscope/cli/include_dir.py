"""`kernelscope include-dir`: the folder holding kernelscope.cuh, for a compiler's include path."""
from __future__ import annotations

import argparse
import sys

from kernelscope.cli.common import fail


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("include-dir", help="print the folder of kernelscope.cuh (nvcc -I$(kernelscope include-dir))",
                       description="Print the folder holding kernelscope.cuh, the block recorder and warp phase "
                                   "scopes for CUDA C++ kernels: nvcc -I$(kernelscope include-dir) -DKS_RECORD.")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from kernelscope.collect.instrument.cuda_scopes import HEADER_NAME, include_dir

    folder = include_dir()
    if not (folder / HEADER_NAME).is_file():
        fail(f"{HEADER_NAME} is not in {folder}: this installation of kernelscope lacks its package data; "
             "reinstall it")
    sys.stdout.write(f"{folder}\n")
    return 0
