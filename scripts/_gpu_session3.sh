set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 540 python3 benchmarks/w4a16/tune.py --round 12 --m 1,16,64,256 --out $OUT/tune_round12_h100.json --deadline 420 > $OUT/tune12.txt 2>&1 || echo "tune10 rc=$?"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_marlin_gemm.py > $OUT/pytest_marlin.txt 2>&1; tail -2 $OUT/pytest_marlin.txt
tail -22 $OUT/tune12.txt
