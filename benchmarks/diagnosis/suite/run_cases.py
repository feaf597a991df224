"""Several cases' variants in one process, each measured launch bracketed by cudaProfilerStart/Stop, for
`ncu --profile-from-start off`: every set's report holds exactly one step of each case (warm-up left out),
inside the NVTX range named after the case (kernelscope.region), so a report's results map back to cases.

    PYTHONPATH=src:. python benchmarks/diagnosis/suite/run_cases.py --cases a,b [--variant defect]

A case that fails to build or run is reported on stderr and skipped; the others still run.
"""
from __future__ import annotations

import argparse
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
for p in (ROOT, ROOT / "src"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


def main(argv: list[str] | None = None) -> int:
    from benchmarks.diagnosis.suite.config import CASE_BY_NAME

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", required=True, help=f"comma-separated, of: {', '.join(CASE_BY_NAME)}")
    ap.add_argument("--variant", default="defect", help="defect | fixed | control (cases without it are skipped)")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.cases.split(",") if n.strip()]
    unknown = [n for n in names if n not in CASE_BY_NAME]
    if unknown:
        print(f"run_cases: error: unknown case(s) {', '.join(unknown)}.", file=sys.stderr)
        return 2
    import torch

    import kernelscope
    from benchmarks.diagnosis.suite.cases import prepare

    failed = 0
    for name in names:
        spec = CASE_BY_NAME[name]
        if args.variant not in spec.variants:
            continue
        try:
            prepared = prepare(spec, args.variant, "cuda", "full")
            for _ in range(2):  # compile, build, first touch: outside the profiled window
                prepared.run()
            torch.cuda.synchronize()
            torch.cuda.profiler.start()
            with kernelscope.region(spec.name):
                prepared.run()
            torch.cuda.synchronize()
            torch.cuda.profiler.stop()
            print(f"run_cases: {name} {args.variant} ok", flush=True)
        except Exception:  # one broken case must not cost the others their results
            failed += 1
            print(f"run_cases: {name} {args.variant} FAILED", file=sys.stderr, flush=True)
            traceback.print_exc()
        finally:
            prepared = None
            torch.cuda.empty_cache()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
