"""sync-in-loop, training: gradient accumulation over 8 micro-batches of a small FP32 (TF32) MLP, and after each
micro-batch the loss is read with .item() for a running sum and a NaN check, so the host waits for the GPU and
the GPU then waits for the host to launch the next micro-batch. Fixed: the losses summed on the GPU and the NaN
check done on the GPU sum, read once at the end of the step."""
from __future__ import annotations

import math

import torch

import harness

CPU_SKIP = None
SIZES = {"full": dict(micro=8, batch=2048, hidden=2048, layers=6), "tiny": dict(micro=3, batch=4, hidden=8, layers=2)}


def build(variant: str, tiny: bool, dev: torch.device):
    torch.set_float32_matmul_precision("high")
    s = SIZES["tiny" if tiny else "full"]
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(s["layers"]):
        layers += [torch.nn.Linear(s["hidden"], s["hidden"]), torch.nn.LayerNorm(s["hidden"]), torch.nn.GELU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(s["hidden"], 1)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    xs = torch.randn(s["micro"], s["batch"], s["hidden"], device=dev)
    ys = torch.randn(s["micro"], s["batch"], 1, device=dev)

    def step() -> torch.Tensor:
        if variant == "defect":
            total = 0.0
            for k in range(s["micro"]):
                loss = torch.nn.functional.mse_loss(model(xs[k]), ys[k]) / s["micro"]
                loss.backward()
                value = loss.item()
                if math.isnan(value):
                    raise RuntimeError("loss is NaN")
                total += value
        else:
            total_t = torch.zeros((), device=dev)
            for k in range(s["micro"]):
                loss = torch.nn.functional.mse_loss(model(xs[k]), ys[k]) / s["micro"]
                loss.backward()
                total_t += loss.detach()
            total = total_t.item()  # once per step
            if math.isnan(total):
                raise RuntimeError("loss is NaN")
        opt.step()
        opt.zero_grad(set_to_none=True)
        return torch.tensor(total)

    return step


def main(argv: list[str] | None = None) -> None:
    args = harness.parse(argv, ("defect", "fixed"), steps=30)
    dev = harness.device(args.tiny)
    harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "sync_item_train")


if __name__ == "__main__":
    main()
