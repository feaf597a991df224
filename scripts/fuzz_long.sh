#!/usr/bin/env bash
# The long fuzz run behind benchmarks/results/RESULTS.md: the reader fuzz suite in PROCS parallel processes,
# each with its own Hypothesis seed and EXAMPLES examples per reader, tallies merged at the end.
# Usage: scripts/fuzz_long.sh [PROCS] [EXAMPLES] [OUTDIR]   (needs hypothesis, rich, ncu_report; matplotlib for plot)
set -uo pipefail
cd "$(dirname "$0")/.."
PROCS=${1:-14}; EXAMPLES=${2:-80}; OUTDIR=${3:-fuzz-out}
mkdir -p "$OUTDIR"
# matplotlib builds its font cache on first use on a fresh machine (tens of seconds): do it once, before the
# time-limited runs, so no process counts it against a reader
python -c "import matplotlib; matplotlib.use('Agg'); import matplotlib.pyplot" 2>/dev/null
for i in $(seq 1 "$PROCS"); do
  KERNELSCOPE_FUZZ_EXAMPLES=$EXAMPLES KERNELSCOPE_FUZZ_REPORT="$OUTDIR/tally_$i.json" \
    python -m pytest -q -p no:cacheprovider -m slow tests/test_fuzz_readers.py --hypothesis-seed="$i" \
    >"$OUTDIR/log_$i.txt" 2>&1 &
done
wait
python - "$OUTDIR" <<'PY'
import json, pathlib, sys, collections
out = pathlib.Path(sys.argv[1]); total = collections.Counter()
for f in sorted(out.glob("tally_*.json")):
    total.update(json.loads(f.read_text()))
failed = [f.name for f in sorted(out.glob("log_*.txt")) if " failed" in f.read_text().splitlines()[-1]]
(out / "tally.json").write_text(json.dumps(dict(sorted(total.items())), indent=1) + "\n")
inputs = sum(v for k, v in total.items() if k.endswith("inputs"))
print(f"processes: {len(list(out.glob('tally_*.json')))}, mutated inputs: {inputs:,}, logs with failures: {failed or 'none'}")
for k, v in sorted(total.items()):
    print(f"{k:32s} {v:>8,}")
PY
