#!/bin/bash
# Issue 17, the final W4A16 measurement of the third session (2026-11-23): first-use tuning from an empty cache
# with the tuner's new candidate order (deadline 3 s per point, fresh Triton cache), then 3 benchmark runs on
# that cache (graph, event and, in run 1, CUPTI time). Usage: OUT=dir bash benchmarks/w4a16/issue17_gpu5.sh
# IMPLS and KERNELS (median_table.py --kernels) change what is benchmarked and tabulated (issue17_gpu7.sh);
# RUN_TIMEOUT is each run's limit in seconds (120); M the token counts (1,16,64,128); SHAPES the layers.
export PYTHONUNBUFFERED=1 KERNELSCOPE_CACHE_DIR=$OUT/cache TRITON_CACHE_DIR=/tmp/triton-cache-$$ PYTHONPATH=$PWD/src
IMPLS=${IMPLS:-w4a16-untuned,w4a16,cublas,tinygemm}
SHAPES=${SHAPES:-5120x13824,13824x5120,3584x18944,5120x5120,4096x4096,6656x17920}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader; date -u
timeout 150 python3 -m kernelscope tune w4a16 --shapes $SHAPES --m ${M:-1,16,64,128} --deadline 3 > $OUT/tune_log.txt 2>&1
echo "tune rc=$? $(date -u +%T)"; cut -c1-200 $OUT/tune_log.txt | tail -n 30
for i in 1 2 3; do
  extra=""; [ $i -gt 1 ] && extra="--no-cupti"
  timeout ${RUN_TIMEOUT:-120} python3 -m kernelscope bench w4a16 --shapes $SHAPES --m ${M:-1,16,64,128} \
    --impl $IMPLS --warmup 5 --repeats 20 --no-progress --no-color --width 230 \
    $extra -o $OUT/run$i.json > $OUT/bench$i.txt 2>&1
  echo "run $i rc=$? $(date -u +%T)"
done
python3 benchmarks/w4a16/median_table.py ${KERNELS:+--kernels $KERNELS} $OUT/run1.json $OUT/run2.json $OUT/run3.json > $OUT/median_table.md 2>&1
cat $OUT/median_table.md | head -40
gzip $OUT/run*.json
