"""`kernelscope learn marlin`: the Marlin INT4 format on real weights, then one launch of the kernel, phase by phase.

On a GPU it runs the W4A16 kernel once under the trace pass; without one it
shows a session recorded on an H100 and bundled with kernelscope, and says so.
"""
from __future__ import annotations

import argparse
import gzip
import json
import sys
from importlib import resources

from kernelscope.cli.common import (WIDTH_HELP, columns, exit_past_profiler_teardown, fail, load_session, output_path,
                                    positive, require_modules)

TOPICS = ("marlin",)
BUNDLED = "marlin_session_h100.json.gz"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("learn", help="walk through a kernel on real data: kernelscope learn marlin")
    p.add_argument("topic", help="what to learn about: marlin")
    p.add_argument("--session", metavar="FILE", help="walk through this recorded session instead of running")
    p.add_argument("--m", type=positive, help="rows of A, tokens (default 16)")
    p.add_argument("--k", type=positive, help="input features, a multiple of 128 (default 8192)")
    p.add_argument("--n", type=positive, help="output features, a multiple of 256 (default 8192)")
    p.add_argument("-o", "--output", metavar="FILE", help="on a GPU, also save the recorded session here")
    p.add_argument("-f", "--force-overwrite", action="store_true", help="overwrite the --output file")
    p.add_argument("--width", type=columns, metavar="COLS", help=WIDTH_HELP)
    p.add_argument("--no-color", action="store_true", help="plain text output")
    p.set_defaults(func=main)


def _shape_args(args: argparse.Namespace) -> dict[str, int]:
    return {k: v for k in ("m", "k", "n") if (v := getattr(args, k)) is not None}


def _plan(base, args: argparse.Namespace):
    """The plan of the session (or the default), with --m/--k/--n applied; bad shapes fail in one sentence."""
    from kernelscope.kernels.marlin.walkthrough import GemmPlan

    d = base.to_dict() if base is not None else GemmPlan(16, 8192, 8192).to_dict()
    d.update(_shape_args(args))
    while d["split_k"] > 1 and d["k"] % (d["split_k"] * d["block_k"]):
        d["split_k"] //= 2  # a smaller --k splits into fewer whole blocks
    try:
        return GemmPlan.from_dict(d)
    except ValueError as e:
        fail(f"learn marlin: {e}")


def _bundled():
    from kernelscope.model import Session

    raw = resources.files("kernelscope").joinpath("data", BUNDLED).read_bytes()
    return Session.from_dict(json.loads(gzip.decompress(raw)))


def _session_and_plan(args: argparse.Namespace, given=None):
    """(session, plan, banner): from --session (``given``, loaded already), a fresh GPU run, or the bundled H100
    recording."""
    from kernelscope.collect.driver import gpu_available
    from kernelscope.kernels.marlin.walkthrough import plan_of

    if given is not None:
        return given, _plan(plan_of(given), args), None
    ok, reason = gpu_available(also_needs=("triton",))
    if ok:
        from kernelscope.kernels.marlin.workload import record_session

        plan = _plan(None, args)
        out = output_path(args.output, args.force_overwrite, what="session file") if args.output is not None else None
        shape = [f"--{x}={getattr(plan, x)}" for x in ("m", "k", "n")]
        session = record_session(plan, command=["kernelscope", "learn", "marlin", *shape])
        if out is not None:
            session.save(out, force=args.force_overwrite)
            print(f"kernelscope: session written to {out}", file=sys.stderr)
        return session, plan, None
    session = _bundled()
    plan = plan_of(session)
    wanted = _plan(plan, args)
    if wanted != plan:
        fail(f"no CUDA GPU is available here ({reason}), and the bundled recording is of m={plan.m}, "
             f"k={plan.k}, n={plan.n} only; drop --m/--k/--n or run on a GPU")
    device = session.device.name if session.device else "a GPU"
    banner = (f"No CUDA GPU is available here ({reason}); the launch below was recorded on {device} on "
              f"{session.created_utc[:10]} and is bundled with kernelscope, while the format part is computed here.")
    return session, plan, banner


def main(args: argparse.Namespace) -> int:
    if args.topic not in TOPICS:
        fail(f"there is no walkthrough for {args.topic!r}; topics: {', '.join(TOPICS)}")
    if args.width is not None and args.width < 40:
        fail(f"--width must be at least 40 columns, got {args.width}")
    given = load_session(args.session) if args.session else None  # a bad file is said before torch is imported
    require_modules("learn marlin", "torch", "numpy")
    try:
        from kernelscope.kernels.marlin.explain import real_layer_example
        from kernelscope.kernels.marlin.walkthrough import build_walkthrough, plan_of
    except ImportError as e:
        fail(f"learn marlin needs torch and numpy to pack the weights ({e})")
    from kernelscope.kernels.marlin.panels import NeedsGpuNote, PackingPanel, WalkthroughView
    from kernelscope.render.console import make_console

    session, plan, banner = _session_and_plan(args, given)
    recorded_here = not args.session and banner is None
    try:
        walk = build_walkthrough(session, plan)
    except ValueError as e:
        fail(str(e))
    console = make_console(width=args.width, color=False if args.no_color else None)
    if banner:
        console.print(banner)
    console.print(PackingPanel(real_layer_example(plan.groupsize)))
    console.print(WalkthroughView(walk))
    from kernelscope.cli.learn_hot_lines import hot_lines_parts  # the kernel's hot lines, beside its phases

    bundled_plan = plan_of(_bundled()) if banner is None else plan
    for part in hot_lines_parts(plan, live=recorded_here, given=given, bundled_plan=bundled_plan):
        console.print(part)
    if banner:
        console.print(NeedsGpuNote(walk))
    if recorded_here:  # the profiler ran in this process
        exit_past_profiler_teardown(0)
    return 0
