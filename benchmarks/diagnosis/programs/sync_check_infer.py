"""sync-in-loop, inference in bf16: a 24-block residual MLP stack whose forward checks each block's output for
overflow with `if x.abs().max().item() > LIMIT` and copies a per-block statistic to the host with .cpu(), two
host syncs per block. Fixed: the maxima and statistics kept in GPU tensors (torch.stack), copied to the host once
after the forward, the overflow check done on that copy."""
from __future__ import annotations

import torch

import harness

CPU_SKIP = None
SIZES = {"full": dict(tokens=4096, dim=2048, blocks=24), "tiny": dict(tokens=4, dim=8, blocks=3)}
LIMIT = 1e4


def build(variant: str, tiny: bool, dev: torch.device):
    s = SIZES["tiny" if tiny else "full"]
    torch.manual_seed(0)
    d = s["dim"]
    blocks = torch.nn.ModuleList(
        torch.nn.Sequential(torch.nn.LayerNorm(d), torch.nn.Linear(d, 2 * d), torch.nn.SiLU(),
                            torch.nn.Linear(2 * d, d)) for _ in range(s["blocks"])).to(dev, torch.bfloat16).eval()
    x0 = torch.randn(s["tokens"], d, device=dev, dtype=torch.bfloat16)

    @torch.inference_mode()
    def step() -> torch.Tensor:
        x = x0
        if variant == "defect":
            stats = []
            for blk in blocks:
                x = x + blk(x)
                if x.abs().max().item() > LIMIT:
                    raise RuntimeError("activation overflow")
                stats.append(x.float().norm(dim=-1).mean().cpu())
            return torch.stack(stats)
        maxima, stats = [], []
        for blk in blocks:
            x = x + blk(x)
            maxima.append(x.abs().max())
            stats.append(x.float().norm(dim=-1).mean())
        host = torch.stack([torch.stack(maxima).float(), torch.stack(stats)]).cpu()  # the one sync
        if bool((host[0] > LIMIT).any()):
            raise RuntimeError("activation overflow")
        return host[1]

    return step


def main(argv: list[str] | None = None) -> None:
    args = harness.parse(argv, ("defect", "fixed"), steps=30)
    dev = harness.device(args.tiny)
    harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "sync_check_infer")


if __name__ == "__main__":
    main()
