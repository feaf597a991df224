#!/usr/bin/env bash
# One call on a 2-GPU machine (nvidia-h200-x2): the multigpu test, `run --counters --ranks 1` under torchrun
# (NCCL kernels must not be profiled), and `run --memory` without --steps. Writes under $OUT.
set -u
O=${OUT:-/tmp/kernelscope-x2}; mkdir -p "$O"
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src:$(ls -d /opt/nvidia/nsight-compute/*/extras/python | head -1)
export PATH=/usr/local/cuda/bin:$PATH
KS="python3 -m kernelscope"; W=tests/workloads/ddp_straggler.py; L=$O/verify.log
{ date -u; nvidia-smi -L; ncu --version | tail -1; } >> "$L" 2>&1
timeout 200 python3 -m pytest -q -p no:cacheprovider -x tests/gpu/test_ranks_gpu.py >> "$L" 2>&1
echo "multigpu pytest rc=$?" >> "$L"
timeout 240 $KS run -f -o "$O/ctr.json" --counters --ranks 1 --top 2 -- torchrun --nproc-per-node 2 \
    --master-port 29561 $W --steps 3 >> "$L" 2>&1
echo "counters under torchrun rc=$?" >> "$L"
python3 - "$O/ctr.json" >> "$L" 2>&1 <<'PY'
import sys
from kernelscope.model import Session
s = Session.load(sys.argv[1])
c = s.collectors.get("counters")
print("counters collector:", c.status if c else None, (c.reason if c else ""))
for k, v in sorted((c.details if c else {}).items()):
    print("  ", k, "=", str(v)[:300])
prof = [x for x in s.launches if x.counters]
print("launches with counters:", len(prof), "by rank:", sorted({x.rank for x in prof}))
print("NCCL kernels with counters:", sum(1 for x in prof if "nccl" in x.kernel.lower()))
for x in prof[:4]:
    print("   rank", x.rank, x.kernel[:80], len(x.counters), "counters")
PY
cat > /tmp/memw.py <<'PY'
import torch
m = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 1024)).cuda()
opt = torch.optim.SGD(m.parameters(), lr=0.01)
for _ in range(20):
    x = torch.randn(256, 1024, device="cuda")
    loss = m(x).square().mean(); loss.backward(); opt.step(); opt.zero_grad()
torch.cuda.synchronize()
print("peak", torch.cuda.max_memory_allocated())
PY
timeout 90 $KS run -f -o "$O/mem.json" --memory -- python3 /tmp/memw.py >> "$L" 2>&1
echo "memory without --steps rc=$?" >> "$L"
$KS show "$O/mem.json" --width 120 --panels 0 2>> "$L" | grep -i -A14 "memory" | head -40 >> "$L"
gzip -f "$O/ctr.json" "$O/mem.json"
tail -60 "$L"
