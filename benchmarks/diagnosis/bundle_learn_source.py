"""Build the hot lines `kernelscope learn marlin` shows without a GPU from the recorded W4A16 report.

    PYTHONPATH=src:. python benchmarks/diagnosis/bundle_learn_source.py [-f]

Imports tests/data/source/w4a16_learn.ncu-rep.xz (record_source.sh: one launch of the W4A16 GEMM as learn runs it,
with the source sections) as `kernelscope import` does and writes it to
src/kernelscope/data/marlin_source_h100.json.gz (cli/learn_hot_lines.BUNDLED_SOURCE).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
for _p in (ROOT, ROOT / "src"):
    if str(_p) not in sys.path:
        sys.path.insert(0, str(_p))

REPORT = ROOT / "tests" / "data" / "source" / "w4a16_learn.ncu-rep.xz"
OUT = ROOT / "src" / "kernelscope" / "data" / "marlin_source_h100.json.gz"


def main(argv: list[str] | None = None) -> int:
    import lzma

    from kernelscope.collect.ncu.merge import report_time_details, session_from_report
    from kernelscope.collect.ncu.report_reader import read_report
    from kernelscope.collect.trace.api import new_session
    from kernelscope.model import CollectorStatus
    from kernelscope.model import collectors as collector

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-f", "--force", action="store_true", help="overwrite the bundled file")
    args = ap.parse_args(argv)
    name = str(REPORT.relative_to(ROOT))
    with tempfile.TemporaryDirectory() as d:
        rep = Path(d) / "w4a16_learn.ncu-rep"
        rep.write_bytes(lzma.decompress(REPORT.read_bytes()))
        parsed = read_report(rep)
    session = new_session(["ncu-report", name])
    session.environment = {}  # this machine's Python and directory say nothing about the recording
    session_from_report(session, parsed)
    session.artifacts["ncu_report"] = name
    session.collectors[collector.COUNTERS] = CollectorStatus(
        "ok", None, {"report": name, "kernels_profiled": len(parsed.kernels), "imported": True,
                     **report_time_details(parsed)})
    session.save(OUT, force=args.force)
    print(f"{OUT.relative_to(ROOT)}: {OUT.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
