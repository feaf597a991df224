#!/bin/bash
# Issue 17, second GPU call: first-use tuning from an empty cache (deadline 3 s per point, fresh Triton cache),
# 3 benchmark runs on that cache (CUPTI in run 1), kernelscope counters on two tuned m = 1 launches.
export PYTHONUNBUFFERED=1 KERNELSCOPE_CACHE_DIR=$OUT/cache
SHAPES=5120x13824,13824x5120,3584x18944,5120x5120,4096x4096,6656x17920
date -u
timeout 130 python3 -m kernelscope tune w4a16 --shapes $SHAPES --m 1,16,64,128 --deadline 3 2>&1 | cut -c1-400
for i in 1 2 3; do
  extra=""; [ $i -gt 1 ] && extra="--no-cupti"
  timeout 100 python3 -m kernelscope bench w4a16 --shapes $SHAPES --m 1,16,64,128 \
    --impl w4a16-untuned,w4a16,cublas,tinygemm --warmup 5 --repeats 20 --no-progress --no-color --width 230 \
    $extra -o $OUT/run$i.json > /tmp/bench$i.txt 2>&1; [ $i -eq 1 ] && cp /tmp/bench1.txt $OUT/
  echo "run $i rc=$? $(date -u +%T)"
done
for spec in "5120 13824" "5120 5120"; do
  set -- $spec
  cfg=$(python3 -c "
import json,glob; d=json.load(open(glob.glob('$OUT/cache/w4a16/*.json')[0])); print(json.dumps(d['entries']['m1_k$1_n$2_g128']['launch']))")
  timeout 110 python3 -m kernelscope run --counters --kernel _w4a16_kernel -o $OUT/prof_$1x$2.json.gz -- \
    python3 benchmarks/w4a16/profile_point.py --k $1 --n $2 --m 1 --config "$cfg" > /dev/null 2>&1
  echo "profile $1x$2 rc=$? $cfg"
  python3 -m kernelscope show $OUT/prof_$1x$2.json.gz --width 150 --no-color 2>&1 | grep -iE "dram|occupancy|stall|registers|waves|duration|mean|Grid|throughput|shared" | head -40
done
tail -n 3 $OUT/bench1.txt
