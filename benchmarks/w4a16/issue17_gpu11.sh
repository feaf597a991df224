#!/usr/bin/env bash
# Issue 17, ninth session, on the GPU machine (run from the repo root; each stage fits one device call).
#   bash benchmarks/w4a16/issue17_gpu11.sh ab      # the cluster GPU tests, then cluster_ab.py: the split-tile sum
#                                                  # through thread-block clusters against the rule's launch
#   bash benchmarks/w4a16/issue17_gpu11.sh final   # first-use tuning from empty caches, then 3 benchmark runs of
#                                                  # the shipped path plain and as PDL launches, cuBLAS, tinygemm
set -euo pipefail
source benchmarks/w4a16/gpu_env.sh
case "${1:-}" in
  ab) timeout 200 python -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_w4a16_gluon_gpu.py -k "cluster" \
        2>&1 | tail -3
      cd benchmarks/w4a16
      timeout 380 python cluster_ab.py --m 1,16 --out "$OUT/cluster_ab.json" --candidates "${CANDIDATES:-$(cat <<'JSON'
{"13824x5120": [{"cluster": 3}, {"programs": 320, "cluster": 4, "maxnreg": 80, "stages": 4}],
 "5120x5120": [{"programs": 160, "cluster": 2}, {"programs": 320, "cluster": 4, "maxnreg": 80},
               {"programs": 400, "cluster": 5, "maxnreg": 64}],
 "4096x4096": [{"cluster": 4}, {"programs": 128, "cluster": 2}, {"programs": 512, "cluster": 8, "maxnreg": 64}]}
JSON
)}" 2>&1 | grep -v "tuning" ;;
  final) IMPLS=w4a16,w4a16-pdl,cublas,tinygemm KERNELS=w4a16,w4a16-pdl RUN_TIMEOUT=135 OUT=$OUT \
           bash benchmarks/w4a16/issue17_gpu5.sh ;;
  *) echo "usage: $0 ab|final" >&2; exit 2 ;;
esac
