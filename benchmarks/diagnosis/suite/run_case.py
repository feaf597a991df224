"""One workload per case and variant, for `kernelscope run`:

    PYTHONPATH=src python benchmarks/diagnosis/suite/run_case.py CASE VARIANT [--repeats N]
    python -m kernelscope run --counters --region CASE -o s.json.gz -- \
        python benchmarks/diagnosis/suite/run_case.py CASE VARIANT

Builds the inputs, runs the variant twice to warm up (compiles Triton kernels, builds the
CUDA library), checks its result against the torch reference, then runs it --repeats times,
each inside kernelscope.region(CASE), so the counter pass can target exactly these kernels.
VARIANT: defect | fixed | control. Exit code 2 for a bad case or variant, 1 when the result
is wrong or the case cannot run here.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
for p in (ROOT, ROOT / "src"):  # the repo (benchmarks package) and kernelscope, without pip install
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


def main(argv: list[str] | None = None) -> int:
    from benchmarks.diagnosis.suite.config import CASE_BY_NAME

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("case", help=f"one of: {', '.join(CASE_BY_NAME)}")
    ap.add_argument("variant", help="defect | fixed | control")
    ap.add_argument("--repeats", type=int, default=3, help="steps inside the region (default 3)")
    ap.add_argument("--size", choices=("full", "tiny"), default="full")
    ap.add_argument("--device", default=None, help="default: cuda when available, else cpu (Triton interpreter)")
    ap.add_argument("--no-check", action="store_true", help="skip the comparison with the torch reference")
    args = ap.parse_args(argv)
    spec = CASE_BY_NAME.get(args.case)
    if spec is None:
        print(f"run_case: error: no case {args.case!r}; cases: {', '.join(CASE_BY_NAME)}.", file=sys.stderr)
        return 2
    if args.variant not in spec.variants:
        print(f"run_case: error: case {spec.name} has variants {', '.join(spec.variants)}, not {args.variant!r}.",
              file=sys.stderr)
        return 2
    if args.repeats < 1:
        print("run_case: error: --repeats must be at least 1.", file=sys.stderr)
        return 2

    import torch

    import kernelscope
    from benchmarks.diagnosis.suite.cases import NeedsGpu, prepare

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        os.environ.setdefault("TRITON_INTERPRET", "1")  # read when Triton kernels are first launched
    try:
        prepared = prepare(spec, args.variant, device, args.size)
    except NeedsGpu as e:
        print(f"run_case: error: {e}.", file=sys.stderr)
        return 1
    for _ in range(2):  # warm-up: compile, build, first-touch
        prepared.run()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    if not args.no_check:
        try:
            prepared.check()
        except AssertionError as e:
            print(f"run_case: error: wrong result: {e}.", file=sys.stderr)
            return 1
    for _ in range(args.repeats):
        with kernelscope.region(spec.name):
            prepared.run()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
    print(f"run_case: {spec.name} {args.variant}: {args.repeats} steps ({args.size}, {device}) "
          f"{prepared.info or ''}".rstrip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
