"""`kernelscope demo`: profile the built-in Triton kernel, or show the bundled session."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kernelscope.cli.common import add_view_args, fail, render_show


def register(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser("demo", help="profile a built-in Triton kernel (or show a bundled session without a GPU)")
    d.add_argument("-o", "--output", default="kernelscope-demo.json", help="session file (default kernelscope-demo.json)")
    d.add_argument("-f", "--force-overwrite", action="store_true", help="overwrite the session file")
    add_view_args(d)
    d.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from kernelscope.demo import bundled_session, gpu_available

    ok, reason = gpu_available()
    if not ok:
        session, label = bundled_session()
        banner = (f"No CUDA GPU is available here ({reason}); showing a session recorded on {label}, "
                  "bundled with kernelscope.")
        return render_show(session, args, banner=banner)
    out = Path(args.output)
    if out.exists() and not args.force_overwrite:
        fail(f"{out} already exists; use -f to overwrite it or -o to choose another file")
    from kernelscope.collect.runner import run
    from kernelscope.model import Session

    result = run([], out, module="kernelscope.kernels.demo")
    if result.exit_code != 0:
        fail(f"the demo workload failed with exit code {result.exit_code}; its session is in {out}", result.exit_code)
    print(f"kernelscope: demo session written to {out}", file=sys.stderr)
    return render_show(Session.load(out), args)
