#!/usr/bin/env bash
# Dev aid for the counter pass: record ncu reports with kernelscope's sections on
# the mixed Python workload and on a CUDA C++ program, and dump their metrics.
set -u
O=${OUT:-/tmp/probe}; mkdir -p "$O"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src
NCU_PY=/opt/nvidia/nsight-compute/2025.3.1/extras/python
SECTIONS="--section SpeedOfLight --section LaunchStats --section Occupancy --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables --section ComputeWorkloadAnalysis --section SchedulerStats --section WarpStateStats --section InstructionStats"
nvcc -O3 -arch=sm_90 -o /tmp/access_patterns tests/workloads/cuda/access_patterns.cu 2>&1 | tail -3
t0=$(date +%s.%N); /tmp/access_patterns; t1=$(date +%s.%N)
ncu --clock-control none $SECTIONS --import-source no -f -o /tmp/cuda_ap /tmp/access_patterns > "$O/ncu_cuda.log" 2>&1; echo "ncu cuda rc=$?"
t2=$(date +%s.%N)
ncu --clock-control none $SECTIONS --import-source no -f -o /tmp/py_mixed python3 tests/workloads/mixed.py > "$O/ncu_py.log" 2>&1; echo "ncu py rc=$?"
t3=$(date +%s.%N)
ls -la /tmp/*.ncu-rep
for r in cuda_ap py_mixed; do
  ncu --import /tmp/$r.ncu-rep --page details --print-units base --csv > /tmp/${r}_details.csv
  ncu --import /tmp/$r.ncu-rep --page raw --print-units base --csv > /tmp/${r}_raw.csv
done
PYTHONPATH=$NCU_PY:$PYTHONPATH python3 - <<'PY'
import json, ncu_report
out = {}
for r in ("cuda_ap", "py_mixed"):
    ctx = ncu_report.load_report(f"/tmp/{r}.ncu-rep")
    rng = ctx.range_by_idx(0)
    acts = []
    for i in range(rng.num_actions()):
        a = rng.action_by_idx(i)
        ms = {}
        for n in a.metric_names():
            m = a.metric_by_name(n)
            try:
                v = m.value()
            except Exception as e:
                v = f"ERR {e}"
            ms[n] = [v if isinstance(v, (int, float, str)) or v is None else str(v), m.unit(), m.num_instances() if m.has_value() else None]
        rules = a.rule_results_as_dicts()
        acts.append({"name": a.name(), "metrics": ms, "rules": json.loads(json.dumps(rules, default=str)),
                     "sections": [s.identifier() for s in a.sections()] if hasattr(a, "sections") else []})
    out[r] = acts
json.dump(out, open("/tmp/dump.json", "w"), default=str)
print({k: len(v) for k, v in out.items()})
PY
cd /tmp && tar -cJf "$O/probe.tar.xz" cuda_ap.ncu-rep py_mixed.ncu-rep dump.json cuda_ap_details.csv py_mixed_details.csv cuda_ap_raw.csv py_mixed_raw.csv
ls -la "$O"
python3 -c "print('workload alone %.2fs, ncu(cuda) %.2fs, ncu(py mixed) %.2fs' % ($t1-$t0, $t2-$t1, $t3-$t2))"
