#!/usr/bin/env bash
# Issue 17 part 4 on the GPU machine: GPU correctness tests, the variant sweep against cuDNN (graph
# time), and kernelscope's counter pass on the default (warp-specialised) kernel. Writes under $OUT.
#   benchmarks/attention/hopper_gpu.sh [all | any of: test sweep counters]  (ROUNDS=3 for the final measurement)
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
KS="python3 -m kernelscope"
mode=" ${*:-all} "
has() { [[ "$mode" == *" all "* || "$mode" == *" $1 "* ]]; }
DEADLINE=${DEADLINE:-380}
left() { local l=$((DEADLINE - SECONDS)); [ "$1" -lt "$l" ] && echo "$1" || echo $((l > 5 ? l : 5)); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
if has test; then
  timeout "$(left 100)" python3 -m pytest -q -x -p no:cacheprovider tests/kernels/test_attention.py \
    tests/gpu/test_attention_gpu.py 2>&1 | tail -6 | tee "$OUT/pytest.txt"
fi
if has sweep; then
  PYTHONUNBUFFERED=1 timeout "$(left 200)" python3 benchmarks/attention/hopper_sweep.py --out "$OUT" \
    --rounds "${ROUNDS:-1}" ${VARIANTS:+--variants $VARIANTS} > "$OUT/sweep.txt" 2>&1; echo "sweep rc=$?"
fi
if has counters; then
  timeout "$(left 120)" $KS profile attention --impl flash --seq-len 4096 --head-dim 128 --counters \
    -o "$OUT/profile_ws_s4096_counters.json" -f --width 130 --no-color > "$OUT/profile_ws_s4096_counters.txt" 2>&1
  echo "profile rc=$?"; grep -i -m 12 "duration\|tensor\|bound\|stall\|registers\|shared\|occupancy" "$OUT/profile_ws_s4096_counters.txt" | cut -c1-130
fi
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw,clocks_event_reasons.active --format=csv | tee -a "$OUT/gpu.txt"
cat "$OUT/sweep.txt" 2>/dev/null | grep -v "^  "
echo "total ${SECONDS}s"
