#!/usr/bin/env bash
# The attention benchmark (an NVIDIA GPU with torch and triton): three separate runs of sweep.py (the Triton kernel
# pinned to its launch, and flash_attention's default, against cuDNN, in CUDA-graph time), then the median table.
#   OUT=DIR bash benchmarks/attention/bench.sh      (writes under $OUT, default out/attention; a few minutes on an H100)
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-out/attention}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__)" | tee -a "$OUT/gpu.txt"
for i in 1 2 3; do
  mkdir -p "$OUT/run$i"
  timeout 300 python3 benchmarks/attention/sweep.py --rounds 3 --variants plain,auto --out "$OUT/run$i" \
    2>&1 | tee "$OUT/run$i/sweep.txt"
done
python3 benchmarks/attention/median_runs.py "$OUT"/run{1,2,3}/sweep.json | tee "$OUT/median_table.md"
