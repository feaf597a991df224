#!/usr/bin/env bash
# Dev aid: how many replay passes and how much time each ncu section costs.
set -u
nvcc -O3 -arch=sm_90 -o /tmp/ap tests/workloads/cuda/access_patterns.cu
run() { local s=$(date +%s.%N); ncu --clock-control none "$@" -f -o /tmp/p /tmp/ap > /tmp/p.log 2>&1
  echo "$(grep -o '[0-9]* passes' /tmp/p.log | head -1) $(python3 -c "print(round($(date +%s.%N)-$s,2))")s :: $*"; }
for s in SpeedOfLight LaunchStats Occupancy MemoryWorkloadAnalysis MemoryWorkloadAnalysis_Tables MemoryWorkloadAnalysis_Chart ComputeWorkloadAnalysis SchedulerStats WarpStateStats InstructionStats; do run --section $s; done
EX=$(PYTHONPATH=src python3 -c "from kernelscope.collect.ncu.fields import EXTRA_METRICS; print(','.join(EXTRA_METRICS['sm_90']))")
run --metrics "$EX"
run --metrics dram__bytes.sum,lts__t_bytes.sum,l1tex__t_bytes.sum
run --metrics smsp__sass_thread_inst_executed_op_ffma_pred_on.sum,smsp__sass_thread_inst_executed_op_fadd_pred_on.sum
run --metrics sm__inst_executed_pipe_tensor_op_hmma.sum,sm__inst_executed_pipe_tensor_op_gmma.sum
run --set full
run --set basic
OURS=$(PYTHONPATH=src python3 -c "
from kernelscope.collect.ncu.fields import SECTIONS, EXTRA_METRICS
print(' '.join('--section ' + x for x in SECTIONS), '--metrics', ','.join(EXTRA_METRICS['sm_90']))")
run $OURS
PYTHONPATH=src python3 -c "
from kernelscope.collect.ncu.fields import NCU_FIELDS, STALL_METRIC, STALL_REASONS
print(','.join(sorted({c for f in NCU_FIELDS for c in f.candidates if not c.startswith('launch__')} | {STALL_METRIC.format(r) for r,_ in STALL_REASONS})))" > /tmp/panel_metrics.txt
run --section LaunchStats --section Occupancy --metrics "$(cat /tmp/panel_metrics.txt)"
grep -i "unable\|error" /tmp/p.log | head -3
for w in 1; do
  s=$(date +%s.%N); python3 tests/workloads/mixed.py >/dev/null 2>&1; echo "mixed alone $(python3 -c "print(round($(date +%s.%N)-$s,2))")s"
  s=$(date +%s.%N); ncu --clock-control none --section LaunchStats --section Occupancy --metrics "$(cat /tmp/panel_metrics.txt)" -f -o /tmp/q --filter-mode per-launch-config --launch-count 1 python3 tests/workloads/mixed.py > /tmp/q.log 2>&1; echo "mixed panel-metrics-only all kernels $(python3 -c "print(round($(date +%s.%N)-$s,2))")s $(grep -c Profiling /tmp/q.log) results, $(grep -o '[0-9]* passes' /tmp/q.log | head -1)"
done
