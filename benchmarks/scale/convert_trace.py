"""`run`'s conversion step alone: a PyTorch profiler (Kineto) trace file -> a saved session.

The same calls the trace pass makes after the workload (collect/trace/recorder.py): read the trace JSON,
parse it into launches, activities and regions (collect/trace/kineto.py), save the session.
Usage: convert_trace.py TRACE.json[.gz] OUT.json
"""
from __future__ import annotations

import gzip
import json
import sys
import time
from pathlib import Path

from kernelscope.collect.trace.kineto import parse_trace
from kernelscope.model import Session


def main(argv: list[str]) -> int:
    trace, out = Path(argv[0]), Path(argv[1])
    t0 = time.perf_counter()
    raw = trace.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    del raw
    t1 = time.perf_counter()
    parsed = parse_trace(doc)
    del doc
    t2 = time.perf_counter()
    s = Session(command=["convert_trace"], activities=parsed.activities, regions=parsed.regions,
                time_origin_ns=parsed.time_origin_ns)
    s.set_launch_table(parsed.table)  # as the recorder does: no Launch object per kernel
    s.save(out)
    t3 = time.perf_counter()
    print(f"read {t1 - t0:.2f} s, parse {t2 - t1:.2f} s, save {t3 - t2:.2f} s: {len(parsed.table)} launches",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
