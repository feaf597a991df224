"""launch-bound, inference (holdout): a scoring service runs a tiny FP32 3-layer MLP (32 -> 64 -> 64 -> 10,
softmax) on each of the 64 requests of a batch in a Python loop, four batches a step: about 1,500 kernels of a
few microseconds each, so the GPU mostly waits for the next launch. Fixed: the same MLP called once on each
(64, 32) batch."""
from __future__ import annotations

import torch

import harness

CPU_SKIP = None
SIZES = {"full": dict(batches=4, batch=64, inp=32, hidden=64, out=10),
         "tiny": dict(batches=2, batch=5, inp=6, hidden=8, out=3)}


def build(variant: str, tiny: bool, dev: torch.device):
    s = SIZES["tiny" if tiny else "full"]
    torch.set_float32_matmul_precision("highest")
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(s["inp"], s["hidden"]), torch.nn.ReLU(),
                              torch.nn.Linear(s["hidden"], s["hidden"]), torch.nn.ReLU(),
                              torch.nn.Linear(s["hidden"], s["out"]), torch.nn.Softmax(dim=-1)).to(dev).eval()
    requests = torch.randn(s["batches"], s["batch"], s["inp"], device=dev)

    @torch.inference_mode()
    def step() -> torch.Tensor:
        results = []
        for b in range(s["batches"]):
            x = requests[b]
            if variant == "defect":
                results.append(torch.cat([mlp(x[i:i + 1]) for i in range(x.shape[0])]))
            else:
                results.append(mlp(x))
        return torch.stack(results)

    return step


def main(argv: list[str] | None = None) -> None:
    args = harness.parse(argv, ("defect", "fixed"), steps=15)
    dev = harness.device(args.tiny)
    harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "holdout_launch_small_mlp")


if __name__ == "__main__":
    main()
