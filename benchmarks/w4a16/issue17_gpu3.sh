#!/bin/bash
# Issue 17, third GPU call (2026-11-23, third session): the graph-time launch sweep without and with the scales
# loaded one block ahead, then PDL on the fastest launches. Usage: OUT=dir bash benchmarks/w4a16/issue17_gpu3.sh
export PYTHONUNBUFFERED=1
SHAPES=5120x13824,13824x5120,3584x18944,6656x17920,5120x5120,4096x4096
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader; date -u
S=benchmarks/w4a16
timeout 200 python3 $S/sweep_graph.py --shapes $SHAPES --m 1,16,64,128 --out $OUT/sweep_base.json > $OUT/sweep_base.txt 2>&1
echo "base rc=$? $(date -u +%T)"
timeout 200 python3 $S/sweep_graph.py --shapes $SHAPES --m 1,16,64,128 --extra '{"scale_ahead": true}' \
  --out $OUT/sweep_sa.json > $OUT/sweep_sa.txt 2>&1
echo "scale_ahead rc=$? $(date -u +%T)"
timeout 150 python3 $S/pdl_probe.py --sweep $OUT/sweep_sa.json --out $OUT/pdl.json 2>&1 | grep -v Warn
echo "pdl rc=$? $(date -u +%T)"
python3 $S/compare_sweeps.py $OUT/sweep_base.json $OUT/sweep_sa.json
gzip $OUT/*.json
