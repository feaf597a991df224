"""`kernelscope export FILE --chrome OUT.json`: a session as a Chrome / Perfetto trace (no GPU needed)."""
from __future__ import annotations

import argparse
import json
import sys

from kernelscope.cli.common import fail, load_session


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write a session as a Chrome / Perfetto trace")
    p.add_argument("file", help="session file written by kernelscope run")
    p.add_argument("--chrome", metavar="OUT.json", required=True,
                   help="write a Trace Event Format JSON file (open in ui.perfetto.dev or chrome://tracing)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from kernelscope.render.chrome_trace import nothing_to_draw, session_to_chrome_trace

    session = load_session(args.file)
    trace = session_to_chrome_trace(session)
    if not any(e["ph"] != "M" for e in trace.events):
        fail(nothing_to_draw(args.file, session))
    try:
        with open(args.chrome, "w") as f:
            json.dump(trace.to_dict(), f)
    except OSError as e:
        fail(f"cannot write {args.chrome} ({e.strerror or e})")
    for note in trace.notes:
        print(f"kernelscope: note: {note}.", file=sys.stderr)
    timed = sum(1 for e in trace.events if e["ph"] != "M")
    print(f"wrote {args.chrome}: {timed:,} events (open in ui.perfetto.dev or chrome://tracing)")
    return 0
