"""`kernelscope import REPORT.ncu-rep`: a session from an Nsight Compute report made
by hand (CUDA C++, CUTLASS, any `ncu` invocation), for `show` to render."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from kernelscope.cli.common import fail, output_path
from kernelscope.model import collectors as collector

NAME = "import"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="turn an Nsight Compute report (.ncu-rep) into a session")
    p.add_argument("report", help="an .ncu-rep file written by ncu -o")
    p.add_argument("-o", "--output", help="session file (default: REPORT with .json)")
    p.add_argument("-f", "--force-overwrite", action="store_true", help="overwrite the session file")
    p.add_argument("--partial", action="store_true",
                   help="keep the whole kernel results of a report that ends early (default: refuse it)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from kernelscope.collect.trace.api import new_session
    from kernelscope.collect.ncu.merge import report_time_details, session_from_report
    from kernelscope.collect.ncu.report_reader import NcuReportError, read_report
    from kernelscope.model import CollectorStatus

    report = Path(args.report)
    out = Path(args.output) if args.output else report.with_suffix(".json")
    output_path(out, args.force_overwrite, [report], "session file")
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
        print(f"kernelscope: note: {parsed.partial_note}.", file=sys.stderr)
    session.save(out)
    print(f"kernelscope: {len(parsed.kernels)} kernel results from {report} written to {out}. "
          f"View them with: kernelscope show {out}", file=sys.stderr)
    return 0
