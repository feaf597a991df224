#!/usr/bin/env bash
# Issue 17, sixth session, on the GPU machine (run from the repo root; each stage fits one device call).
#   bash benchmarks/w4a16/issue17_gpu8.sh regs    # sweep_gluon.py on Bk at m = 1 and 16, six shapes: registers a
#                                                 # thread at launch 64 / 80 / 96 (4 / 3 / 2 programs an SM), 4-8 stages
#   bash benchmarks/w4a16/issue17_gpu8.sh tiles   # the same at 64 / 80 registers with up to 8 programs a column tile
#                                                 # within 4 an SM, on the layers whose tiles are few or many
#   bash benchmarks/w4a16/issue17_gpu8.sh ab      # ab_gluon.py: the kernel against B=gluon_hopper_prev (a copy of
#                                                 # the module of commit 623abca put beside it), at the rule's launches
#   bash benchmarks/w4a16/issue17_gpu8.sh sync    # the mma.sync kernel at m = 1 on the layers still short of target:
#                                                 # grids, registers, stages
#   bash benchmarks/w4a16/issue17_gpu8.sh final   # first-use tuning from empty caches, then 3 benchmark runs
#                                                 # (issue17_gpu5.sh: shipped path, cuBLAS, tinygemm; graph time)
#   bash benchmarks/w4a16/issue17_gpu8.sh profile # counter pass on the shipped path's Gluon launch (Bk) at m = 1 on
#                                                 # the two large layers still under 75 % and on 4096x4096
#   bash benchmarks/w4a16/issue17_gpu8.sh check   # the Gluon kernel's GPU tests
set -euo pipefail
export PYTHONPATH=$PWD/src
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
SHAPES=${SHAPES:-5120x13824,13824x5120,3584x18944,6656x17920,5120x5120,4096x4096}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$OUT/gpu.txt"
case "${1:-}" in
  regs) timeout 540 python benchmarks/w4a16/sweep_gluon.py --shapes "$SHAPES" --m "${MS:-1,16}" --layouts bk \
          --stages 4,6,8 --regs 64,80,96 --no-check --out "$OUT/regs_sweep.json" 2>&1 | grep -v "kernelscope: tuning" ;;
  tiles) timeout 540 python benchmarks/w4a16/sweep_gluon.py --shapes "${SHAPES_T:-13824x5120,5120x5120,4096x4096,8192x28672}" \
           --m "${MS:-1,16}" --layouts bk --stages 4,6 --regs 64,80 --tile-multiples 8 --per-sm 4 --no-check \
           --out "$OUT/tiles_sweep.json" 2>&1 | grep -v "kernelscope: tuning" ;;
  ab) timeout 300 python benchmarks/w4a16/ab_gluon.py --b kernelscope.kernels.marlin.gluon_hopper_prev \
        --shapes "$SHAPES,8192x28672" --m 1,16 --out "$OUT/ab.json" 2>&1 | grep -v "kernelscope: tuning" ;;
  sync) timeout 540 python benchmarks/w4a16/sweep_gluon.py --shapes "${SHAPES_S:-13824x5120,5120x5120,4096x4096}" \
          --m 1 --layouts bk --stages 4,6,8 --regs 64,80,96 --tile-multiples 8 --per-sm 4 --sync-mma --no-check \
          --out "$OUT/sync_sweep.json" 2>&1 | grep -v "kernelscope: tuning" ;;
  final) IMPLS=w4a16,cublas,tinygemm KERNELS=w4a16 OUT=$OUT bash benchmarks/w4a16/issue17_gpu5.sh ;;
  profile) for shape in ${PROFILE_SHAPES:-13824x5120 3584x18944 4096x4096}; do
             timeout 170 python -m kernelscope run --counters --kernel _w4a16_gluon -f -o "$OUT/counters_$shape.json" -- \
               python benchmarks/w4a16/profile_point.py --gluon --config '{"layout": "bk"}' --k "${shape%x*}" \
               --n "${shape#*x}" --m 1 > "$OUT/run_$shape.txt" 2>&1 || tail -5 "$OUT/run_$shape.txt"
             python -m kernelscope show "$OUT/counters_$shape.json" --kernel _w4a16_gluon --panels 1 --no-color \
               --width 120 > "$OUT/show_$shape.txt" 2>&1
             echo "== $shape"; grep -i -E "dram|occupancy|stall|issue|registers|block|grid|duration" "$OUT/show_$shape.txt" | head -30 || true
           done ;;
  check) timeout 500 python -m pytest -q -m gpu -p no:cacheprovider tests/gpu/test_w4a16_gluon_gpu.py \
           tests/gpu/test_bench_w4a16_gpu.py 2>&1 | tail -15 ;;
  *) echo "usage: $0 regs|tiles|ab|sync|final|profile|check" >&2; exit 2 ;;
esac
