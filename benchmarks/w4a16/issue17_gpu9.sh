#!/usr/bin/env bash
# Issue 17, seventh session, on the GPU machine (run from the repo root; each stage fits one device call).
#   bash benchmarks/w4a16/issue17_gpu9.sh pdl     # the PDL chain tests, then ab_gluon.py: the rule's launch as a
#                                                 # plain launch (A) and as a programmatic dependent launch (B)
#   bash benchmarks/w4a16/issue17_gpu9.sh pdlsweep # pdl_chain.py (PDL after another kernel), then sweep_gluon.py
#                                                 # --pdl at m = 1 on the layers short of target: grids, registers,
#                                                 # stages, mma.sync and the warpgroup MMA
#   bash benchmarks/w4a16/issue17_gpu9.sh harness # harness_check.py: one launch at the 112 MiB layers timed the
#                                                 # sweeps' way and the benchmark's ways, and the --probe steps
#   bash benchmarks/w4a16/issue17_gpu9.sh final   # first-use tuning from empty caches, then 3 benchmark runs of the
#                                                 # shipped path plain and as PDL launches, cuBLAS, tinygemm
set -euo pipefail
SHAPES=${SHAPES:-4096x4096,5120x5120,13824x5120,5120x13824,3584x18944,6656x17920,8192x28672}
source benchmarks/w4a16/gpu_env.sh
case "${1:-}" in
  pdl) timeout 200 python -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_w4a16_gluon_gpu.py -k programmatic 2>&1 | tail -5
       timeout 360 python benchmarks/w4a16/ab_gluon.py --b-kwargs '{"pdl": true}' --shapes "$SHAPES" --m 1,16 \
         --out "$OUT/ab_pdl.json" 2>&1 | grep -v "kernelscope: tuning" ;;
  pdlsweep) timeout 150 python benchmarks/w4a16/pdl_chain.py --shapes "${SHAPES_C:-4096x4096,5120x5120,13824x5120}" \
              --m 1,16 --out "$OUT/pdl_chain.json" 2>&1 | grep -v "kernelscope: tuning"
            for sync in "--sync-mma" ""; do
              timeout 215 python benchmarks/w4a16/sweep_gluon.py --shapes "${SHAPES_S:-4096x4096,5120x5120,13824x5120}" \
                --m 1 --layouts bk --stages 4,8 --regs 64,80,96 --tile-multiples 8 --per-sm 4 --pdl $sync --no-check \
                --out "$OUT/pdl_sweep${sync:+_sync}.json" 2>&1 | grep -v "kernelscope: tuning"
            done ;;
  harness) timeout 150 python benchmarks/w4a16/harness_check.py --probe --shapes 28672x8192 \
             --out "$OUT/harness_probe.json" 2>&1 | grep -v "kernelscope: tuning"
           timeout 300 python benchmarks/w4a16/harness_check.py --shapes 28672x8192,8192x28672 \
             --out "$OUT/harness_check.json" 2>&1 | grep -v "kernelscope: tuning" ;;
  final) IMPLS=w4a16,w4a16-pdl,cublas,tinygemm KERNELS=w4a16,w4a16-pdl RUN_TIMEOUT=135 OUT=$OUT \
           bash benchmarks/w4a16/issue17_gpu5.sh ;;
  *) echo "usage: $0 pdl|pdlsweep|harness|final" >&2; exit 2 ;;
esac
