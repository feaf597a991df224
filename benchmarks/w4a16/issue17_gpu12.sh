#!/usr/bin/env bash
# Issue 17, tenth session, on the GPU machine (run from the repo root; each stage fits one device call).
#   bash benchmarks/w4a16/issue17_gpu12.sh sweep   # the Gluon GPU tests, then sweep_gluon.py at m = 32 and 64
#                                                  # (32- and 64-token tiles) on the final table's layers
#   bash benchmarks/w4a16/issue17_gpu12.sh final   # first-use tuning from empty caches, then 3 benchmark runs
set -euo pipefail
source benchmarks/w4a16/gpu_env.sh
SHAPES=5120x13824,13824x5120,3584x18944,5120x5120,4096x4096,6656x17920
case "${1:-}" in
  sweep) timeout 300 python -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_w4a16_gluon_gpu.py 2>&1 | tail -3
         cd benchmarks/w4a16
         timeout 280 python sweep_gluon.py --no-check --shapes $SHAPES --m ${M:-32,64} --layouts bk --stages 4 \
           --regs 128 --per-sm 2 --out "$OUT/sweep_m32_m64.json" 2>&1 | grep -v "Warning\|tuning the" ;;
  final) IMPLS=w4a16,w4a16-pdl,cublas,tinygemm KERNELS=w4a16,w4a16-pdl RUN_TIMEOUT=150 OUT=$OUT \
           bash benchmarks/w4a16/issue17_gpu5.sh ;;
  *) echo "usage: $0 sweep|final" >&2; exit 2 ;;
esac
