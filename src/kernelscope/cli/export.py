"""`kernelscope export FILE -o OUT.json`: a session as a Chrome / Perfetto trace (no GPU needed)."""
from __future__ import annotations

import argparse

from kernelscope.cli.common import fail, load_session, note, output_path, report
from kernelscope.model.escape import visible

FORMATS = ("chrome",)  # Trace Event Format JSON: ui.perfetto.dev, chrome://tracing


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write a session as a Chrome / Perfetto trace",
                       usage="kernelscope export SESSION -o OUT.json [--format {chrome}] [-f]")
    p.add_argument("file", nargs="?", metavar="SESSION", help="session file written by kernelscope run")
    needed = p.add_argument_group("required")
    needed.add_argument("-o", "--output", metavar="OUT.json",
                        help="the trace file to write (open in ui.perfetto.dev or chrome://tracing)")
    p.add_argument("--format", choices=FORMATS, default="chrome", help="what to write (default chrome)")
    # `--chrome`: the format as a flag (`export --chrome SESSION -o OUT`), or the older spelling of -o
    # (`export SESSION --chrome OUT`): which one is told by whether SESSION came as well
    p.add_argument("--chrome", nargs="?", const="", metavar="OUT.json", help=argparse.SUPPRESS)
    p.add_argument("-f", "--force-overwrite", action="store_true", help="overwrite OUT if it exists")
    p.set_defaults(func=main)


def _session_and_target(args: argparse.Namespace) -> tuple[str, str]:
    chrome = args.chrome or None
    if args.file is None:
        if chrome is None:
            fail("give the session to export: kernelscope export SESSION -o OUT.json")
        args.file, chrome = chrome, None  # `export --chrome SESSION`: --chrome named the format
    if args.output and chrome and args.output != chrome:
        fail("give the trace file once: -o OUT (--chrome OUT is the older spelling of the same)")
    target = args.output or chrome
    if not target:
        fail("give the trace file to write: kernelscope export SESSION -o OUT.json")
    return args.file, target


def main(args: argparse.Namespace) -> int:
    from kernelscope.model.files import write_atomic
    from kernelscope.render.chrome_trace import nothing_to_draw
    from kernelscope.render.renderers import get_renderer

    _, target = _session_and_target(args)
    out = output_path(target, args.force_overwrite, [args.file], "trace file")
    session = load_session(args.file)
    renderer = get_renderer(args.format)  # the trace shows the run, not a selection: no kernel panels asked for
    trace = renderer.trace(report(session, None, 0, None))
    timed = trace.timed_events()
    if not timed:
        fail(nothing_to_draw(args.file, session))
    write_atomic(out, trace.write_json, force=args.force_overwrite)  # streamed: launch events from their columns
    for line in trace.notes:
        note(line)  # they name kernels: escaped like every string from a file
    print(f"wrote {visible(str(out))}: {timed:,} events (open in ui.perfetto.dev or chrome://tracing)")
    return 0
