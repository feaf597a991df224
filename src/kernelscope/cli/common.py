"""What the subcommands share: one-sentence errors and the session view options."""
from __future__ import annotations

import argparse
import gc
import os
import sys
from pathlib import Path
from typing import Iterable, NoReturn

from kernelscope.model.escape import visible

EXIT_USAGE = 2
MIN_WIDTH = 40  # narrower, no panel can show a number whole
MAX_WIDTH = 10_000  # wider than any terminal; the README states the bound
WIDTH_HELP = f"render at this terminal width ({MIN_WIDTH} to {MAX_WIDTH})"


def columns(text: str) -> int:
    """--width COLS: an argparse type; a width too small to draw anything is refused, not drawn as nothing."""
    n = _int(text, "a number of columns")
    if n < MIN_WIDTH:
        raise argparse.ArgumentTypeError(f"must be at least {MIN_WIDTH} columns, got {n}")
    if n > MAX_WIDTH:  # wider, a line is megabytes: --width 99999999999 ran out of memory
        raise argparse.ArgumentTypeError(f"must be at most {MAX_WIDTH} columns, got {text[:24]}")
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


def kernel_regex(text: str) -> str:
    """--kernel REGEX: an argparse type; a pattern Python's re cannot compile is refused here, including the ones
    it refuses with OverflowError (a{99999999999}) or RecursionError (thousands of nested groups), not re.error."""
    import re

    try:
        re.compile(text)
    except (re.error, OverflowError, RecursionError) as e:
        raise argparse.ArgumentTypeError(f"{visible(text[:80])!r} is not a valid regular expression ({e})") from None
    return text


def add_style_args(p: argparse.ArgumentParser) -> None:
    """--width and --no-color, the same on every command that draws."""
    p.add_argument("--width", type=columns, metavar="COLS",
                   help=WIDTH_HELP)
    p.add_argument("--no-color", action="store_true", help="plain text output")
SKIPPED_NOTES = 5  # lines naming what a damaged session lost; the rest are counted


def fail(msg: str, code: int = EXIT_USAGE) -> NoReturn:
    """Print one sentence on stderr and exit non-zero (no traceback). The sentence may hold names from a file
    or the command line: it goes through the one escaping path (model/escape.py) like everything printed."""
    msg = msg.rstrip(".") + "."
    print(f"kernelscope: error: {visible(msg)}", file=sys.stderr)
    raise SystemExit(code)


def note(msg: str, kind: str = "note") -> None:
    """``kernelscope: note: ...`` on stderr, its text (file names, kernel names) escaped as fail() does."""
    msg = msg.rstrip(".") + "."
    print(f"kernelscope: {kind}: {visible(msg)}", file=sys.stderr)


def exit_past_profiler_teardown(code: int) -> NoReturn:
    """Leave with ``code`` without the interpreter's teardown, once everything is written: after the torch
    profiler (CUPTI) ran in this process, torch 2.11's teardown at exit can abort with "double free or corruption",
    turning a finished command into exit code 134. PyTorch traced it to profiler buffers freed while CUPTI still
    held them (pytorch/pytorch#195207)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def output_path(path: str | Path, force: bool, inputs: Iterable[str | Path] = (), what: str = "output") -> Path:
    """Check an output before any work: an existing file needs -f, an input of the command is never
    overwritten, the directory must exist (model/files.py). Bad: one sentence, exit 2."""
    from kernelscope.model.files import OutputFileError, check_output

    try:
        return check_output(path, force, inputs, what)
    except OutputFileError as e:
        fail(str(e))


INSTALL = {  # how to get a library a command needs, said in its one-sentence error
    "torch": "pip install torch",  # replaced by collect.driver.torch_install(): the CPU or the CUDA build
    "triton": "pip install triton",
    "numpy": "pip install numpy",
    "matplotlib": "pip install 'kernelscope[plot]'",
}


def require_modules(command: str, *modules: str) -> None:
    """Before any work: each library the command needs is importable, or one sentence with how to install it
    (torch: the CPU build where there is no GPU)."""
    import importlib.util

    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        from kernelscope.collect.driver import torch_install

        install = dict(INSTALL, torch=torch_install())
        fail(f"kernelscope {command} needs {' and '.join(missing)}, which this Python does not have: "
             + "; ".join(install.get(m, f"pip install {m}") for m in missing))


def require_gpu(command: str, doing: str, *modules: str) -> None:
    """require_modules for a command that runs kernels on a GPU: where a library is missing, the GPU is asked
    of the driver first (no torch needed), so a machine without one is told so, not asked to install Triton.
    With the libraries there, the command checks its arguments before it looks for the GPU."""
    import importlib.util

    from kernelscope.collect.driver import driver_gpu

    if all(importlib.util.find_spec(m) is not None for m in modules):
        return
    ok, why = driver_gpu()
    if not ok:
        fail(f"kernelscope {command} {doing} on an NVIDIA GPU, and there is no CUDA GPU here: {why}")
    require_modules(command, *modules)


def existing_files(args: Iterable[str]) -> list[str]:
    """The arguments of a command that name existing files: its inputs, which no output may replace."""
    return [a for a in args if not a.startswith("-") and os.path.isfile(a)]


FREEZE_AFTER_ROWS = 100_000  # launches and copies of a session whose objects are frozen out of the collector's reach


def freeze_if_large(session) -> None:
    """gc.freeze() for a large session: every object alive (the session, what was built from it) moves to the
    collector's permanent generation, which no collection walks. Only for large ones: whatever cyclic garbage is
    alive then is never collected (nothing, in a command that ends after drawing; something, in a long process
    that calls this, such as a test run)."""
    if session.launch_count() + len(session.activities) > FREEZE_AFTER_ROWS:
        gc.freeze()


def load_session(path: str):
    """Session.load, with a damaged or missing file as one sentence and exit 2."""
    from kernelscope.collect.file_kind import not_a_session
    from kernelscope.model import Session, SessionFileError

    try:
        session = Session.load(path)
    except SessionFileError as e:
        fail(not_a_session(path) or str(e))  # another tool's file: say which command reads it
    # The loaded session lives until the command ends and holds no reference cycles: moved out of the cycle
    # collector's reach, its millions of objects are not walked again by every full collection the views cause.
    freeze_if_large(session)
    from kernelscope.model.schema import skipped_count

    skipped = session.skipped_on_load
    for line in skipped[:SKIPPED_NOTES]:
        note(f"{path}: {line}")
    rest = skipped_count(skipped) - skipped_count(skipped[:SKIPPED_NOTES])  # a "… and N more" line counts N
    if rest:
        note(f"{path}: {rest:,} more damaged parts skipped")
    return session


def add_view_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kernel", type=kernel_regex, metavar="REGEX",
                   help="show the configuration of kernels matching REGEX")
    p.add_argument("--panels", dest="top", type=non_negative, default=3, metavar="N",
                   help="configuration panels for the top N kernels (default 3; 0: the table only)")
    p.add_argument("--top", dest="top", type=non_negative, help=argparse.SUPPRESS)  # the older name of --panels
    p.add_argument("--json", action="store_true", help="print the data as JSON instead")
    p.add_argument("--all-kernels", action="store_true", help="list every kernel in the table")
    p.add_argument("--brief", action="store_true", help="stop after the verdict: where the time goes, what to fix "
                   "first, what was not measured")
    add_style_args(p)


def add_read_sources_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--read-sources", action="store_true", help="read the source files the session names from this "
                   "machine's disk (regular files within the input limit) to say which changed since the run; "
                   "without it no path named in the session is opened")


def source_checksums(session, shown, args: argparse.Namespace) -> dict[str, str] | None:
    """With ``--read-sources``: SHA-256 of each source file ``session`` names, read from disk (collect/
    source_files.py; a refused one gets a note), keyed by its path as ``shown`` (the view's copy of the session,
    its strings made plain) holds it. None without the option: nothing is opened."""
    if not getattr(args, "read_sources", False):
        return None
    from kernelscope.analyze.source_lines import source_files
    from kernelscope.collect.source_files import files_sha256

    recorded = source_files(session)
    read, refused = files_sha256([f.path for f in recorded])
    for why in refused:
        note(f"{why}; it was not read")
    return {view.path: read[f.path] for f, view in zip(recorded, source_files(shown)) if f.path in read}


def add_ceilings_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--ceilings", metavar="FILE", help="measured ceilings from this file (written by kernelscope "
                   "calibrate, e.g. on the GPU the session ran on) instead of this machine's cache")


def ceilings(session, path: str | None):
    """``--ceilings FILE`` when given (bad file: one sentence, exit 2), else the cached ceilings of the session's
    GPU (collect/calibrate). A file from another GPU is used, with a warning on stderr and in its source."""
    from kernelscope.collect.calibrate.ceilings import CalibrationFileError
    from kernelscope.collect.calibrate.lookup import ceilings_for

    try:
        found, other = ceilings_for(session, path)
    except CalibrationFileError as e:
        fail(str(e))
    if other:
        note(f"{other}; the roofs and % of peak are that calibration's", "warning")
    return found


def report(session, kernel: str | None, top: int | None, found_ceilings, disk_sha256: dict[str, str] | None = None):
    """analyze.report.build_report, with a selection it cannot make as one sentence and exit 2."""
    from kernelscope.analyze.report import ReportError, build_report

    try:
        return build_report(session, kernel, top, found_ceilings, disk_sha256)
    except ReportError as e:
        fail(str(e))


def render_show(session, args: argparse.Namespace, banner: str | None = None, found_ceilings=None) -> int:
    """The road of every command that shows a session: ceilings (collect) -> build_report (analyze) ->
    a renderer (render) -> stdout."""
    from kernelscope.model.launch_table import collector_paused
    from kernelscope.render.renderers import get_renderer
    from kernelscope.render.text import display_copy

    timeline = getattr(args, "timeline", None)
    if args.json:
        renderer = get_renderer("json", timeline_limit=timeline)
    else:
        renderer = get_renderer("terminal", width=args.width, color=False if args.no_color else None, banner=banner,
                                all_kernels_in_table=args.all_kernels, timeline_limit=timeline,
                                block=getattr(args, "block", None), brief=getattr(args, "brief", False),
                                whole_run=getattr(args, "whole_run", False))
    # The view's copy of the session and the report live until the command ends and hold no reference cycles:
    # built with the cycle collector paused, then moved out of its reach (as load_session does with the session),
    # so no collection walks their millions of objects.
    with collector_paused():
        shown = session if args.json else display_copy(session)  # the terminal's strings made plain (render.text)
        if found_ceilings is None:
            found_ceilings = ceilings(shown, getattr(args, "ceilings", None))
        r = report(shown, args.kernel, None if renderer.all_kernels else args.top, found_ceilings,
                   source_checksums(session, shown, args))
        freeze_if_large(session)
    sys.stdout.write(renderer.render(r))
    return 0
