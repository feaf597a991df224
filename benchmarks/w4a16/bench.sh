#!/usr/bin/env bash
# W4A16 GEMM benchmark on the GPU machine (issue 6): GPU tests, then the recorded sweep and its plots.
#   OUT=... benchmarks/w4a16/bench.sh [all | any of: test record]   (default all; stays under $DEADLINE s)
# Writes under $OUT; copy $OUT/w4a16 into benchmarks/w4a16/runs/<label>/ to keep it (plots into plots/).
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH=src
OUT=${OUT:-out}
mkdir -p "$OUT/w4a16"
KS="python3 -m kernelscope"
mode=" ${*:-all} "
has() { [[ "$mode" == *" all "* || "$mode" == *" $1 "* ]]; }
DEADLINE=${DEADLINE:-540}
left() { local l=$((DEADLINE - SECONDS)); [ "$1" -lt "$l" ] && echo "$1" || echo $((l > 5 ? l : 5)); }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$OUT/w4a16/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"

if has test; then
  timeout "$(left 150)" python3 -m pytest -q --maxfail=5 -p no:cacheprovider tests/gpu/test_bench_w4a16_gpu.py tests/kernels/test_marlin_gemm.py \
    tests/test_bench_w4a16.py 2>&1 | tail -20 | tee "$OUT/w4a16/pytest.txt"
fi
if has record; then
  # 5 shapes x 5 m x 3 implementations, L2 cleared before each of 30 timed calls.
  timeout "$(left 360)" $KS bench w4a16 --m 1,4,16,64,256 \
    --shapes 4096x4096,4096x14336,8192x8192,8192x28672,28672x8192 --groupsize 128 --impl w4a16,cublas,tinygemm \
    -o "$OUT/w4a16/bench_w4a16_h100.json" -f --no-progress --width 150 --no-color 2>&1 | tee "$OUT/w4a16/bench.txt"
  $KS plot "$OUT/w4a16/bench_w4a16_h100.json" --output-dir "$OUT/w4a16/plots" --baseline cublas
fi
echo "total ${SECONDS}s"
