"""The `kernelscope` command: run, show, occupancy, demo.

Bad input gets one sentence on stderr and a non-zero exit, never a traceback
(set KERNELSCOPE_DEBUG=1 to see one for unexpected errors).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import sys
from pathlib import Path
from typing import NoReturn, Sequence

from kernelscope import __version__

EXIT_USAGE = 2


class CLIError(Exception):
    """One sentence for the user; exit code 2."""


def _fail(msg: str, code: int = EXIT_USAGE) -> NoReturn:
    msg = msg.rstrip(".") + "."
    print(f"kernelscope: error: {msg}", file=sys.stderr)
    raise SystemExit(code)


# -- run -----------------------------------------------------------------------
RUN_USAGE = """usage: kernelscope run [-o FILE] [-f] [--keep-trace FILE] -- python SCRIPT [ARGS...]
       kernelscope run [-o FILE] [-f] -m MODULE [ARGS...]

Run a Python workload under the trace pass (PyTorch profiler / CUPTI) and write
a session file. The workload's output and exit code pass through; if it fails
or is interrupted, the partial session is still written.

options:
  -o, --output FILE       session file (default: kernelscope-YYYYmmdd-HHMMSS.json)
  -f, --force-overwrite   overwrite FILE if it exists
  --keep-trace FILE       also keep the raw PyTorch profiler trace (Chrome JSON)
  -m MODULE               run a module, like python -m
  -q, --quiet             do not print the summary line after the run"""


def _parse_run(argv: list[str]) -> dict:
    opts: dict = {"output": None, "force": False, "keep_trace": None, "module": None, "command": [], "quiet": False}
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            print(RUN_USAGE)
            raise SystemExit(0)
        if a == "--":
            opts["command"] = argv[i + 1:]
            break
        if a in ("-o", "--output", "--keep-trace", "-m"):
            if i + 1 >= len(argv):
                _fail(f"{a} needs a value")
            key = {"-o": "output", "--output": "output", "--keep-trace": "keep_trace", "-m": "module"}[a]
            opts[key] = argv[i + 1]
            if a == "-m":
                opts["command"] = argv[i + 2:]
                break
            i += 2
            continue
        if a.startswith("--output="):
            opts["output"] = a.split("=", 1)[1]
        elif a in ("-f", "--force-overwrite"):
            opts["force"] = True
        elif a in ("-q", "--quiet"):
            opts["quiet"] = True
        elif a.startswith("-"):
            _fail(f"unknown run option {a!r} (put the workload after '--')")
        else:
            opts["command"] = argv[i:]
            break
        i += 1
    return opts


def cmd_run(argv: list[str]) -> int:
    from kernelscope.collect.runner import RunError, run

    o = _parse_run(argv)
    out = Path(o["output"] or _dt.datetime.now().strftime("kernelscope-%Y%m%d-%H%M%S.json"))
    if out.exists() and not o["force"]:
        _fail(f"{out} already exists; use -f to overwrite it or -o to choose another file")
    if not out.parent.exists():
        _fail(f"the directory {out.parent} does not exist")
    try:
        result = run(o["command"], out, module=o["module"], keep_trace=o["keep_trace"])
    except RunError as e:
        _fail(str(e))
    if not o["quiet"]:
        s = result.session
        trace = s.collectors.get("trace")
        what = f"{len(s.launches)} kernel launches" if trace and trace.status in ("ok", "partial") else (
            f"no trace: {trace.reason}" if trace else "no trace")
        print(f"kernelscope: session written to {out} ({what}; {s.outcome}, exit code {result.exit_code}). "
              f"View it with: kernelscope show {out}", file=sys.stderr)
    return result.exit_code


# -- show ----------------------------------------------------------------------
def _render_show(session, args: argparse.Namespace, banner: str | None = None) -> int:
    from kernelscope.analyze.summary import select_kernels, summarize

    summary = summarize(session)
    try:
        selected = select_kernels(summary, args.kernel, args.top)
    except re.error as e:
        _fail(f"--kernel {args.kernel!r} is not a valid regular expression ({e})")
    if args.kernel is not None and not selected:
        _fail(f"no kernel matches --kernel {args.kernel!r}; {len(summary.kernels)} kernels are in the session")
    if args.json:
        from kernelscope.render.json_view import show_json

        json.dump(show_json(session, summary, selected if args.kernel else summary.kernels), sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    from kernelscope.render.show import ShowView, make_console

    console = make_console(width=args.width, color=False if args.no_color else None)
    limit = len(summary.kernels) if args.all_kernels else 15
    console.print(ShowView(session, summary, selected, table_limit=limit, banner=banner))
    return 0


def cmd_show(args: argparse.Namespace) -> int:
    from kernelscope.model import Session, SessionFileError

    try:
        session = Session.load(args.file)
    except SessionFileError as e:
        _fail(str(e))
    return _render_show(session, args)


# -- occupancy -----------------------------------------------------------------
def cmd_occupancy(args: argparse.Namespace) -> int:
    from kernelscope.analyze.arch import UnknownArchError
    from kernelscope.analyze.occupancy import OccupancyInputError, theoretical_occupancy

    try:
        r = theoretical_occupancy(args.arch, args.block, args.regs, args.smem, args.smem_config)
    except (UnknownArchError, OccupancyInputError) as e:
        _fail(str(e))
    if args.json:
        print(json.dumps(r.as_json()))
        return 0
    from kernelscope.render.occupancy_view import OccupancyView
    from kernelscope.render.show import make_console

    make_console(color=False if args.no_color else None).print(OccupancyView(r))
    return 0


# -- demo ----------------------------------------------------------------------
def cmd_demo(args: argparse.Namespace) -> int:
    from kernelscope.demo import bundled_session, gpu_available

    ok, reason = gpu_available()
    if not ok:
        session, label = bundled_session()
        banner = (f"No CUDA GPU is available here ({reason}); showing a session recorded on {label}, "
                  "bundled with kernelscope.")
        return _render_show(session, args, banner=banner)
    out = Path(args.output)
    if out.exists() and not args.force_overwrite:
        _fail(f"{out} already exists; use -f to overwrite it or -o to choose another file")
    from kernelscope.collect.runner import run
    from kernelscope.model import Session

    result = run([], out, module="kernelscope.kernels.demo")
    if result.exit_code != 0:
        _fail(f"the demo workload failed with exit code {result.exit_code}; its session is in {out}", result.exit_code)
    print(f"kernelscope: demo session written to {out}", file=sys.stderr)
    return _render_show(Session.load(out), args)


def _add_view_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kernel", metavar="REGEX", help="show the configuration of kernels matching REGEX")
    p.add_argument("--top", type=int, default=3, metavar="N", help="configuration panels for the top N kernels (default 3)")
    p.add_argument("--json", action="store_true", help="print the data as JSON instead")
    p.add_argument("--all-kernels", action="store_true", help="list every kernel in the table")
    p.add_argument("--width", type=int, metavar="COLS", help="render at this terminal width")
    p.add_argument("--no-color", action="store_true", help="plain text output")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kernelscope", description="Shows what a GPU kernel really does on the hardware.")
    p.add_argument("--version", action="version", version=f"kernelscope {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.add_parser("run", help="profile a workload and write a session file", add_help=False)
    s = sub.add_parser("show", help="draw a session file")
    s.add_argument("file", help="session file written by kernelscope run")
    _add_view_args(s)
    o = sub.add_parser("occupancy", help="theoretical occupancy of a launch configuration")
    o.add_argument("--arch", required=True, help="sm_80, sm_86, sm_89, sm_90 ...")
    o.add_argument("--block", required=True, type=int, help="threads per block")
    o.add_argument("--regs", required=True, type=int, help="registers per thread")
    o.add_argument("--smem", type=int, default=0, help="static + dynamic shared memory per block, bytes")
    o.add_argument("--smem-config", type=int, default=None, metavar="BYTES",
                   help="shared-memory carveout per SM (default: the largest the architecture allows)")
    o.add_argument("--json", action="store_true", help="print JSON")
    o.add_argument("--no-color", action="store_true", help="plain text output")
    d = sub.add_parser("demo", help="profile a built-in Triton kernel (or show a bundled session without a GPU)")
    d.add_argument("-o", "--output", default="kernelscope-demo.json", help="session file (default kernelscope-demo.json)")
    d.add_argument("-f", "--force-overwrite", action="store_true", help="overwrite the session file")
    _add_view_args(d)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        if argv and argv[0] == "run":
            return cmd_run(argv[1:])
        parser = build_parser()
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help()
            return EXIT_USAGE
        return {"show": cmd_show, "occupancy": cmd_occupancy, "demo": cmd_demo}[args.command](args)
    except KeyboardInterrupt:
        print("kernelscope: interrupted.", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except SystemExit:
        raise
    except Exception as e:  # an unexpected bug: one line, with a way to see more
        if os.environ.get("KERNELSCOPE_DEBUG"):
            raise
        print(f"kernelscope: internal error: {type(e).__name__}: {e} (set KERNELSCOPE_DEBUG=1 for the traceback).",
              file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
