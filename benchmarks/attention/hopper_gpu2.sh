#!/usr/bin/env bash
# Issue 17 part 4, second GPU call: does Triton 3.6's Hopper warp specialisation finish at all (a
# minimal loop, with its plain control, each in its own process under a timeout), then the final
# measurement (3 rounds, graph time) of the shipped kernel and the one-loop variant against cuDNN.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw --format=csv | tee "$OUT/gpu.txt"
for c in tiny-plain tiny-ws; do
  start=$SECONDS; timeout 35 python3 benchmarks/attention/ws_hang_probe.py $c 2>&1 | tail -2
  echo "probe $c rc=${PIPESTATUS[0]} after $((SECONDS - start)) s"
done | tee "$OUT/ws_probe.txt"
PYTHONUNBUFFERED=1 timeout $((370 - SECONDS)) python3 benchmarks/attention/hopper_sweep.py --out "$OUT" --rounds 3 \
  --variants plain,flat > "$OUT/sweep.txt" 2>&1; echo "sweep rc=$?"
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw,clocks_event_reasons.active --format=csv | tee -a "$OUT/gpu.txt"
grep -v "^  " "$OUT/sweep.txt"
echo "total ${SECONDS}s"
