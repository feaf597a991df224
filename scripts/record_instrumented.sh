#!/usr/bin/env bash
# GPU run of in-kernel instrumentation: the block recorder and Proton phase scopes.
# From the repo root on a GPU machine:  OUT=/tmp/inst bash scripts/record_instrumented.sh
# Leaves at most 5 files in $OUT: record.log (tests + show output), two sessions and
# Proton's raw trace (gzipped). Clocks are never changed. Budget: about 240 s.
# Ran on an H100 80GB HBM3 on 2026-11-22: its sessions and Proton trace are in tests/data/
# (tests/test_instrumented_recorded.py); the GPU tests hit their 150 s timeout there (a Proton
# stderr deadlock in the small-buffer test, since fixed); overhead: benchmarks/results/instrumentation_overhead.md.
set -u
O=${OUT:-/tmp/kernelscope-instrumented}
mkdir -p "$O"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
KS="timeout 120 python3 -m kernelscope"
L="$O/record.log"
echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)  date: $(date -u +%F)" | tee "$L"
step() { echo "== $* ($(date +%T))" | tee -a "$L"; }

step "gpu tests: block recorder, proton scopes"
timeout 150 python3 -m pytest -q -s -x -m gpu tests/gpu/test_block_recorder_gpu.py tests/gpu/test_proton_scopes_gpu.py \
  2>&1 | tail -60 >> "$L"; echo "rc=${PIPESTATUS[0]}" >> "$L"
step "run: instrumented_example (block recorder)"
$KS run -f -o "$O/session_h100_instrumented.json" -- python3 tests/workloads/instrumented_example.py >> "$L" 2>&1
echo "rc=$?" >> "$L"
step "run: proton_phases (phase scopes)"
$KS run -f -o "$O/session_h100_proton.json" -- python3 tests/workloads/proton_phases.py \
  --keep-proton "$O/proton_h100_phases.chrome_trace" >> "$L" 2>&1
echo "rc=$?" >> "$L"
step "show: instrumented"
$KS show "$O/session_h100_instrumented.json" --kernel matmul_blocks --width 120 --no-color >> "$L" 2>&1; echo "rc=$?" >> "$L"
step "show: proton"
$KS show "$O/session_h100_proton.json" --kernel matmul_phases --width 120 --no-color >> "$L" 2>&1; echo "rc=$?" >> "$L"
step "export: proton"
$KS export "$O/session_h100_proton.json" --chrome /tmp/proton_export.json >> "$L" 2>&1; echo "rc=$?" >> "$L"
for f in "$O"/session_h100_instrumented.json "$O"/session_h100_proton.json "$O"/proton_h100_phases.chrome_trace; do
  [ -f "$f" ] && gzip -9f "$f"
done
step "done"
cat "$L"
