"""What the subcommands share: one-sentence errors and the session view options."""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Iterable, NoReturn

EXIT_USAGE = 2
SKIPPED_NOTES = 5  # lines naming what a damaged session lost; the rest are counted


def fail(msg: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print one sentence on stderr and exit non-zero (no traceback)."""
    msg = msg.rstrip(".") + "."
    print(f"kernelscope: error: {msg}", file=sys.stderr)
    raise SystemExit(code)


def output_path(path: str | Path, force: bool, inputs: Iterable[str | Path] = (), what: str = "output") -> Path:
    """Check an output before any work: an existing file needs -f, an input of the command is never
    overwritten, the directory must exist (model/files.py). Bad: one sentence, exit 2."""
    from kernelscope.model.files import OutputFileError, check_output

    try:
        return check_output(path, force, inputs, what)
    except OutputFileError as e:
        fail(str(e))


def existing_files(args: Iterable[str]) -> list[str]:
    """The arguments of a command that name existing files: its inputs, which no output may replace."""
    return [a for a in args if not a.startswith("-") and os.path.isfile(a)]


def load_session(path: str):
    """Session.load, with a damaged or missing file as one sentence and exit 2."""
    from kernelscope.model import Session, SessionFileError

    try:
        session = Session.load(path)
    except SessionFileError as e:
        fail(str(e))
    skipped = session.skipped_on_load
    for line in skipped[:SKIPPED_NOTES]:
        print(f"kernelscope: note: {path}: {line}.", file=sys.stderr)
    if len(skipped) > SKIPPED_NOTES:
        print(f"kernelscope: note: {path}: {len(skipped) - SKIPPED_NOTES} more damaged parts skipped.", file=sys.stderr)
    return session


def add_view_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kernel", metavar="REGEX", help="show the configuration of kernels matching REGEX")
    p.add_argument("--top", type=int, default=3, metavar="N", help="configuration panels for the top N kernels (default 3)")
    p.add_argument("--json", action="store_true", help="print the data as JSON instead")
    p.add_argument("--all-kernels", action="store_true", help="list every kernel in the table")
    p.add_argument("--width", type=int, metavar="COLS", help="render at this terminal width")
    p.add_argument("--no-color", action="store_true", help="plain text output")


def render_show(session, args: argparse.Namespace, banner: str | None = None) -> int:
    from kernelscope.analyze.summary import select_kernels, summarize

    if not args.json:  # the terminal prints the session's strings: make them plain text first
        from kernelscope.render.text import display_copy

        session = display_copy(session)
    summary = summarize(session)
    try:
        selected = select_kernels(summary, args.kernel, args.top)
    except re.error as e:
        fail(f"--kernel {args.kernel!r} is not a valid regular expression ({e})")
    if args.kernel is not None and not selected:
        fail(f"no kernel matches --kernel {args.kernel!r}; {len(summary.kernels)} kernels are in the session")
    from kernelscope.analyze.profiling_summary import analyze_session
    from kernelscope.cli.calibrate import ceilings_for

    ceilings = ceilings_for(session, getattr(args, "ceilings", None))

    if args.json:
        from kernelscope.render.analysis_json import analysis_json
        from kernelscope.render.json_view import show_json

        doc = show_json(session, summary, selected if args.kernel else summary.kernels)
        per_kernel = analysis_json(analyze_session(session, ceilings, summary))
        for k in doc["kernels"]:
            k["analysis"] = per_kernel.get(k["name"])
        json.dump(doc, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
        return 0
    from kernelscope.render.show import ShowView, make_console

    console = make_console(width=args.width, color=False if args.no_color else None)
    limit = len(summary.kernels) if args.all_kernels else 15
    analysis = analyze_session(session, ceilings, summary)
    console.print(ShowView(session, summary, selected, table_limit=limit, banner=banner, analysis=analysis,
                           timeline_limit=getattr(args, "timeline", None), block=getattr(args, "block", None)))
    return 0
