"""`kernelscope doctor`: what works on this machine (GPU, driver, torch, Triton, CUPTI, ncu, NVML, Proton)."""
from __future__ import annotations

import argparse

from kernelscope.cli.common import add_style_args


def register(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser("doctor", help="check what works on this machine and how to fix what does not")
    add_style_args(d)
    d.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from kernelscope.collect.doctor import run_checks
    from kernelscope.render.doctor import DoctorView
    from kernelscope.render.show import make_console

    make_console(width=args.width, color=False if args.no_color else None).print(DoctorView(run_checks()))
    return 0  # a report: it ran, whatever it found
