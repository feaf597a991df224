"""`kernelscope report FILE -o report.html`: one self-contained HTML page of a session (no GPU, no
network at view time): every view `show` draws, as tables and inline SVG charts."""
from __future__ import annotations

import argparse

from kernelscope.model.escape import visible
from kernelscope.cli.common import (add_ceilings_arg, add_read_sources_arg, ceilings, kernel_regex, load_session,
                                     non_negative, output_path, report, source_checksums)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("report", help="write a session as one self-contained HTML page")
    p.add_argument("file", help="session file written by kernelscope run")
    p.add_argument("-o", "--output", metavar="OUT.html", required=True, help="the HTML file to write")
    p.add_argument("--kernel", type=kernel_regex, metavar="REGEX", help="the kernels with panels: those matching REGEX")
    p.add_argument("--panels", type=non_negative, default=3, metavar="N",
                   help="panels for the top N kernels by time (default 3; 0: the tables and session views only)")
    p.add_argument("-f", "--force-overwrite", action="store_true", help="overwrite OUT.html if it exists")
    add_read_sources_arg(p)
    add_ceilings_arg(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from kernelscope.model.files import write_atomic
    from kernelscope.render.renderers import get_renderer

    out = output_path(args.output, args.force_overwrite, [args.file, *filter(None, [args.ceilings])], "HTML report")
    session = load_session(args.file)
    renderer = get_renderer("html")
    # the session as stored: the page escapes its strings itself
    r = report(session, args.kernel, args.panels, ceilings(session, args.ceilings),
               source_checksums(session, session, args))
    page = renderer.render(r).encode()
    write_atomic(out, page, force=args.force_overwrite)
    with_panels, total = len(r.kernels), len(r.summary.kernels)
    every = {1: "the one kernel", 2: "both kernels"}.get(total, f"all {total:,} kernels")
    panels = (f"panels for {every}" if with_panels == total else "no kernel panels" if with_panels == 0 else
              f"panels for {with_panels:,} of {total:,} kernels (--panels N or --kernel REGEX for others)")
    print(f"wrote {visible(str(out))}: {len(page) / 1024:,.0f} KiB, {panels}; open it in any browser (nothing is "
          "fetched)")
    return 0
