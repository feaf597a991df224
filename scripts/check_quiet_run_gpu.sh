#!/usr/bin/env bash
# Issue #20 on a GPU machine: doctor, demo, and what run/demo print on stderr (no foreign warning expected).
# From the repo root: OUT=/tmp/out PYTHONPATH=$PWD/src bash scripts/check_quiet_run_gpu.sh
set -u
KS="python3 -m kernelscope"
E=$OUT/stderr.txt
python3 -c "import torch,triton;print('torch',torch.__version__,'triton',triton.__version__)" > $E 2>&1
echo "== raw torch.profiler enter/exit (no kernelscope), stderr:" >> $E
python3 -c "
import torch
from torch.profiler import profile, ProfilerActivity
p=profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]); p.__enter__(); torch.ones(3,device='cuda').sum(); p.__exit__(None,None,None)
" 2>> $E >/dev/null
echo "== doctor" >> $E
$KS doctor --no-color --width 110 > $OUT/doctor.txt 2>> $E; echo "doctor rc=$?" >> $E
echo "== demo stderr" >> $E
$KS demo -f -o $OUT/demo_session.json --width 120 --no-color > $OUT/demo.txt 2>> $E; echo "demo rc=$?" >> $E
cat > /tmp/w.py <<'PY'
import warnings, torch
a = torch.randn(2048, 2048, device="cuda")
for _ in range(3):
    b = a @ a
torch.cuda.synchronize()
warnings.warn("the workload's own warning")
print("workload done")
PY
echo "== run stderr (expect only the workload's own warning)" >> $E
$KS run -f -o /tmp/run.json -- python3 /tmp/w.py > $OUT/run.txt 2>> $E; echo "run rc=$?" >> $E
echo "== run -m kernelscope.kernels.marlin.workload stderr" >> $E
$KS run -f -o /tmp/run_demo.json -- python3 -m kernelscope.kernels.marlin.workload >> $OUT/run.txt 2>> $E; echo "run demo rc=$?" >> $E
gzip -9 -f $OUT/demo_session.json
ls -la $OUT >> $E
cat $E
