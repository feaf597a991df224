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
MIN_WIDTH = 40  # narrower, no panel can show a number whole


def columns(text: str) -> int:
    """--width COLS: an argparse type; a width too small to draw anything is refused, not drawn as nothing."""
    n = _int(text, "a number of columns")
    if n < MIN_WIDTH:
        raise argparse.ArgumentTypeError(f"must be at least {MIN_WIDTH} columns, got {n}")
    return n


def positive(text: str) -> int:
    """A count (kernels, panels, calls, sizes): an argparse type refusing 0 and negatives."""
    n = _int(text, "a whole number")
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def non_negative(text: str) -> int:
    n = _int(text, "a whole number")
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {n}")
    return n


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {what}, got {text!r}") from None


def add_style_args(p: argparse.ArgumentParser) -> None:
    """--width and --no-color, the same on every command that draws."""
    p.add_argument("--width", type=columns, metavar="COLS", help=f"render at this terminal width (>= {MIN_WIDTH})")
    p.add_argument("--no-color", action="store_true", help="plain text output")
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


INSTALL = {  # how to get a library a command needs, said in its one-sentence error
    "torch": "pip install torch (on a GPU machine, the CUDA build: https://pytorch.org/get-started/locally/)",
    "triton": "pip install triton",
    "numpy": "pip install numpy",
    "matplotlib": "pip install 'kernelscope[plot]'",
}


def require_modules(command: str, *modules: str) -> None:
    """Before any work: each library the command needs is importable, or one sentence with how to install it."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        fail(f"kernelscope {command} needs {' and '.join(missing)}, which this Python does not have: "
             + "; ".join(INSTALL.get(m, f"pip install {m}") for m in missing))


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
    p.add_argument("--panels", dest="top", type=non_negative, default=3, metavar="N",
                   help="configuration panels for the top N kernels (default 3; 0: the table only)")
    p.add_argument("--top", dest="top", type=non_negative, help=argparse.SUPPRESS)  # the older name of --panels
    p.add_argument("--json", action="store_true", help="print the data as JSON instead")
    p.add_argument("--all-kernels", action="store_true", help="list every kernel in the table")
    add_style_args(p)


def _timeline_json(session, limit: int) -> dict:
    from kernelscope.analyze.timeline import build_timeline

    tl = build_timeline(session)
    rows = [{"kind": r.kind, "name": r.name, "start_ns": r.start_ns, "duration_ns": r.duration_ns,
             "gap_before_ns": r.gap_before_ns, "gap_kind": r.gap_kind, "regions": list(r.regions),
             "on_gpu": r.on_gpu, "notes": {name: m.to_dict() for name, m in r.notes}} for r in tl.rows[:limit]]
    return {"span_ns": tl.span_ns, "gpu_busy_ns": tl.gpu_busy_ns, "missing_reason": tl.missing_reason,
            "gaps": [vars(g) for g in tl.gaps], "rows_total": len(tl.rows), "rows": rows}


def render_show(session, args: argparse.Namespace, banner: str | None = None) -> int:
    from kernelscope.analyze.kernel_table import select_kernels, summarize

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
    from kernelscope.analyze.analysis import analyze_session
    from kernelscope.cli.calibrate import ceilings_for

    ceilings = ceilings_for(session, getattr(args, "ceilings", None))

    if args.json:
        from kernelscope.render.analysis_json import analysis_json
        from kernelscope.render.json_view import show_json

        doc = show_json(session, summary, selected if args.kernel else summary.kernels)
        per_kernel = analysis_json(analyze_session(session, ceilings, summary))
        for k in doc["kernels"]:
            k["analysis"] = per_kernel.get(k["name"])
        if getattr(args, "timeline", None) is not None:  # the same rows the terminal's timeline draws
            doc["timeline"] = _timeline_json(session, args.timeline)
        from kernelscope.analyze.ranks import ranks_report
        from kernelscope.render.ranks_json import ranks_json

        doc.update(ranks_json(ranks_report(session)))  # ranks, collectives (multi-GPU sessions: analyze/collectives)
        json.dump(doc, sys.stdout, indent=1, default=str)
        sys.stdout.write("\n")
        return 0
    from kernelscope.render.show import ShowView, make_console

    console = make_console(width=args.width, color=False if args.no_color else None)
    limit = len(summary.kernels) if args.all_kernels else 15
    analysis = analyze_session(session, ceilings, summary)
    console.print(ShowView(session, summary, selected, table_limit=limit, banner=banner, analysis=analysis,
                           timeline_limit=getattr(args, "timeline", None), block=getattr(args, "block", None)))
    if len(session.ranks) > 1:  # a multi-GPU session: the Ranks and Collectives panels
        from kernelscope.analyze.ranks import ranks_report
        from kernelscope.render.ranks_panel import CollectivesPanel, RanksPanel

        report = ranks_report(session)
        console.print(RanksPanel(report.summary))
        console.print(CollectivesPanel(report.collectives, limit=len(report.collectives.rows) if args.all_kernels else 20))
    return 0
