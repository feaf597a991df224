#!/usr/bin/env bash
# Issue 17, eighth session, on the GPU machine (run from the repo root; each stage fits one device call).
#   bash benchmarks/w4a16/issue17_gpu10.sh read     # read_floor.py: the fastest plain read of each layer's bytes
#   bash benchmarks/w4a16/issue17_gpu10.sh phases   # the phase-record GPU tests, then gluon_phases.py: where each
#                                                   # program's time goes (rule's launch, 4 / 8 stages, both MMAs)
#   bash benchmarks/w4a16/issue17_gpu10.sh prefetch # ab_gluon.py: kernel without (A) / with (B) the descriptor
#                                                   # prefetch (run on commit 4th after feee7b5, where it was a flag)
#   bash benchmarks/w4a16/issue17_gpu10.sh poll     # the polled split-tile sum against the counted one: A/B and
#                                                   # phases (needs the kernel of commit feee7b5, reverted since)
#   bash benchmarks/w4a16/issue17_gpu10.sh final    # first-use tuning from empty caches, then 3 benchmark runs of
#                                                   # the shipped path plain and as PDL launches, cuBLAS, tinygemm
set -euo pipefail
SHAPES=${SHAPES:-4096x4096,5120x5120,13824x5120,5120x13824,3584x18944,6656x17920,8192x28672}
source benchmarks/w4a16/gpu_env.sh
cd benchmarks/w4a16
case "${1:-}" in
  read) timeout 500 python read_floor.py --shapes 4096x4096,5120x5120,13824x5120,5120x13824,3584x18944,8192x28672 \
          --out "$OUT/read_floor.json" 2>&1 | grep -v "kernelscope: tuning" ;;
  phases) (cd ../.. && timeout 150 python -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_w4a16_gluon_gpu.py \
            -k "phase_records or matches_the_reference" 2>&1 | tail -3)
          timeout 400 python gluon_phases.py --shapes 4096x4096,5120x5120,13824x5120,5120x13824,8192x28672 --m 1 \
            --variants '[{}, {"stages": 8}, {"sync_mma": false}]' --out "$OUT/phases.json" 2>&1 | grep -v "tuning" ;;
  prefetch) timeout 300 python ab_gluon.py --b-kwargs '{"prefetch": true}' \
              --shapes 4096x4096,5120x5120,13824x5120,5120x13824,3584x18944 --m 1,16 --out "$OUT/ab_prefetch.json" \
              2>&1 | grep -v "tuning" ;;
  poll) timeout 330 python ab_gluon.py --b-kwargs '{"split_sum": "poll"}' --shapes "$SHAPES" --m 1,16 \
          --out "$OUT/ab_poll.json" 2>&1 | grep -v "tuning"
        timeout 200 python gluon_phases.py --shapes 4096x4096,13824x5120 --m 1,16 \
          --variants '[{}, {"split_sum": "poll"}, {"split_sum": "poll-gpu"}]' --out "$OUT/phases_poll.json" 2>&1 \
          | grep -v "tuning" ;;
  final) cd ../.. && IMPLS=w4a16,w4a16-pdl,cublas,tinygemm KERNELS=w4a16,w4a16-pdl RUN_TIMEOUT=135 OUT=$OUT \
           bash benchmarks/w4a16/issue17_gpu5.sh ;;
  *) echo "usage: $0 read|phases|prefetch|poll|final" >&2; exit 2 ;;
esac
