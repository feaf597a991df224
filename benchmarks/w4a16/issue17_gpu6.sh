#!/usr/bin/env bash
# Issue 17, the Gluon W4A16 kernel on the GPU machine (run from the repo root; each stage fits one device call).
#   bash benchmarks/w4a16/issue17_gpu6.sh check   # GPU tests of the Gluon kernel: both layouts, both loops
#   bash benchmarks/w4a16/issue17_gpu6.sh sweep   # sweep_gluon.py at m = 1 and 16 on the six issue-17 shapes
#   bash benchmarks/w4a16/issue17_gpu6.sh bench   # kernelscope bench w4a16, 3 runs, Triton vs Gluon vs baselines
#   bash benchmarks/w4a16/issue17_gpu6.sh profile # counter pass on the Gluon kernel's rule launch at m = 1 where it
#                                                 # reached 77 % of the floor (5120x13824) and 68 % (3584x18944)
set -euo pipefail
export PYTHONPATH=$PWD/src
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
SHAPES=5120x13824,13824x5120,3584x18944,6656x17920,5120x5120,4096x4096
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$OUT/gpu.txt"
case "${1:-}" in
  check) python -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_w4a16_gluon_gpu.py 2>&1 | tail -15 ;;
  sweep) python benchmarks/w4a16/sweep_gluon.py --shapes "$SHAPES" --m 1,16 --out "$OUT/gluon_sweep.json" 2>&1 \
           | grep -v "kernelscope: tuning" ;;
  bench) for i in 1 2 3; do
           python -m kernelscope bench w4a16 --m 1,16 --shapes "$SHAPES" --impl w4a16,w4a16-gluon,cublas,tinygemm \
             -o "$OUT/bench_gluon_run$i.json" > "$OUT/bench_gluon_run$i.txt" 2>&1
         done
         python benchmarks/w4a16/median_table.py --kernels w4a16,w4a16-gluon "$OUT"/bench_gluon_run*.json ;;
  profile) for shape in 5120x13824 3584x18944; do
             python -m kernelscope run --counters --kernel _w4a16_gluon -f -o "$OUT/gluon_$shape.json" -- \
               python benchmarks/w4a16/profile_point.py --gluon --k "${shape%x*}" --n "${shape#*x}" --m 1
             python -m kernelscope show "$OUT/gluon_$shape.json" --kernel _w4a16_gluon --panels 1 --no-color --width 120 | head -120
           done ;;
  *) echo "usage: $0 check|sweep|bench|profile" >&2; exit 2 ;;
esac
