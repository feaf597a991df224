"""`kernelscope top`: a live terminal dashboard of every GPU on the machine (NVML, GPM)."""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import select
import sys
import time
from typing import Any, Iterator

from kernelscope.cli.common import WIDTH_HELP, columns, fail, positive


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("top", help="live GPU dashboard: utilization, memory, clocks, power, processes")
    p.add_argument("--once", action="store_true", help="print one snapshot and exit")
    p.add_argument("--json", action="store_true", help="print one snapshot as JSON and exit")
    p.add_argument("--interval", type=float, default=500.0, metavar="MS",
                   help="refresh every MS milliseconds (default 500); with --once, the GPM window (at least 260)")
    p.add_argument("--iters", dest="iterations", type=positive, metavar="N", help="stop after N refreshes")
    p.add_argument("--iterations", dest="iterations", type=positive, help=argparse.SUPPRESS)  # older name
    p.add_argument("--width", type=columns, metavar="COLS", help=WIDTH_HELP)
    p.add_argument("--no-color", action="store_true", help="plain text output")
    p.set_defaults(func=main)


def main(args: argparse.Namespace, nvml: Any = None) -> int:
    from kernelscope.collect.nvml.api import NvmlUnavailable
    from kernelscope.collect.nvml.sampler import Monitor

    if not 50 <= args.interval <= 60_000:
        fail(f"--interval takes milliseconds from 50 to 60000, not {args.interval:g}")
    if args.iterations is not None and args.iterations < 1:
        fail("--iterations must be at least 1")
    monitor = Monitor(nvml)
    try:
        monitor.open()
    except NvmlUnavailable as e:
        fail(str(e))
    try:
        if args.json or args.once:
            return _snapshot(monitor, args)
        return _live(monitor, args)
    finally:
        monitor.close()


def _snapshot(monitor, args: argparse.Namespace) -> int:
    from kernelscope import __version__

    from kernelscope.collect.nvml.api import GPM_MIN_WINDOW_NS

    window_ms = max(args.interval, GPM_MIN_WINDOW_NS / 1e6 + 10)  # GPM needs two samples this far apart
    monitor.read()
    time.sleep(window_ms / 1000.0)
    readings = monitor.read()
    if args.json:
        from kernelscope.analyze.gpu_stats import decode_throttle_reasons

        devices = []
        for r in readings:
            d = r.to_dict()
            mask = r.sample.value("throttle_reasons")
            d["throttle_reason_names"] = list(decode_throttle_reasons(mask)) if isinstance(mask, int) else None
            devices.append(d)
        doc = {"kernelscope_version": __version__, "gpm_window_ms": window_ms,
               "driver_version": monitor.driver_version().to_dict(), "devices": devices,
               "unreadable_devices": monitor.unreadable}
        json.dump(doc, sys.stdout, indent=1)
        sys.stdout.write("\n")
        return 0
    from kernelscope.render.console import make_console
    from kernelscope.render.top_view import snapshot_view

    console = make_console(width=args.width, color=False if args.no_color else None)
    console.print(snapshot_view(readings, _driver(monitor), monitor.unreadable))
    return 0


def _driver(monitor) -> str | None:
    m = monitor.driver_version()
    return None if m.is_missing else str(m.value)


@contextlib.contextmanager
def _keys() -> Iterator[bool]:
    """cbreak mode on a terminal, so a single 'q' is read at once; restored on the way out."""
    if not sys.stdin.isatty():
        yield False
        return
    try:
        import termios
        import tty
    except ImportError:  # not a POSIX terminal: Ctrl-C still works
        yield False
        return
    fd = sys.stdin.fileno()
    old = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield True
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, old)


def _wait_for_quit(seconds: float, keys: bool) -> bool:
    """Sleep up to ``seconds``; True when 'q' was pressed."""
    if not keys:
        time.sleep(seconds)
        return False
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        ready, _, _ = select.select([sys.stdin], [], [], left)
        if ready and os.read(sys.stdin.fileno(), 1) in (b"q", b"Q"):
            return True
    return False


def _live(monitor, args: argparse.Namespace) -> int:
    from kernelscope.render.console import make_console
    from kernelscope.render.top_view import live_dashboard

    console = make_console(width=args.width, color=False if args.no_color else None)
    footer = f"every {args.interval:g} ms · q or Ctrl-C to quit"
    try:
        with _keys() as keys:
            live_dashboard(console, monitor.read, _driver(monitor), footer, lambda: monitor.unreadable,
                           args.iterations, lambda: _wait_for_quit(args.interval / 1000.0, keys))
    except KeyboardInterrupt:
        pass
    return 0
