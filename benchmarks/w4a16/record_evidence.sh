#!/usr/bin/env bash
# The measurements behind benchmarks/w4a16/NOTES.md "Where the gap stands", on a GPU machine:
#   OUT=/tmp/ev bash benchmarks/w4a16/record_evidence.sh
# the harness's own per-call time, the block recorder on the tuned launches (a kernelscope session),
# and kernelscope counter profiles (ncu) of the tuned m = 1 and m = 256 launches at 8192x8192.
# Copy $OUT into benchmarks/w4a16/runs/<label>/ (gzip the sessions). Clocks are never changed. ~3 minutes.
set -u
cd "$(dirname "$0")/../.."
O=${OUT:-/tmp/kernelscope-w4a16-evidence}
mkdir -p "$O"
export PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
if [ -d .whl ]; then  # the ncu_report reader CI uses (PyPI ncu-report), carried as a wheel
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/ncu_report-*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site
fi
KS="python3 -m kernelscope"
python3 benchmarks/w4a16/harness_floor.py | tee "$O/harness_floor.txt"
timeout 120 $KS run -f -o "$O/blocks_h100.json" -- python3 benchmarks/w4a16/block_timeline.py \
  --points 4096x4096x1,8192x8192x1,28672x8192x1,8192x8192x256 > "$O/blocks_run.txt" 2>&1 || echo "blocks rc=$?"
grep programs "$O/blocks_run.txt"
for P in "8192 8192 1" "8192 8192 256"; do
  set -- $P
  CFG=$(python3 -c "
import json; t = json.load(open('src/kernelscope/kernels/marlin/tuned_h100.json'))
print(json.dumps(next(r['launch'] for r in t['configs'] if (r['k'], r['n'], r['m']) == ($1, $2, $3))))")
  S="$O/profile_m$3_k$1_n$2_h100"
  timeout 150 $KS run -f --counters --kernel _w4a16_kernel -o "$S.json" -- \
    python3 benchmarks/w4a16/profile_point.py --k "$1" --n "$2" --m "$3" --config "$CFG" > "$S.log" 2>&1 || echo "profile m=$3 rc=$?"
  $KS show "$S.json" --kernel _w4a16 --top 1 --width 130 --no-color > "$S.txt" 2>&1
done
rm -f "$O"/*.ncu-rep
