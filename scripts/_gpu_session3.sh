set -u
export PYTHONPATH=$PWD/src PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/ncu_report-*.whl && export PYTHONPATH=$PYTHONPATH:/tmp/site
KS="python3 -m kernelscope"
timeout 120 $KS run -f -o $OUT/blocks_m1_h100.json -- python3 benchmarks/w4a16/block_timeline.py --points 4096x4096x1,8192x8192x1,28672x8192x1,8192x8192x256 > $OUT/blocks_run.txt 2>&1 || echo "blocks rc=$?"
grep -A1 "^[0-9]*x" $OUT/blocks_run.txt
for P in "8192 8192 1" "8192 8192 256"; do set -- $P
  CFG=$(python3 -c "
import json; t=json.load(open('src/kernelscope/kernels/marlin/tuned_h100.json'))
print(json.dumps(next(r['launch'] for r in t['configs'] if (r['k'],r['n'],r['m'])==($1,$2,$3))))")
  timeout 150 $KS run -f --counters --kernel _w4a16_kernel -o $OUT/profile_m$3_k$1_n$2_round12_h100.json -- python3 benchmarks/w4a16/profile_point.py --k $1 --n $2 --m $3 --config "$CFG" > $OUT/profile_m$3.txt 2>&1 || echo "profile m=$3 rc=$?"
  $KS show $OUT/profile_m$3_k$1_n$2_round12_h100.json --kernel _w4a16 --width 130 --no-color > $OUT/profile_m$3_k$1_n$2_round12_h100.txt 2>&1
  grep -E "DRAM  |Achieved occ|Registers / thread|Duration|Bottleneck|Tensor pipe util" $OUT/profile_m$3_k$1_n$2_round12_h100.txt | head -8
done
rm -f $OUT/*.ncu-rep
