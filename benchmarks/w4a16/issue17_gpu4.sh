#!/bin/bash
# Issue 17, fourth GPU call (2026-11-23, third session): the m <= 16 graph-time sweep with registers capped
# (maxnreg 96, 80, 72: 5, 6 and 7 programs of 128 threads per SM instead of 4 at 127 registers).
export PYTHONUNBUFFERED=1
SHAPES=5120x13824,13824x5120,3584x18944,6656x17920,5120x5120,4096x4096
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader; date -u
S=benchmarks/w4a16
timeout 150 python3 $S/sweep_graph.py --shapes $SHAPES --m 1,16 --out $OUT/sweep_r0.json > $OUT/sweep_r0.txt 2>&1
for R in 96 80 72; do
  timeout 170 python3 $S/sweep_graph.py --shapes $SHAPES --m 1,16 --extra "{\"maxnreg\": $R}" \
    --out $OUT/sweep_r$R.json > $OUT/sweep_r$R.txt 2>&1
  echo "maxnreg $R rc=$? $(date -u +%T)"
done
python3 $S/compare_sweeps.py $OUT/sweep_r0.json $OUT/sweep_r96.json $OUT/sweep_r80.json $OUT/sweep_r72.json
gzip $OUT/*.json
