"""`kernelscope merge A.json B.json -o ALL.json`: join sessions of one job recorded on different hosts
(each holding some of its ranks) into one session; their clocks are aligned on the collectives' ends."""
from __future__ import annotations

import argparse
import sys

from kernelscope.cli.common import fail, load_session, note, output_path
from kernelscope.model.escape import visible


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("merge", help="join sessions of one multi-GPU job recorded on different hosts")
    p.add_argument("sessions", nargs="+", metavar="SESSION", help="session files, each with some ranks of the job")
    p.add_argument("-o", "--output", required=True, help="the joined session file")
    p.add_argument("-f", "--force-overwrite", action="store_true", help="overwrite the output if it exists")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from kernelscope.collect.ranks import NoRankToJoin, join_ranks, split_ranks
    from kernelscope.collect.ranks_align import clock_offset
    from kernelscope.render.fmt import duration, plural

    if len(args.sessions) < 2:
        fail("merge needs at least two session files")
    out = output_path(args.output, args.force_overwrite, args.sessions, "session file")
    groups = [split_ranks(load_session(path), path) for path in args.sessions]
    reference = groups[0]
    for path, parts in zip(args.sessions[1:], groups[1:]):
        found = clock_offset(reference, parts)
        if found is None:
            note(f"{path} shares no collective with {args.sessions[0]}, so its clock cannot be aligned; its ranks "
                 "are kept on their own clock (alignment N/A)")
            continue
        offset, error, used = found
        for p in parts:
            p.info.clock_offset_ns, p.info.alignment_error_ns = offset, error
        shift = f"{'-' if offset < 0 else '+'}{duration(abs(offset))}" if offset else "0 ns"  # not "-0.000 ms"
        print(visible(f"kernelscope: {path}: clock offset {shift}, aligned on {used} collective "
                      f"ends, alignment error {duration(error)}."), file=sys.stderr)
    try:
        joined = join_ranks([p for parts in groups for p in parts], command=["merge", *args.sessions])
    except NoRankToJoin as e:
        fail(str(e))
    for line in joined.notes:
        note(line)
    joined.session.save(out, force=args.force_overwrite)
    ranks = plural(len(joined.session.ranks), "rank")
    print(visible(f"kernelscope: {ranks} from {len(args.sessions)} sessions written to {out}. View them with: "
                  f"kernelscope show {out}"), file=sys.stderr)
    return 0
