"""tensor-cores-unused, training: an FP32 MLP trained with TF32 switched off, so every matmul runs on the FMA
pipes. Fixed: TF32 on (torch.set_float32_matmul_precision("high")), the same FP32 model and data."""
from __future__ import annotations

import torch

import harness

CPU_SKIP = None
SIZES = {"full": dict(batch=4096, hidden=4096, layers=3), "tiny": dict(batch=16, hidden=32, layers=3)}


def build(variant: str, tiny: bool, dev: torch.device):
    if variant == "defect":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.set_float32_matmul_precision("highest")
    else:
        torch.set_float32_matmul_precision("high")
        torch.backends.cudnn.allow_tf32 = True
    s = SIZES["tiny" if tiny else "full"]
    torch.manual_seed(0)
    layers: list[torch.nn.Module] = []
    for _ in range(s["layers"]):
        layers += [torch.nn.Linear(s["hidden"], s["hidden"]), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(s["hidden"], 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
    x = torch.randn(s["batch"], s["hidden"], device=dev)
    y = torch.randint(0, 10, (s["batch"],), device=dev)

    def step() -> torch.Tensor:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    return step


def main(argv: list[str] | None = None) -> None:
    args = harness.parse(argv, ("defect", "fixed"), steps=30)
    dev = harness.device(args.tiny)
    harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "tc_mlp_train")


if __name__ == "__main__":
    main()
