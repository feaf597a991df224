"""`kernelscope occupancy`: theoretical occupancy of a launch configuration."""
from __future__ import annotations

import argparse
import json

from kernelscope.cli.common import fail


def register(sub: argparse._SubParsersAction) -> None:
    o = sub.add_parser("occupancy", help="theoretical occupancy of a launch configuration")
    o.add_argument("--arch", required=True, help="sm_70, sm_75, sm_80, sm_86, sm_87, sm_89, sm_90")
    o.add_argument("--block", required=True, type=int, help="threads per block")
    o.add_argument("--regs", required=True, type=int, help="registers per thread")
    o.add_argument("--smem", type=int, default=0, help="static + dynamic shared memory per block, bytes")
    o.add_argument("--smem-config", type=int, default=None, metavar="BYTES",
                   help="shared-memory carveout per SM (default: the largest the architecture allows)")
    o.add_argument("--json", action="store_true", help="print JSON")
    o.add_argument("--no-color", action="store_true", help="plain text output")
    o.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from kernelscope.analyze.arch import UnknownArchError
    from kernelscope.analyze.occupancy import OccupancyInputError, theoretical_occupancy

    try:
        r = theoretical_occupancy(args.arch, args.block, args.regs, args.smem, args.smem_config)
    except (UnknownArchError, OccupancyInputError) as e:
        fail(str(e))
    if args.json:
        print(json.dumps(r.as_json()))
        return 0
    from kernelscope.render.occupancy_view import OccupancyView
    from kernelscope.render.show import make_console

    make_console(color=False if args.no_color else None).print(OccupancyView(r))
    return 0
