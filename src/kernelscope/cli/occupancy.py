"""`kernelscope occupancy`: theoretical occupancy of a launch configuration."""
from __future__ import annotations

import argparse
import json
import re

from kernelscope.analyze.arch import ARCHS
from kernelscope.cli.common import WIDTH_HELP, columns, fail, positive

_SIZE = re.compile(r"(\d+)\s*(k|kib)?", re.IGNORECASE)


def parse_size_bytes(text: str, flag: str) -> int:
    """Bytes from ``49152``, ``48k``, ``48K`` or ``48KiB`` (k means 1024 bytes, as in CUDA's tables)."""
    m = _SIZE.fullmatch(text.strip())
    if m is None:
        fail(f"{flag} {text!r} is not a size: give bytes (49152) or KiB with a k, K or KiB suffix (48k)")
    return int(m.group(1)) * (1024 if m.group(2) else 1)


def register(sub: argparse._SubParsersAction) -> None:
    o = sub.add_parser("occupancy", help="theoretical occupancy of a launch configuration")
    o.add_argument("--arch", required=True, help=", ".join(sorted(ARCHS, key=lambda a: int(a[3:]))))
    o.add_argument("--block", required=True, type=positive, help="threads per block")
    o.add_argument("--regs", required=True, type=positive, help="registers per thread")
    o.add_argument("--smem", default="0", metavar="SIZE",
                   help="static + dynamic shared memory per block: bytes, or KiB with k, K or KiB (48k = 49152)")
    o.add_argument("--smem-config", default=None, metavar="SIZE",
                   help="shared-memory carveout per SM, one the architecture offers (e.g. 100k, 228KiB); "
                        "default: the largest")
    o.add_argument("--json", action="store_true", help="print JSON")
    o.add_argument("--no-color", action="store_true", help="plain text output")
    o.add_argument("--width", type=columns, metavar="COLS", help=WIDTH_HELP)
    o.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from kernelscope.analyze.arch import UnknownArchError
    from kernelscope.analyze.occupancy import OccupancyInputError, theoretical_occupancy

    try:
        smem = parse_size_bytes(args.smem, "--smem")
        config = None if args.smem_config is None else parse_size_bytes(args.smem_config, "--smem-config")
        r = theoretical_occupancy(args.arch, args.block, args.regs, smem, config)
    except (UnknownArchError, OccupancyInputError) as e:
        fail(str(e))
    if args.json:
        print(json.dumps(r.as_json()))
        return 0
    from kernelscope.render.occupancy_view import OccupancyView
    from kernelscope.render.console import make_console

    make_console(width=args.width, color=False if args.no_color else None).print(OccupancyView(r))
    return 0
