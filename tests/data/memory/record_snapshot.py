"""Re-record tests/data/memory/snapshot.json.gz on a CUDA machine: torch.cuda.memory._snapshot() of three
training steps of the train_loop.py model, recorded as `kernelscope run --memory` records it (context=alloc,
stacks=python), dumped as JSON (the snapshot is plain dicts), beside what torch itself measured
(max_memory_allocated over the window, memory_allocated/reserved at the end) for the tests to check against.

    python tests/data/memory/record_snapshot.py OUT_DIR
"""
import gzip
import json
import sys
import time

import torch

out = sys.argv[1] if len(sys.argv) > 1 else "."
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).cuda()
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(256, 1024, device="cuda")
y = torch.randn(256, 1024, device="cuda")


def train_step() -> None:
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


train_step()  # the optimizer state exists before the window, as in a long job
torch.cuda.synchronize()
torch.cuda.reset_peak_memory_stats()
start_allocated = torch.cuda.memory_allocated()
t0_ns = time.time_ns()
torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python", max_entries=500_000)
for _ in range(3):
    train_step()
torch.cuda.synchronize()
snapshot = torch.cuda.memory._snapshot()
torch.cuda.memory._record_memory_history(enabled=None)
measured = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "recorded_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "time_origin_ns": t0_ns,
            "allocated_at_start_bytes": start_allocated,
            "max_memory_allocated_bytes": torch.cuda.max_memory_allocated(),
            "memory_allocated_end_bytes": torch.cuda.memory_allocated(),
            "memory_reserved_end_bytes": torch.cuda.memory_reserved()}
with gzip.open(f"{out}/snapshot.json.gz", "wt") as f:
    json.dump({"snapshot": snapshot, "measured": measured}, f, default=str)
print(json.dumps(measured))
