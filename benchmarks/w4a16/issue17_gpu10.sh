#!/usr/bin/env bash
# Issue 17, eighth session, on the GPU machine (run from the repo root; each stage fits one device call).
#   bash benchmarks/w4a16/issue17_gpu10.sh poll   # the Gluon GPU tests of the polled split-tile sum, then ab_gluon.py:
#                                                 # the counted split-tile sum (A) against the polled one (B), at the
#                                                 # rule's launch, plain and as programmatic dependent launches
set -euo pipefail
export PYTHONPATH=$PWD/src
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
SHAPES=${SHAPES:-4096x4096,5120x5120,13824x5120,5120x13824,3584x18944,6656x17920,8192x28672}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$OUT/gpu.txt"
case "${1:-}" in
  poll) timeout 240 python -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_w4a16_gluon_gpu.py \
          -k "polled or programmatic" 2>&1 | tail -5
        timeout 330 python benchmarks/w4a16/ab_gluon.py --b-kwargs '{"split_sum": "poll"}' --shapes "$SHAPES" \
          --m 1,16 --out "$OUT/ab_poll.json" 2>&1 | grep -v "kernelscope: tuning"
        timeout 200 python benchmarks/w4a16/ab_gluon.py --a-kwargs '{"pdl": true}' \
          --b-kwargs '{"split_sum": "poll", "pdl": true}' --shapes "${SHAPES_PDL:-4096x4096,5120x5120,13824x5120}" \
          --m 1,16 --out "$OUT/ab_poll_pdl.json" 2>&1 | grep -v "kernelscope: tuning" ;;
  *) echo "usage: $0 poll" >&2; exit 2 ;;
esac
