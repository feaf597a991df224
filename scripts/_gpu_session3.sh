set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/ncu_report-*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site
KS="python3 -m kernelscope"
timeout 330 python3 benchmarks/w4a16/tune.py --round 13 --m 1,4,16,64,256 --out $OUT/tune_round13_h100.json --deadline 280 > $OUT/tune13.txt 2>&1 || echo "tune rc=$?"
python3 benchmarks/w4a16/make_tuned.py $OUT/tune_round13_h100.json --out src/kernelscope/kernels/marlin/tuned_h100.json
cp src/kernelscope/kernels/marlin/tuned_h100.json $OUT/
timeout 60 $KS run -f -o $OUT/blocks_m1_h100.json -- python3 benchmarks/w4a16/block_timeline.py --points 4096x4096x1,8192x8192x1,28672x8192x1,8192x8192x256 > $OUT/blocks_run.txt 2>&1 || echo "blocks rc=$?"
grep -A1 "^[0-9]*x" $OUT/blocks_run.txt | grep programs
DEADLINE=200 OUT=$OUT bash scripts/bench_w4a16.sh record > $OUT/bench_log.txt 2>&1
python3 benchmarks/w4a16/make_table.py $OUT/w4a16/bench_w4a16_h100.json | tail -26
