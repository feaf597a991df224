"""`kernelscope show FILE`: draw a saved session (no GPU needed)."""
from __future__ import annotations

import argparse

from kernelscope.cli.common import add_view_args, fail, render_show


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("show", help="draw a session file")
    p.add_argument("file", help="session file written by kernelscope run")
    add_view_args(p)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from kernelscope.model import Session, SessionFileError

    try:
        session = Session.load(args.file)
    except SessionFileError as e:
        fail(str(e))
    return render_show(session, args)
