#!/usr/bin/env bash
# Re-record the multi-GPU fixtures under tests/data/ranks (see its README).
# Run from the repo root on a machine with 2 NVIDIA GPUs (nvidia-h200-x2), torch and NCCL:
#   OUT=/tmp/ranks bash scripts/record_ranks.sh
# then copy $OUT/ranks/* into tests/data/ranks/. Leaves the NCCL environment as found
# (NVLink multicast stays off: NCCL_NVLS_ENABLE=0 on the shared machines).
set -u
O=${OUT:-/tmp/kernelscope-ranks}
R=$O/ranks
mkdir -p "$R" /tmp/ks-ranks
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD/src${PYTHONPATH:+:$PYTHONPATH}
TR="python3 -m torch.distributed.run"
W=tests/workloads/ddp_straggler.py
LOG=$O/record_ranks.log
{ echo "date: $(date -u +%FT%TZ)"; nvidia-smi --query-gpu=index,name,driver_version --format=csv;
  python3 -c 'import torch; print("torch", torch.__version__, "nccl", torch.cuda.nccl.version())';
  env | grep -E '^(NCCL|TORCH_SYMM|NVSHMEM)' | sort; } > "$LOG" 2>&1

echo "== one job, 2 ranks on one host (torch.profiler per rank)" | tee -a "$LOG"
rm -rf /tmp/ks-ranks/job && $TR --nproc-per-node 2 --master-port 29511 $W --trace-dir /tmp/ks-ranks/job >> "$LOG" 2>&1
echo "rc=$?" >> "$LOG"
i=0; for f in /tmp/ks-ranks/job/*.pt.trace.json.gz; do cp "$f" "$R/job2_rank$i.pt.trace.json.gz"; i=$((i+1)); done

echo "== two torchrun 'nodes' on one host (--nnodes 2 --node-rank), one GPU each" | tee -a "$LOG"
rm -rf /tmp/ks-ranks/node0 /tmp/ks-ranks/node1
for n in 0 1; do
  CUDA_VISIBLE_DEVICES=$n $TR --nnodes 2 --node-rank $n --nproc-per-node 1 --master-addr 127.0.0.1 \
    --master-port 29512 $W --trace-dir /tmp/ks-ranks/node$n >> "$LOG" 2>&1 &
done
wait; echo "rc=$?" >> "$LOG"
for n in 0 1; do cp /tmp/ks-ranks/node$n/*.pt.trace.json.gz "$R/node${n}_rank$n.pt.trace.json.gz"; done
ls -la "$R" >> "$LOG"
