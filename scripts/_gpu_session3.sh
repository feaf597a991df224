set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 200 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_marlin_gemm.py tests/gpu/test_bench_w4a16_gpu.py tests/gpu/test_block_recorder_gpu.py tests/test_bench_w4a16.py > $OUT/pytest_gpu_w4a16.txt 2>&1; tail -3 $OUT/pytest_gpu_w4a16.txt
OUT=$OUT/marlin timeout 300 bash scripts/record_marlin.sh > $OUT/record_marlin_log.txt 2>&1; tail -25 $OUT/record_marlin_log.txt
ls $OUT/marlin
