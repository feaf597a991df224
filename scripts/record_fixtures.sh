#!/usr/bin/env bash
# Re-record the GPU fixtures under tests/data and the bundled demo session.
# Run from the repo root on a machine with an NVIDIA GPU, torch, triton and ncu:
#   OUT=/tmp/fixtures bash scripts/record_fixtures.sh
# then copy $OUT/fixtures/* into tests/data/ (demo_session.json, gzipped, into
# src/kernelscope/data/). Never changes clocks: ncu runs with --clock-control none.
set -u
O=${OUT:-/tmp/kernelscope-fixtures}
F=$O/fixtures
mkdir -p "$F"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
KS="python3 -m kernelscope"
DEV=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '_')
echo "device: $DEV  date: $(date -u +%F)" | tee "$O/record.log"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> "$O/record.log"

step() { echo "== $*" | tee -a "$O/record.log"; }

step "trace pass: mixed workload"
$KS run -f -o "$F/session_h100_mixed.json" --keep-trace "$F/trace_h100_mixed.json" -- python3 tests/workloads/mixed.py >> "$O/record.log" 2>&1; echo "rc=$?" >> "$O/record.log"
step "trace pass: occupancy sweep"
$KS run -f -o "$F/session_h100_sweep.json" -- python3 tests/workloads/occupancy_sweep.py >> "$O/record.log" 2>&1; echo "rc=$?" >> "$O/record.log"
step "trace pass: workload that raises"
$KS run -f -o "$F/session_h100_raises.json" -- python3 tests/workloads/raises_after_kernels.py >> "$O/record.log" 2>&1; echo "rc=$?" >> "$O/record.log"
for w in mixed occupancy_sweep; do
  step "ncu occupancy: $w"
  ncu --clock-control none --section LaunchStats --section Occupancy \
      --metrics sm__warps_active.avg.pct_of_peak_sustained_active -f -o "/tmp/occ_$w" \
      python3 tests/workloads/$w.py >> "$O/record.log" 2>&1
  ncu --import "/tmp/occ_$w.ncu-rep" --csv --page raw > "/tmp/occ_$w.csv"
  python3 scripts/ncu_occupancy_table.py "/tmp/occ_$w.csv" > "$F/ncu_occupancy_h100_$w.csv"
done
step "demo"
$KS demo -f -o "$F/demo_session.json" --width 120 --no-color > "$O/demo_show.txt" 2>> "$O/record.log"; echo "rc=$?" >> "$O/record.log"
step "gpu tests"
python3 -m pytest -q -m gpu tests > "$O/gpu_tests.log" 2>&1; echo "rc=$?" >> "$O/record.log"
tail -5 "$O/gpu_tests.log" >> "$O/record.log"
gzip -9f "$F"/*.json
tar -C "$O" -czf "$O/fixtures.tar.gz" fixtures && rm -rf "$F"
step "done"
ls -la "$O" | tee -a "$O/record.log"
