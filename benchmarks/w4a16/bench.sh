#!/usr/bin/env bash
# The W4A16 benchmark (an NVIDIA GPU with torch and triton): the launches tuned on first use from empty caches, then
# three runs of `kernelscope bench w4a16` per shape set, then the median tables of RESULTS.md.
#   OUT=DIR bash benchmarks/w4a16/bench.sh      (writes under $OUT, default out/w4a16; about 10 minutes on an H100)
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
OUT=${OUT:-out/w4a16}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$OUT/gpu.txt"; date -u

# measure DIR SHAPES M IMPLS KERNELS: tune (empty tuning and Triton caches), three runs, the median table.
measure() {
  local dir=$1 shapes=$2 m=$3 impls=$4 kernels=$5
  mkdir -p "$dir"
  export KERNELSCOPE_CACHE_DIR=$dir/cache TRITON_CACHE_DIR=$(mktemp -d)
  timeout 150 python3 -m kernelscope tune w4a16 --shapes "$shapes" --m "$m" --deadline 3 > "$dir/tune_log.txt" 2>&1
  echo "tune rc=$? $(date -u +%T)"
  for i in 1 2 3; do
    extra=""; [ "$i" -gt 1 ] && extra="--no-cupti"
    timeout 150 python3 -m kernelscope bench w4a16 --shapes "$shapes" --m "$m" --impl "$impls" --warmup 5 \
      --repeats 20 --no-progress --no-color --width 230 $extra -o "$dir/run$i.json" > "$dir/bench$i.txt" 2>&1
    echo "run $i rc=$? $(date -u +%T)"
  done
  python3 benchmarks/w4a16/median_table.py --kernels "$kernels" "$dir"/run{1,2,3}.json > "$dir/median_table.md"
  cat "$dir/median_table.md"
}

# Layers of common models (outside the shipped table), m = 1 to 128, with and without programmatic dependent launch.
measure "$OUT/layers" 5120x13824,13824x5120,3584x18944,5120x5120,4096x4096,6656x17920 1,16,32,64,128 \
  w4a16,w4a16-pdl,cublas,tinygemm w4a16,w4a16-pdl
# The shipped table's shapes at m = 32 and 64.
measure "$OUT/table" 4096x4096,4096x14336,8192x8192,8192x28672,28672x8192 32,64 w4a16,cublas,tinygemm w4a16
