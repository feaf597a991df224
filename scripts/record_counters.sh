#!/usr/bin/env bash
# Re-record the counter-pass fixtures and the counter-pass benchmark on a GPU machine:
#   OUT=/tmp/out bash scripts/record_counters.sh [bench]
# Writes $OUT/counters.tar.xz (sessions, .ncu-rep reports, ncu details pages) and
# $OUT/bench_counters.txt. Never changes clocks (--clock-control none).
set -u
O=${OUT:-/tmp/kernelscope-counters}; F=/tmp/ks_counters; rm -rf "$F"; mkdir -p "$O" "$F"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
NCU_PY=$(dirname "$(readlink -f "$(which ncu)")")/../extras/python
[ -d "$NCU_PY" ] || NCU_PY=$(ls -d /opt/nvidia/nsight-compute/*/extras/python | tail -1)
export PYTHONPATH=$PYTHONPATH:$NCU_PY
KS="python3 -m kernelscope"
nvcc -O3 -arch=sm_90 -o /tmp/access_patterns tests/workloads/cuda/access_patterns.cu || exit 1
if [ -d .whl ]; then  # the same ncu_report reader CI uses (PyPI ncu-report), carried as a wheel
  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/ncu_report-*.whl && export PYTHONPATH=/tmp/site:$PYTHONPATH
fi
if [ "${1:-all}" != bench ]; then  # `record_counters.sh bench`: the benchmark alone
echo "== python workload, both passes (top 8: every kernel of the workload)"
$KS run --counters --top 8 -f -o "$F/session_h100_counters.json" -- python3 tests/workloads/counters_small.py 2>&1 | tail -8
echo "== CUDA C++ program: counter pass only"
$KS run --counters -f -o "$F/session_h100_cuda.json" -- /tmp/access_patterns 2>&1 | tail -8
echo "== region filter"
$KS run --counters --region cublas_mm -f -o "$F/session_h100_region.json" -- python3 tests/workloads/counters_small.py 2>&1 | tail -4
echo "== hand-made report (plain ncu, default sections) for kernelscope import"
ncu --clock-control none -f -o "$F/handmade_cuda" /tmp/access_patterns > /dev/null 2>&1
ncu --import "$F/handmade_cuda.ncu-rep" --page details --print-units base --csv > "$F/handmade_cuda.details.csv"
for r in session_h100_counters session_h100_cuda; do
  ncu --import "$F/$r.ncu-rep" --page details --print-units base --csv > "$F/$r.details.csv"
done
fi
echo "== benchmark: mixed workload (14 distinct kernels), three ways"
$KS run -q -f -o /tmp/mixed_trace.json -- python3 tests/workloads/mixed.py > /dev/null 2>&1
KREGEX=$(python3 -c "from kernelscope.model import Session; from kernelscope.collect.ncu.merge import top_kernel_regex; print(top_kernel_regex(Session.load('/tmp/mixed_trace.json'), 100))")
N=$(python3 -c "from kernelscope.model import Session; from kernelscope.model.names import short_kernel_name as s; print(len({s(x.kernel) for x in Session.load('/tmp/mixed_trace.json').launches}))")
t() { local s=$(date +%s.%N); "$@" > /dev/null 2>&1; local rc=$?; echo "$(python3 -c "print(round($(date +%s.%N)-$s,2))") rc=$rc"; }
A=$(t python3 tests/workloads/mixed.py)
B=$(t ncu --clock-control none --set full --import-source no -f -o /tmp/full --kernel-name-base function --kernel-name "regex:$KREGEX" --filter-mode per-launch-config --launch-count 1 python3 tests/workloads/mixed.py)
C=$(t $KS run --counters --top 100 -q -f -o /tmp/ks_bench.json -- python3 tests/workloads/mixed.py)
MF=$(python3 -c "
import ncu_report
c = ncu_report.load_report('/tmp/full.ncu-rep'); r = c.range_by_idx(0); print(r.num_actions())")
MK=$(python3 -c "from kernelscope.model import Session; s=Session.load('/tmp/ks_bench.json'); print(sum(1 for x in s.launches if x.counters))")
{
echo "device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)  date: $(date -u +%F)  ncu: $(ncu --version | tail -1)"
echo "distinct kernels in workload: $N"
echo "workload alone (s):                     $A"
echo "ncu --set full, same kernels (s):       $B  results: $MF"
echo "kernelscope run --counters, both (s):   $C  results: $MK"
echo "replay passes per result (kernelscope): $(grep -o '[0-9]* passes' /tmp/ks_bench.ncu.log | sort | uniq -c | tr '\n' ' ')"
} | tee "$O/bench_counters.txt"
# nothing lost: every model field the panels use that --set full has, kernelscope's pass has too
python3 - <<'PY' | tee -a "$O/bench_counters.txt"
from kernelscope.collect.ncu.merge import resolve_fields
from kernelscope.collect.ncu.report_reader import read_report
ks = read_report("/tmp/ks_bench.ncu-rep"); full = read_report("/tmp/full.ncu-rep")
lost = set()
for a, b in zip(ks.kernels, full.kernels):
    ra, rb = resolve_fields(a.metrics), resolve_fields(b.metrics)
    lost |= {k for k in rb if not rb[k].is_missing and ra[k].is_missing}
print("panel fields present in --set full but missing from kernelscope's pass:", sorted(lost) or "none")
PY
ls -la "$F"
cd "$F" && tar -cJf "$O/counters.tar.xz" . && ls -la "$O"
