"""`kernelscope show FILE`: draw a saved session (no GPU needed)."""
from __future__ import annotations

import argparse
import importlib.util
import sys

from kernelscope.model.escape import visible
from kernelscope.cli.common import (add_ceilings_arg, add_read_sources_arg, add_view_args, ceilings, fail,
                                   load_session, output_path, render_show, report, source_checksums)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="draw a session file")
    p.add_argument("file", help="session file written by kernelscope run")
    add_view_args(p)
    p.add_argument("--timeline", nargs="?", const=200, type=int, metavar="N",
                   help="also draw the run in time order, with the gaps between kernels (first N rows, default 200), "
                   "from the verdict's window on")
    p.add_argument("--whole-run", action="store_true", help="with --timeline: from the run's start, not the window")
    p.add_argument("--block", type=int, metavar="ID", help="the block (linear id) the warp-execution panel draws "
                   "(default: the first with recorded phase scopes)")
    p.add_argument("--roofline-png", metavar="FILE", help="also write the roofline as a PNG (needs matplotlib)")
    p.add_argument("-f", "--force-overwrite", action="store_true", help="overwrite the --roofline-png file")
    p.add_argument("--source", action="store_true", help="draw each kernel's hottest source lines (share of warp "
                   "samples, top stall reasons, excess memory traffic, the text) from a run --counters --source or "
                   "an imported .ncu-rep with SourceCounters; --kernel REGEX picks the kernels")
    p.add_argument("--sass", action="store_true", help="with --source: the SASS instructions under each line")
    add_read_sources_arg(p)
    add_ceilings_arg(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    png = None
    if args.roofline_png:  # before anything is drawn: a missing library or a refused file is said first
        if importlib.util.find_spec("matplotlib") is None:
            fail("--roofline-png needs matplotlib: pip install 'kernelscope[plot]'")
        png = output_path(args.roofline_png, args.force_overwrite, [args.file, *filter(None, [args.ceilings])],
                          "roofline PNG")
    session = load_session(args.file)
    if args.timeline is not None and args.timeline < 1:
        fail("--timeline N needs N >= 1 rows")
    if args.block is not None and args.block < 0:
        fail(f"--block takes a linear block id >= 0, got {args.block}")
    if args.sass and not args.source:
        fail("--sass needs --source")
    if args.source:
        return _show_source(session, args)
    code = render_show(session, args)
    if png is not None:
        _write_roofline(session, png, args)
    return code


def _write_roofline(session, png, args: argparse.Namespace) -> None:
    """`show --roofline-png FILE`: the report of the session as stored (its own strings: matplotlib draws text,
    it obeys no markup) through the roofline-png renderer."""
    from kernelscope.model.files import write_atomic
    from kernelscope.render.renderers import get_renderer

    r = report(session, None, 0, ceilings(session, args.ceilings))
    data = get_renderer("roofline-png").render(r)
    try:
        write_atomic(png, data, force=args.force_overwrite)
    except OSError as e:
        fail(f"cannot write {args.roofline_png} ({e.strerror})")
    print(visible(f"kernelscope: roofline written to {png}."), file=sys.stderr)


def _show_source(session, args: argparse.Namespace) -> int:
    """`show --source [--sass] [--kernel REGEX] [--json]`: the hot lines of each launch with per-line counters."""
    import json
    import re

    from kernelscope.analyze.source_lines import source_lines_of
    from kernelscope.render.console import make_console
    from kernelscope.render.source_view import SourceView, source_lines_json

    if args.kernel is not None:
        try:
            re.compile(args.kernel)
        except re.error as e:
            fail(f"--kernel {args.kernel!r} is not a valid regular expression ({e})")
    kernels = source_lines_of(session, args.kernel, disk_sha256=source_checksums(session, session, args))
    if args.json:
        sys.stdout.write(json.dumps({"source_lines": source_lines_json(kernels, sass=args.sass)}, indent=1) + "\n")
        return 0
    console = make_console(width=args.width, color=False if args.no_color else None)
    console.print(SourceView(kernels, sass=args.sass))
    return 0
