#!/usr/bin/env bash
# Record the analysis fixtures on a GPU machine:
#   OUT=/tmp/out bash scripts/record_analysis.sh
# 1. `kernelscope calibrate` (measured ceilings, kept as $OUT/ceilings_h100.json);
# 2. a counter-pass session of tests/workloads/counters_small.py (Triton, cuBLAS, cuDNN attention, PyTorch;
#    regions declare their work) and the details page of its report, for the fidelity test;
# 3. `kernelscope show` of that session with the ceilings, as a check.
# Everything lands in $OUT/analysis.tar.xz. Never changes clocks (--clock-control none).
set -u
O=${OUT:-/tmp/kernelscope-analysis}; F=/tmp/ks_analysis; rm -rf "$F"; mkdir -p "$O" "$F"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH} KERNELSCOPE_CACHE_DIR=$F/cache
if [ -d .whl ]; then  # the ncu_report reader CI uses (PyPI ncu-report), carried as a wheel
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/ncu_report-*.whl && export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
KS="python3 -m kernelscope"
echo "== calibrate"
$KS calibrate --force 2>&1 | tail -12
cp "$F"/cache/ceilings-*.json "$F/ceilings_h100.json"
echo "== counters_small, both passes (top 8: every kernel of the workload)"
$KS run --counters --top 8 -f -o "$F/session_h100_counters.json" -- python3 tests/workloads/counters_small.py 2>&1 | tail -6
ncu --import "$F/session_h100_counters.ncu-rep" --page details --print-units base --csv > "$F/session_h100_counters.details.csv"
echo "== show"
$KS show "$F/session_h100_counters.json" --width 140 --no-color > "$F/show_counters.txt" 2>&1; echo "show rc=$?"
grep -n -i -A3 "roofline\|bound" "$F/show_counters.txt" | head -40
tar -C "$F" -cJf "$O/analysis.tar.xz" --exclude=cache --exclude="*.ncu-rep" .
ls -la "$F"
