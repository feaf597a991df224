"""`kernelscope diff A.json B.json`: compare two sessions as programs (step time, breakdown, which findings went
away and their estimated against measured gains) and kernel by kernel (exit 1 with --fail-if-slower when a kernel
got slower by more than PCT % beyond the noise). Terminal and --json; there is no HTML output for a diff.

`kernelscope diff s.json --ranks 0 1` compares two ranks of one multi-GPU session the same way (rank 0 is A,
rank 1 is B); `diff a.json b.json --ranks 0 1` compares rank 0 of a.json with rank 1 of b.json."""
from __future__ import annotations

import argparse
import json
import math
import re
import sys

from kernelscope.cli.common import (WIDTH_HELP, add_ceilings_arg, ceilings, columns, fail, kernel_regex, load_session,
                                     non_negative, note)

EXIT_SLOWER = 1


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("diff", help="compare two session files, or two ranks of one, as programs and kernel by "
                       "kernel")
    p.add_argument("a", help="the baseline session (A)")
    p.add_argument("b", nargs="?", help="the session compared with it (B); with --ranks, default: A itself")
    p.add_argument("--ranks", nargs=2, type=non_negative, metavar=("RANK_A", "RANK_B"),
                   help="compare rank RANK_A of A with rank RANK_B of B (of A when B is not given)")
    p.add_argument("--fail-if-slower", type=float, metavar="PCT",
                   help="exit 1 if a kernel's median time grew by more than PCT %% beyond the run-to-run spread")
    p.add_argument("--kernel", type=kernel_regex, metavar="REGEX",
                   help="only kernels whose full or short name matches REGEX")
    p.add_argument("--json", action="store_true", help="print the comparison as JSON")
    p.add_argument("--width", type=columns, metavar="COLS", help=WIDTH_HELP)
    p.add_argument("--no-color", action="store_true", help="plain text output")
    add_ceilings_arg(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from kernelscope.analyze.diff import diff_sessions, only_kernels
    from kernelscope.analyze.program_diff import program_diff
    from kernelscope.analyze.report import build_report

    # NaN compares false with everything: --fail-if-slower nan was a gate that never failed
    if args.fail_if_slower is not None and not 0 <= args.fail_if_slower < math.inf:
        fail("--fail-if-slower takes a finite, non-negative percentage")
    if args.b is None and args.ranks is None:
        fail("diff needs two sessions (diff A.json B.json) or two ranks of one (diff s.json --ranks 0 1)")
    name_a, name_b = args.a, args.b or args.a
    sa = load_session(args.a)
    sb = sa if args.b is None else load_session(args.b)
    if args.ranks is not None:
        sa, sb = _rank(sa, args.a, args.ranks[0]), _rank(sb, name_b, args.ranks[1])
        name_a, name_b = f"{name_a} rank {args.ranks[0]}", f"{name_b} rank {args.ranks[1]}"
    from kernelscope.analyze.diff import device_note

    warning = device_note(sa, sb).warning  # from the names as stored: stderr is not Rich markup
    if not args.json:  # the terminal prints the sessions' strings: make them plain text first
        from kernelscope.render.text import display_copy

        sa, sb = display_copy(sa), display_copy(sb)
    ra = build_report(sa, ceilings=ceilings(sa, args.ceilings))
    rb = build_report(sb, ceilings=ceilings(sb, args.ceilings))
    d = replace(diff_sessions(ra.analysis, rb.analysis, sa, sb), program=program_diff(ra.verdict, rb.verdict))
    if args.kernel is not None:
        try:
            d = only_kernels(d, args.kernel)
        except re.error as e:
            fail(f"--kernel {args.kernel!r} is not a valid regular expression ({e})")
        if not d.kernels:
            fail(f"no kernel of either session matches --kernel {args.kernel!r}")
    if warning:
        note(warning, "warning")  # device names from the files: escaped like every such string
    if args.json:
        from kernelscope.render.diff_view import diff_json

        json.dump(diff_json(d, name_a, name_b, args.fail_if_slower), sys.stdout, indent=1)
        sys.stdout.write("\n")
    else:
        from kernelscope.render.console import make_console
        from kernelscope.render.diff_view import DiffView

        console = make_console(width=args.width, color=False if args.no_color else None)
        console.print(DiffView(d, name_a, name_b, args.fail_if_slower))
    if args.fail_if_slower is not None and d.slower_than(args.fail_if_slower):
        return EXIT_SLOWER
    return 0


def _rank(session, path: str, rank: int):
    """One rank of a session as a session of its own (a one-process session is rank 0)."""
    from kernelscope.collect.ranks import split_ranks

    parts = {p.info.rank: p.session for p in split_ranks(session, path)}
    if rank not in parts:
        fail(f"{path} has no rank {rank} (its ranks: {', '.join(map(str, sorted(parts)))})")
    return parts[rank]
