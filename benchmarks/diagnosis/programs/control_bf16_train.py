"""control, training: a bf16 MLP (three 8192 x 8192 layers, batch 8192) trained with plain SGD, every matmul a
large tensor-core GEMM; nothing else of note runs. No finding should exceed 20%."""
from __future__ import annotations

import torch

import harness

CPU_SKIP = None
SIZES = {"full": dict(batch=8192, hidden=8192, layers=3), "tiny": dict(batch=8, hidden=16, layers=2)}


def build(variant: str, tiny: bool, dev: torch.device):
    s = SIZES["tiny" if tiny else "full"]
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(s["layers"]):
        layers += [torch.nn.Linear(s["hidden"], s["hidden"], bias=False), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers).to(dev, torch.bfloat16)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4, foreach=True)
    x = torch.randn(s["batch"], s["hidden"], device=dev, dtype=torch.bfloat16)

    def step() -> torch.Tensor:
        loss = model(x).float().square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    return step


def main(argv: list[str] | None = None) -> None:
    args = harness.parse(argv, ("control",), steps=30)
    dev = harness.device(args.tiny)
    harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "control_bf16_train")


if __name__ == "__main__":
    main()
