set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 420 python3 benchmarks/w4a16/tune.py --round 10 --m 1,16,64,256 --out $OUT/tune_round10_h100.json --deadline 330 > $OUT/tune10.txt 2>&1 || echo "tune10 rc=$?"
timeout 120 python3 -m pytest -q -p no:cacheprovider tests/kernels/test_marlin_gemm.py > $OUT/pytest_marlin.txt 2>&1; tail -2 $OUT/pytest_marlin.txt
tail -22 $OUT/tune10.txt
