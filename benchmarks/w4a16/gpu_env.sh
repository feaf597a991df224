# Sourced by the issue17_gpu*.sh stage scripts (run from the repo root on the GPU machine): the package on the path,
# the output folder, and the GPU's name, driver and SM clock recorded into it.
export PYTHONPATH=$PWD/src
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv,noheader | tee "$OUT/gpu.txt"
