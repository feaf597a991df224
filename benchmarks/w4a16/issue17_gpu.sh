#!/bin/bash
# Issue 17 on the GPU machine: graph timing test, W4A16Linear in a CUDA graph, then 3 runs of the benchmark on
# shapes no shipped table holds, w4a16-untuned (table or rule, as before) next to w4a16 (first-use tuning).
# Usage (from the worktree root): OUT=dir bash benchmarks/w4a16/issue17_gpu.sh
export PYTHONUNBUFFERED=1 KERNELSCOPE_CACHE_DIR=$OUT/cache
SHAPES=5120x13824,13824x5120,3584x18944,5120x5120,4096x4096,6656x17920
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv
date -u
python3 -m pytest -q -p no:cacheprovider tests/test_graph_timing.py -k gpu 2>&1 | tail -3
python3 benchmarks/w4a16/linear_graph_check.py 2>&1 | tail -4
for i in 1 2 3; do
  extra=""; lim=105; [ $i -eq 1 ] && lim=190
  [ $i -gt 1 ] && extra="--no-cupti"
  timeout $lim python3 -m kernelscope bench w4a16 --shapes $SHAPES --m 1,16,64,128 \
    --impl w4a16-untuned,w4a16,cublas,tinygemm --warmup 5 --repeats 20 --no-progress --no-color --width 230 \
    $extra -o $OUT/run$i.json 2>&1 | grep -v "^$" | tail -n 60
  echo "run $i rc=${PIPESTATUS[0]} $(date -u +%T)"
done
