"""launch-bound, training: a hand-written SGD-with-momentum update over 1000 small parameter tensors (64 x 64
FP32), three tiny kernels per tensor in a Python loop, 3000 launches a step, each a few microseconds of GPU work.
Fixed: the parameters, gradients and momentum buffers are views into three flat buffers, and the same update is
two ops over the flat buffers."""
from __future__ import annotations

import torch

import harness

CPU_SKIP = None
SIZES = {"full": dict(params=1000, side=64), "tiny": dict(params=5, side=3)}
LR, MOMENTUM = 1e-3, 0.9


def build(variant: str, tiny: bool, dev: torch.device):
    s = SIZES["tiny" if tiny else "full"]
    torch.manual_seed(0)
    n, numel = s["params"], s["side"] * s["side"]
    flat_p = torch.randn(n * numel, device=dev)
    flat_g = torch.randn(n * numel, device=dev) * 1e-2
    flat_m = torch.zeros(n * numel, device=dev)
    params = [t.view(s["side"], s["side"]) for t in flat_p.split(numel)]
    grads = [t.view(s["side"], s["side"]) for t in flat_g.split(numel)]
    bufs = [t.view(s["side"], s["side"]) for t in flat_m.split(numel)]

    def step() -> torch.Tensor:
        if variant == "defect":
            for p, g, m in zip(params, grads, bufs):
                m.mul_(MOMENTUM)
                m.add_(g)
                p.add_(m, alpha=-LR)
        else:
            flat_m.mul_(MOMENTUM).add_(flat_g)
            flat_p.add_(flat_m, alpha=-LR)
        return flat_p

    return step


def main(argv: list[str] | None = None) -> None:
    args = harness.parse(argv, ("defect", "fixed"), steps=30)
    dev = harness.device(args.tiny)
    harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "launch_param_loop")


if __name__ == "__main__":
    main()
