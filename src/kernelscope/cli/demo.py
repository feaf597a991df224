"""`kernelscope demo`: profile the built-in W4A16 kernel end to end, or show the bundled session."""
from __future__ import annotations

import argparse
import sys

from kernelscope.cli.common import add_view_args, exit_past_profiler_teardown, fail, output_path, render_show

DEMO_KERNEL = "_w4a16_kernel"  # kernels.marlin.walkthrough.KERNEL_NAME; the panels default to it
DEFAULT_OUTPUT = "kernelscope-demo.json"


def register(sub: argparse._SubParsersAction) -> None:
    d = sub.add_parser(
        "demo", help="profile the built-in W4A16 Triton kernel (or show a bundled session without a GPU)"
    )
    d.add_argument(
        "-o", "--output", help=f"session file (default {DEFAULT_OUTPUT}; without a GPU, the bundled session is "
                               "written only where -o is given)"
    )
    d.add_argument("-f", "--force-overwrite", action="store_true", help="overwrite the session file")
    add_view_args(d)
    d.set_defaults(func=main)


def _show(session, args: argparse.Namespace, banner: str | None = None) -> int:
    """The session's panels for the W4A16 kernel (unless --kernel says otherwise), then the packing panel."""
    from kernelscope.model.names import short_kernel_name

    if args.kernel is None and any(short_kernel_name(x.kernel) == DEMO_KERNEL for x in session.launches):
        args.kernel = DEMO_KERNEL
    code = render_show(session, args, banner=banner)
    if code != 0 or args.json or args.brief:  # --brief stops after the verdict, as show --brief does
        return code
    from kernelscope.render.console import make_console

    console = make_console(width=args.width, color=False if args.no_color else None)
    try:
        from kernelscope.kernels.marlin.explain import real_layer_example
    except ImportError as e:
        console.print(f"The data-packing panel needs torch and numpy to pack the weights ({e}); install what is "
                      f"missing with: {_install_packing()}")
        return 0
    from kernelscope.kernels.marlin.panels import PackingPanel

    console.print(PackingPanel(real_layer_example()))
    console.print("Phase by phase, with the numbers of a launch: kernelscope learn marlin")
    return 0


def main(args: argparse.Namespace) -> int:
    from kernelscope.bundled_session import bundled_session
    from kernelscope.collect.driver import gpu_available

    ok, reason = gpu_available(also_needs=("triton",))
    if not ok:
        # -o given: the file asked for is written, a copy of the bundled session; no -o: nothing is written
        out = output_path(args.output, args.force_overwrite, what="session file") if args.output is not None else None
        session, label = bundled_session()
        if out is not None:
            session.save(out, force=args.force_overwrite)
            print(f"kernelscope: demo: no CUDA GPU here, so nothing was profiled; {out} holds a copy of the session "
                  f"recorded on {label}, bundled with kernelscope.", file=sys.stderr)
        banner = (f"No CUDA GPU is available here ({reason}); showing a session recorded on {label}, "
                  "bundled with kernelscope.")
        return _show(session, args, banner=banner)
    out = output_path(args.output or DEFAULT_OUTPUT, args.force_overwrite, what="session file")
    # In this process, with the profiler on only while the GEMM and its copies run: preparing the
    # weights is setup, and recorded it would fill the kernel table (kernels/marlin/workload.record_session).
    from kernelscope.kernels.marlin.workload import DEMO_PLAN, TOLERANCE, record_session

    try:
        session = record_session(DEMO_PLAN, command=["kernelscope", "demo"])
    except RuntimeError as e:
        fail(f"the demo workload failed: {e}", 1)
    session.save(out, force=args.force_overwrite)
    err = session.environment.get("w4a16_relative_error")
    plan = DEMO_PLAN
    print(f"kernelscope: demo: W4A16 GEMM m={plan.m} k={plan.k} n={plan.n}, relative error vs the fp32 reference "
          f"{err:.2e} (< {TOLERANCE:g}); session written to {out}", file=sys.stderr)
    exit_past_profiler_teardown(_show(session, args))  # the profiler ran in this process


def _install_packing() -> str:
    """The install command for what the packing panel lacks: torch's build for this machine, numpy."""
    import importlib.util

    from kernelscope.collect.driver import torch_install

    steps = [torch_install()] if importlib.util.find_spec("torch") is None else []
    if importlib.util.find_spec("numpy") is None:
        steps.append("pip install numpy")
    return "; ".join(steps) or torch_install()
