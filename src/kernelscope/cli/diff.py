"""`kernelscope diff A.json B.json`: compare two sessions kernel by kernel (exit 1 with
--fail-if-slower when a kernel got slower by more than PCT % beyond the noise)."""
from __future__ import annotations

import argparse
import json
import re
import sys

from kernelscope.cli.calibrate import add_ceilings_arg
from kernelscope.cli.common import columns, fail, load_session

EXIT_SLOWER = 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diff", help="compare two session files kernel by kernel")
    p.add_argument("a", help="the baseline session (A)")
    p.add_argument("b", help="the session compared with it (B)")
    p.add_argument("--fail-if-slower", type=float, metavar="PCT",
                   help="exit 1 if a kernel's median time grew by more than PCT %% beyond the run-to-run spread")
    p.add_argument("--kernel", metavar="REGEX", help="only kernels whose full or short name matches REGEX")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("--width", type=columns, metavar="COLS", help="render at this terminal width (>= 40)")
    p.add_argument("--no-color", action="store_true", help="plain text output")
    add_ceilings_arg(p)
    p.set_defaults(func=main)


def _json(d, a: str, b: str, fail_pct: float | None) -> dict:
    def stats(s):
        return None if s is None else {"launches": s.launches, "median_ns": s.median_ns, "min_ns": s.min_ns,
                                       "max_ns": s.max_ns, "q1_ns": s.q1_ns, "q3_ns": s.q3_ns, "source": s.source}

    def change(c):
        def val(m):
            return None if m is None or m.is_missing else m.value
        return {"label": c.label, "a": val(c.a), "b": val(c.b), "change_pct": c.change_pct}

    return {
        "schema": "kernelscope-diff/1", "a": a, "b": b, "device_warning": d.device.warning,
        "total_a_ns": d.total_a_ns, "total_b_ns": d.total_b_ns, "total_change_pct": d.total_change_pct,
        "fail_if_slower_pct": fail_pct,
        "slower": [k.name for k in d.slower_than(fail_pct)] if fail_pct is not None else None,
        "kernels": [{"name": k.name, "short_name": k.short_name, "a": stats(k.a), "b": stats(k.b),
                     "change_pct": k.change_pct, "spread_ns": k.spread_ns, "spread_basis": k.spread_basis,
                     "verdict": k.verdict, "single_launch": k.single_launch, "bound_a": k.bound_a,
                     "bound_b": k.bound_b, "throughput": [change(c) for c in k.throughput],
                     "counters": [change(c) for c in k.counters]} for k in d.kernels],
    }


def main(args: argparse.Namespace) -> int:
    from kernelscope.analyze.diff import SessionDiff, diff_sessions
    from kernelscope.analyze.analysis import analyze_session
    from kernelscope.cli.calibrate import ceilings_for

    if args.fail_if_slower is not None and args.fail_if_slower < 0:
        fail("--fail-if-slower takes a non-negative percentage")
    sa, sb = load_session(args.a), load_session(args.b)
    if not args.json:  # the terminal prints the sessions' strings: make them plain text first
        from kernelscope.render.text import display_copy

        sa, sb = display_copy(sa), display_copy(sb)
    d = diff_sessions(analyze_session(sa, ceilings_for(sa, args.ceilings)),
                      analyze_session(sb, ceilings_for(sb, args.ceilings)), sa, sb)
    if args.kernel is not None:
        try:
            rx = re.compile(args.kernel)
        except re.error as e:
            fail(f"--kernel {args.kernel!r} is not a valid regular expression ({e})")
        kept = tuple(k for k in d.kernels if rx.search(k.name) or rx.search(k.short_name))
        if not kept:
            fail(f"no kernel of either session matches --kernel {args.kernel!r}")
        d = SessionDiff(kept, d.device, d.total_a_ns, d.total_b_ns, d.total_change_pct)
    if d.device.warning:
        print(f"kernelscope: warning: {d.device.warning}.", file=sys.stderr)
    if args.json:
        json.dump(_json(d, args.a, args.b, args.fail_if_slower), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        from kernelscope.render.diff_view import DiffView
        from kernelscope.render.show import make_console

        console = make_console(width=args.width, color=False if args.no_color else None)
        console.print(DiffView(d, args.a, args.b, args.fail_if_slower))
    if args.fail_if_slower is not None and d.slower_than(args.fail_if_slower):
        return EXIT_SLOWER
    return 0
