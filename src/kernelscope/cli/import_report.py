"""`kernelscope import`: a session from files other tools wrote, picked by content: an Nsight Compute
report (.ncu-rep, made by hand with any `ncu` invocation), or PyTorch profiler / Kineto traces
(.json or .json.gz, one per rank, or directories of them), for `show` to render."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kernelscope.cli.common import SKIPPED_NOTES, fail, note, output_path
from kernelscope.model.escape import visible
from kernelscope.model.session_file import PART_WORDS
from kernelscope.model import collectors as collector

NAME = "import"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="turn an Nsight Compute report or PyTorch profiler traces into a session")
    p.add_argument("report", nargs="+", metavar="INPUT",
                   help="an .ncu-rep file written by ncu -o, or PyTorch profiler traces (.json/.json.gz, "
                        "one per rank) or directories of them (tensorboard_trace_handler, VLLM_TORCH_PROFILER_DIR)")
    p.add_argument("-o", "--output", help="session file (default: INPUT with .json, or INPUT.session.json for traces)")
    p.add_argument("-f", "--force-overwrite", action="store_true", help="overwrite the session file")
    p.add_argument("--partial", action="store_true",
                   help="keep the whole kernel results of a report that ends early (default: refuse it)")
    p.set_defaults(func=main)


def _is_trace_input(path: Path) -> bool:
    """JSON (plain or gzip) or a directory: traces. Anything else goes to the Nsight Compute reader."""
    if path.is_dir():
        return True
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return path.name.endswith((".json", ".json.gz"))
    return head[:2] == b"\x1f\x8b" or head.lstrip()[:1] in (b"{", b"[")


def main(args: argparse.Namespace) -> int:
    from kernelscope.model.files import InputFileError, check_input

    inputs = [Path(p) for p in args.report]
    for p in inputs:  # before anything opens them: a FIFO would block, a device would never end
        try:
            if not p.is_dir():
                check_input(p)  # and within the input limit: ncu_report reads a report whole
        except FileNotFoundError:
            fail(f"{p}: no such file or directory")
        except InputFileError as e:
            fail(str(e))
        except OSError as e:
            fail(f"{p} cannot be read ({e.strerror or e})")
    if len(inputs) > 1 or _is_trace_input(inputs[0]):
        return _import_traces(args, inputs)
    return _import_ncu(args, inputs[0])


def _import_traces(args: argparse.Namespace, inputs: list[Path]) -> int:
    from kernelscope.collect.trace.kineto_import import TraceImportError, import_traces

    if args.partial:
        fail("--partial is for Nsight Compute reports; a damaged trace is left out with a note instead")
    first = inputs[0]
    base = first.name.removesuffix(".gz").removesuffix(".json").removesuffix(".pt.trace")
    files_in = [f for p in inputs if p.is_dir() for f in p.iterdir()] + [p for p in inputs if not p.is_dir()]
    # the name as typed: "-o dir/" names a directory, which Path() would make a file name
    out = output_path(args.output if args.output is not None else first.parent / f"{base}.session.json",
                      args.force_overwrite, files_in, "session file")
    try:
        imported = import_traces(inputs)
    except TraceImportError as e:
        fail(str(e))
    for line in imported.notes:
        note(line)
    session = _loadable(imported.joined.session, out)
    session.save(out, force=args.force_overwrite)
    ranks = f"{len(session.ranks)} rank{'s' if len(session.ranks) != 1 else ''}, " if session.ranks else ""
    n = len(session.launch_table())  # columns: no Launch object per kernel to count them
    files = f"{len(imported.files)} trace file{'s' if len(imported.files) != 1 else ''}"
    print(visible(f"kernelscope: {ranks}{n:,} kernel launch{'es' if n != 1 else ''} from {files} written to {out}. "
                  f"View them with: kernelscope show {out}"), file=sys.stderr)
    return 0


def _import_ncu(args: argparse.Namespace, report: Path) -> int:
    from kernelscope.collect.file_kind import NCU_REPORT, file_kind
    from kernelscope.collect.trace.api import new_session
    from kernelscope.collect.ncu.merge import report_time_details, session_from_report
    from kernelscope.collect.ncu.report_reader import NcuReportError, read_report
    from kernelscope.model import CollectorStatus

    if report.is_file() and file_kind(report) != NCU_REPORT:  # before the reader is looked for: a PNG needs none
        fail(f"{report} is neither an Nsight Compute report (it does not start as one) nor a PyTorch profiler "
             "trace (not JSON): kernelscope import reads .ncu-rep files written by ncu -o and the profiler's "
             ".json / .json.gz traces")
    out = output_path(args.output if args.output is not None else report.with_suffix(".json"), args.force_overwrite,
                      [report], "session file")
    try:
        parsed = read_report(report, partial=args.partial)
    except NcuReportError as e:
        fail(str(e))
    session = new_session(["ncu-report", str(report)])
    session_from_report(session, parsed)
    session.artifacts["ncu_report"] = str(report)
    details = {"report": str(report), "kernels_profiled": len(parsed.kernels),
               "imported": True,  # created_utc = import time
               **report_time_details(parsed)}
    session.collectors[collector.COUNTERS] = CollectorStatus(
        "partial" if parsed.partial_note else "ok", parsed.partial_note, details)
    if parsed.partial_note:
        note(parsed.partial_note)
    session = _loadable(session, out, lambda error: _report_damage(parsed, report, out, error))
    session.save(out, force=args.force_overwrite)
    results = f"{len(parsed.kernels)} kernel result{'s' if len(parsed.kernels) != 1 else ''}"
    print(visible(f"kernelscope: {results} from {report} written to {out}. View them with: kernelscope show {out}"),
          file=sys.stderr)
    return 0


def _report_damage(parsed, report: Path, out: Path, error: str) -> str:
    """A report whose session would not load, as damage of the report: the first result whose own session would
    not load, and the field (its kernel name, its launch configuration, ...); the report's device otherwise."""
    import dataclasses
    import re

    from kernelscope.collect.ncu.merge import session_from_report
    from kernelscope.collect.trace.api import new_session
    from kernelscope.model import SessionFileError

    def field(e: str) -> str:
        where = e.split(" would not load: ", 1)[-1].rstrip(".")
        head = re.match(r"[A-Za-z_]+", where)
        path, _, what = where.partition(": ")
        return f"its {PART_WORDS.get(head.group() if head else '', path)} is unreadable ({what or where})"

    for k in parsed.kernels:
        one = new_session(["ncu-report", str(report)])
        session_from_report(one, dataclasses.replace(parsed, kernels=[k]))
        try:
            one.checked(out)
        except SessionFileError as e:
            name = f" ({k.name})" if isinstance(k.name, str) and k.name else ""
            return f"{report} is damaged: result {k.index}{name}: {field(str(e))}"
    return f"{report} is damaged: {field(error)}"


def _loadable(session, out: Path, damage=None):
    """The session as `show` will load it: the loader's own validator on what save() writes. A value no session
    file may hold is one sentence (exit 2), not a file that `show` refuses: ``damage(error)`` says it as damage
    of the input where one was read; parts the loader would skip are left out here, each named in a note."""
    from kernelscope.model import SessionFileError

    try:
        checked = session.checked(out)
    except SessionFileError as e:
        fail(f"nothing was written: {damage(str(e)) if damage is not None else e}")
    from kernelscope.model.schema import skipped_count

    for line in checked.skipped_on_load[:SKIPPED_NOTES]:
        note(f"left out of {out}: {line}")
    rest = skipped_count(checked.skipped_on_load) - skipped_count(checked.skipped_on_load[:SKIPPED_NOTES])
    if rest:  # a "… and N more" line counts N
        note(f"left out of {out}: {rest:,} more parts")
    checked.skipped_on_load = []
    return checked
