#!/usr/bin/env bash
# End-to-end check of multi-GPU recording on a 2-GPU machine (nvidia-h200-x2); writes under $OUT:
# the fixtures (record_ranks.sh), a `kernelscope run -- torchrun` session and its show output, the
# multigpu test log, and the cost of the trace pass per rank (torchrun, 2 ranks) against one GPU.
set -u
O=${OUT:-/tmp/kernelscope-ranks}; mkdir -p "$O"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
KS="python3 -m kernelscope"; W=tests/workloads/ddp_straggler.py; L=$O/check.log
OUT=$O bash scripts/record_ranks.sh
$KS import "$O"/ranks/job2_rank*.pt.trace.json.gz -o "$O/job2.json" -f >> "$L" 2>&1
$KS show "$O/job2.json" --width 150 --panels 0 > "$O/show_job2.txt" 2>> "$L"
$KS run -f -o "$O/run2.json" -- torchrun --nproc-per-node 2 --master-port 29551 $W --steps 5 >> "$L" 2>&1; echo "run rc=$?" >> "$L"
$KS show "$O/run2.json" --width 150 --panels 0 > "$O/show_run2.txt" 2>> "$L"
python3 -m pytest -q -p no:cacheprovider tests/gpu/test_ranks_gpu.py > "$O/multigpu_tests.log" 2>&1; echo "pytest rc=$?" >> "$L"
# cost: the workload's own time (steps only) and the whole command's wall time, plain vs under kernelscope
t() { local s=$(date +%s.%N); "$@" > "$O/t.out" 2>&1; local e=$(date +%s.%N); echo "$(python3 -c "print(round($e - $s, 2))") $(grep -o 'in [0-9.]* s' "$O/t.out" | tr '\n' ' ')"; }
for n in 1 2; do
  for i in 1; do
    echo "nproc=$n plain:       $(t torchrun --nproc-per-node $n --master-port 2956$n $W --steps 20)" >> "$L"
    echo "nproc=$n kernelscope: $(t $KS run -f -q -o /tmp/c$n.json -- torchrun --nproc-per-node $n --master-port 2957$n $W --steps 20)" >> "$L"
  done
done
rm -f "$O/t.out" "$O/job2.json"
for f in record_ranks.log show_job2.txt show_run2.txt multigpu_tests.log; do echo "=== $f"; cat "$O/$f"; rm -f "$O/$f"; done >> "$L"
gzip -f "$O/run2.json"
