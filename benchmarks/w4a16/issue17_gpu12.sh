#!/usr/bin/env bash
# Issue 17, tenth session, on the GPU machine (run from the repo root; each stage fits one device call).
#   bash benchmarks/w4a16/issue17_gpu12.sh sweep   # the Gluon GPU tests, then sweep_gluon.py at m = 32 and 64
#                                                  # (32- and 64-token tiles) on the final table's layers
#   bash benchmarks/w4a16/issue17_gpu12.sh table   # the same sweep on the shipped table's shapes (add_gluon_rows.py)
#   bash benchmarks/w4a16/issue17_gpu12.sh linear  # W4A16Linear on the table's new m = 32 / 64 Gluon rows: eager,
#                                                  # CUDA graph replay, torch.compile
#   bash benchmarks/w4a16/issue17_gpu12.sh l2      # cluster_ab.py: the first blocks asked into L2 at the start
#   bash benchmarks/w4a16/issue17_gpu12.sh stages  # cluster_ab.py: deep stage counts (up to all of a program's
#                                                  # blocks in flight) for the small layers at m = 1
#   bash benchmarks/w4a16/issue17_gpu12.sh final   # first-use tuning from empty caches, then 3 benchmark runs
#                                                  # (M=1,16,32,64,128), then 3 runs of the table's shapes at m = 32, 64
set -euo pipefail
source benchmarks/w4a16/gpu_env.sh
SHAPES=5120x13824,13824x5120,3584x18944,5120x5120,4096x4096,6656x17920
case "${1:-}" in
  sweep) timeout 300 python -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_w4a16_gluon_gpu.py 2>&1 | tail -3
         cd benchmarks/w4a16
         timeout 280 python sweep_gluon.py --no-check --shapes $SHAPES --m ${M:-32,64} --layouts bk --stages 4 \
           --regs 128 --per-sm 2 --out "$OUT/sweep_m32_m64.json" 2>&1 | grep -v "Warning\|tuning the" ;;
  table) cd benchmarks/w4a16
         timeout 500 python sweep_gluon.py --no-check --shapes 4096x4096,4096x14336,8192x8192,8192x28672,28672x8192 \
           --m 32,64 --layouts bk --stages 4 --regs 128 --per-sm 2 --out "$OUT/table_m32_m64.json" 2>&1 \
           | grep -v "Warning\|tuning the" ;;
  linear) for kn in "4096 4096" "4096 14336" "8192 28672"; do set -- $kn
            python benchmarks/w4a16/linear_graph_check.py --k $1 --n $2 --m 17,32,40,64 2>&1 | grep -v Warning; done ;;
  l2) cd benchmarks/w4a16
      timeout 500 python cluster_ab.py --m 1,16 --rounds 5 --out "$OUT/l2_first_ab.json" --candidates "$(cat <<'JSON'
{"4096x4096": [{"programs": 128, "cluster": 2, "stages": 6}, {"programs": 128, "cluster": 2, "stages": 6, "l2_first": true},
               {"l2_first": true}],
 "5120x5120": [{"l2_first": true}, {"programs": 320, "cluster": 4, "maxnreg": 80},
               {"programs": 320, "cluster": 4, "maxnreg": 80, "l2_first": true}],
 "13824x5120": [{"l2_first": true}],
 "8192x28672": [{"l2_first": true}]}
JSON
)" 2>&1 | grep -v "tuning the" ;;
  stages) cd benchmarks/w4a16
          timeout 500 python cluster_ab.py --m 1 --out "$OUT/stages_ab.json" --candidates "$(cat <<'JSON'
{"4096x4096": ["table", {"programs": 128, "cluster": 2, "stages": 8}, {"programs": 128, "cluster": 2, "stages": 12},
               {"programs": 128, "cluster": 2, "stages": 16}, {"programs": 128, "stages": 16, "maxnreg": 168},
               {"programs": 256, "stages": 8}],
 "5120x5120": ["cluster", {"programs": 320, "cluster": 4, "maxnreg": 80, "stages": 8},
               {"programs": 132, "stages": 12, "maxnreg": 168}, {"programs": 132, "stages": 24, "maxnreg": 168},
               {"programs": 160, "cluster": 2, "stages": 10}, {"programs": 160, "cluster": 2, "stages": 16},
               {"programs": 240, "stages": 8}, {"programs": 240, "stages": 14}]}
JSON
)" 2>&1 | grep -v "tuning the" ;;
  final) IMPLS=w4a16,w4a16-pdl,cublas,tinygemm KERNELS=w4a16,w4a16-pdl RUN_TIMEOUT=150 OUT=$OUT \
           bash benchmarks/w4a16/issue17_gpu5.sh
         mkdir -p "$OUT/table"
         SHAPES=4096x4096,4096x14336,8192x8192,8192x28672,28672x8192 M=32,64 IMPLS=w4a16,cublas,tinygemm \
           KERNELS=w4a16 RUN_TIMEOUT=150 OUT=$OUT/table bash benchmarks/w4a16/issue17_gpu5.sh | tail -14 ;;
  *) echo "usage: $0 sweep|table|linear|l2|stages|final" >&2; exit 2 ;;
esac
