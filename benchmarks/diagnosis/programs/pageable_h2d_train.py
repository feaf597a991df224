"""pageable-copies, training: each step copies its input batches, 4 x 32 MB of FP32 features kept in ordinary
(pageable) host memory, to the GPU with .to("cuda") and trains a small bf16 MLP on them; the copies serialise
with compute and run at pageable speed. Fixed: the host batches pinned (pin_memory()), each copied with
non_blocking=True on a side stream one micro-batch ahead, overlapping the compute of the previous one."""
from __future__ import annotations

import torch

import harness

CPU_SKIP = "the fix needs pinned memory and a CUDA side stream"
SIZES = {"full": dict(micro=4, rows=8192, cols=1024, hidden=1024, pool=8),
         "tiny": dict(micro=2, rows=8, cols=16, hidden=16, pool=3)}


def build(variant: str, tiny: bool, dev: torch.device):
    s = SIZES["tiny" if tiny else "full"]
    torch.manual_seed(0)
    host = [torch.randn(s["rows"], s["cols"]) for _ in range(s["pool"])]  # the "dataset", in host memory
    if variant == "fixed":
        host = [t.pin_memory() for t in host]
    model = torch.nn.Sequential(torch.nn.Linear(s["cols"], s["hidden"]), torch.nn.GELU(),
                                torch.nn.Linear(s["hidden"], 1)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    copy_stream = torch.cuda.Stream(dev) if variant == "fixed" else None
    state = {"i": 0}

    def next_host() -> torch.Tensor:
        t = host[state["i"] % len(host)]
        state["i"] += 1
        return t

    def train_on(x: torch.Tensor) -> torch.Tensor:
        with torch.autocast(dev.type, dtype=torch.bfloat16):
            loss = model(x).float().pow(2).mean()
        loss.backward()
        return loss.detach()

    def prefetch() -> torch.Tensor:
        with torch.cuda.stream(copy_stream):
            return next_host().to(dev, non_blocking=True)

    def step() -> torch.Tensor:
        losses = []
        if variant == "defect":
            for _ in range(s["micro"]):
                losses.append(train_on(next_host().to(dev)))
        else:
            ahead = prefetch()
            for k in range(s["micro"]):
                torch.cuda.current_stream(dev).wait_stream(copy_stream)
                x = ahead
                x.record_stream(torch.cuda.current_stream(dev))
                if k + 1 < s["micro"]:
                    ahead = prefetch()
                losses.append(train_on(x))
        opt.step()
        opt.zero_grad(set_to_none=True)
        return torch.stack(losses)

    return step


def main(argv: list[str] | None = None) -> None:
    args = harness.parse(argv, ("defect", "fixed"), steps=20)
    dev = harness.device(args.tiny)
    harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "pageable_h2d_train")


if __name__ == "__main__":
    main()
