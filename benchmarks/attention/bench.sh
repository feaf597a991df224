#!/usr/bin/env bash
# Attention kernel on the GPU machine: correctness tests, the recorded benchmark,
# plots, one profile, then per-config timings with the time left. Writes under $OUT.
#   benchmarks/attention/bench.sh [all | any of: test record tune]   (default all; stays under $DEADLINE s)
set -uo pipefail
cd "$(dirname "$0")/../.."
export PYTHONPATH=src
OUT=${OUT:-out}
mkdir -p "$OUT"
KS="python3 -m kernelscope"
mode=" ${*:-all} "
has() { [[ "$mode" == *" all "* || "$mode" == *" $1 "* ]]; }
DEADLINE=${DEADLINE:-400}
# Seconds for the next step: its own cap, or what is left before DEADLINE.
left() { local l=$((DEADLINE - SECONDS)); [ "$1" -lt "$l" ] && echo "$1" || echo $((l > 5 ? l : 5)); }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch, triton; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'triton', triton.__version__)"
# Compile every autotune candidate in parallel processes (Triton's disk cache), so tests and autotuning load binaries.
timeout "$(left 90)" python3 benchmarks/attention/tune_configs.py --out "$OUT" --precompile-only --extra 2>&1 | tail -12

if has test; then
  timeout "$(left 170)" python3 -m pytest -q --maxfail=5 -p no:cacheprovider tests/kernels/test_attention.py \
    tests/gpu/test_attention_gpu.py tests/test_bench_attention.py 2>&1 | tail -25 | tee "$OUT/pytest.txt"
fi
if has record; then
  timeout "$(left 200)" $KS bench attention --seq-lengths 1024,2048,4096,8192,16384 --head-dim 64,128 --causal both \
    --impl flash,naive,sdpa-flash,sdpa-cudnn --dtype fp16 -o "$OUT/bench_attention_h100.json" -f \
    --no-progress --width 140 --no-color 2>&1 | tee "$OUT/bench.txt"
  $KS plot "$OUT/bench_attention_h100.json" --output-dir "$OUT/plots" --baseline sdpa-flash
  timeout "$(left 45)" $KS profile attention --impl flash --seq-len 512 --head-dim 128 -o "$OUT/profile_flash_s512.json" \
    -f --width 120 --no-color > "$OUT/profile.txt" 2>&1; echo "profile rc=$?"; head -c 3000 "$OUT/profile.txt"
fi
if has tune; then
  timeout "$(left 200)" python3 benchmarks/attention/tune_configs.py --out "$OUT" --seqs 4096,16384 --repeats 10 \
    --extra --no-precompile \
    > "$OUT/tune.txt" 2>&1
  grep -v "^    " "$OUT/tune.txt" | tail -12
fi
echo "total ${SECONDS}s"
