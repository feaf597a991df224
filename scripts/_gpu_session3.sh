set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
timeout 150 python3 benchmarks/w4a16/tune.py --round 12 --m 4 --out $OUT/tune_round12_m4_h100.json --deadline 120 > $OUT/tune12_m4.txt 2>&1 || echo "tune rc=$?"
tail -6 $OUT/tune12_m4.txt
python3 benchmarks/w4a16/make_tuned.py benchmarks/w4a16/runs/tune_round12_h100.json.gz $OUT/tune_round12_m4_h100.json --out src/kernelscope/kernels/marlin/tuned_h100.json
cp src/kernelscope/kernels/marlin/tuned_h100.json $OUT/
DEADLINE=400 OUT=$OUT bash scripts/bench_w4a16.sh record > $OUT/bench_log.txt 2>&1
python3 benchmarks/w4a16/make_table.py $OUT/w4a16/bench_w4a16_h100.json
