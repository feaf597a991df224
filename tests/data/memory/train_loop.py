"""A 200-step training loop of a small MLP, with kernelscope.step() and kernelscope.mark(): the workload of the
`run --steps 50-52 --memory` check (tests/data/memory/README.md). Prints the mean wall time of steps 50-52
(synchronised per step) so --memory's overhead can be measured on the same loop with and without it."""
import sys
import time

import torch

import kernelscope

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 200
dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(1024, 4096), torch.nn.GELU(), torch.nn.Linear(4096, 1024)).to(dev)
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
x = torch.randn(256, 1024, device=dev)
y = torch.randn(256, 1024, device=dev)
times = []
for i in range(steps):
    t0 = time.perf_counter()
    with kernelscope.region("forward"):
        loss = torch.nn.functional.mse_loss(model(x), y)
    kernelscope.mark("after_forward", loss_shape=list(loss.shape), tokens=x.shape[0])
    with kernelscope.region("backward"):
        loss.backward()
    with kernelscope.region("optimizer"):
        opt.step()
        opt.zero_grad(set_to_none=True)
    if dev == "cuda":
        torch.cuda.synchronize()
    times.append(time.perf_counter() - t0)
    kernelscope.step()
window = times[50:53] or times
print(f"steps 50-52 mean wall time: {sum(window) / len(window) * 1e3:.3f} ms; all {len(times)} steps: "
      f"{sum(times) / len(times) * 1e3:.3f} ms", flush=True)
