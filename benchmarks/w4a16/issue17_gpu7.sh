#!/bin/bash
# Issue 17, the fifth session's final W4A16 measurement (2026-11-23): first-use tuning from an empty cache, the
# Gluon decode kernel now among the candidates at m <= 16 on sm_90, then 3 benchmark runs on that cache (graph,
# event and, in run 1, CUPTI time) with the Gluon kernel on its own layout beside. One device call.
# Usage: OUT=dir bash benchmarks/w4a16/issue17_gpu7.sh; then median_table.py --kernels w4a16,w4a16-gluon run*.json
export PYTHONUNBUFFERED=1 KERNELSCOPE_CACHE_DIR=$OUT/cache TRITON_CACHE_DIR=/tmp/triton-cache-$$ PYTHONPATH=$PWD/src
SHAPES=5120x13824,13824x5120,3584x18944,5120x5120,4096x4096,6656x17920
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader; date -u
timeout 130 python3 -m kernelscope tune w4a16 --shapes $SHAPES --m 1,16,64,128 --deadline 3 > $OUT/tune_log.txt 2>&1
echo "tune rc=$? $(date -u +%T)"; cut -c1-160 $OUT/tune_log.txt | tail -n 26
for i in 1 2 3; do
  extra=""; [ $i -gt 1 ] && extra="--no-cupti"
  timeout 140 python3 -m kernelscope bench w4a16 --shapes $SHAPES --m 1,16,64,128 \
    --impl w4a16,w4a16-gluon,cublas,tinygemm --warmup 5 --repeats 20 --no-progress --no-color --width 230 \
    $extra -o $OUT/run$i.json > $OUT/bench$i.txt 2>&1
  echo "run $i rc=$? $(date -u +%T)"
done
