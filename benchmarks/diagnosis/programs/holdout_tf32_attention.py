"""tensor-cores-unused, inference (holdout): a 4-layer FP32 attention stack written by hand (q/k/v/out
projections, q @ k.transpose(-2, -1) * scale, softmax, @ v) over 8 sequences of 1024 tokens, width 2048, 16
heads, with TF32 explicitly off (torch.backends.cuda.matmul.allow_tf32 = False): every matmul runs on the FP32
FMA pipes. Fixed: the same model under bf16 autocast with F.scaled_dot_product_attention (tensor cores, flash
attention)."""
from __future__ import annotations

import torch
import torch.nn.functional as F

import harness

CPU_SKIP = None
SIZES = {"full": dict(batch=8, seq=1024, dim=2048, heads=16, layers=4),
         "tiny": dict(batch=2, seq=8, dim=16, heads=2, layers=2)}


class Attention(torch.nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm = torch.nn.LayerNorm(dim)
        self.q, self.k, self.v, self.o = (torch.nn.Linear(dim, dim) for _ in range(4))

    def forward(self, x: torch.Tensor, fused: bool) -> torch.Tensor:
        b, t, d = x.shape
        h = self.norm(x)
        q, k, v = (f(h).view(b, t, self.heads, d // self.heads).transpose(1, 2) for f in (self.q, self.k, self.v))
        if fused:
            a = F.scaled_dot_product_attention(q, k, v)
        else:
            scores = q @ k.transpose(-2, -1) * (d // self.heads) ** -0.5
            a = scores.softmax(dim=-1) @ v
        return x + self.o(a.transpose(1, 2).reshape(b, t, d))


def build(variant: str, tiny: bool, dev: torch.device):
    s = SIZES["tiny" if tiny else "full"]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(0)
    layers = torch.nn.ModuleList(Attention(s["dim"], s["heads"]) for _ in range(s["layers"])).to(dev).eval()
    x0 = torch.randn(s["batch"], s["seq"], s["dim"], device=dev)

    @torch.inference_mode()
    def step() -> torch.Tensor:
        x = x0
        if variant == "defect":
            for layer in layers:
                x = layer(x, fused=False)
        else:
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                for layer in layers:
                    x = layer(x, fused=True)
        return x.float()

    return step


def main(argv: list[str] | None = None) -> None:
    args = harness.parse(argv, ("defect", "fixed"), steps=15)
    dev = harness.device(args.tiny)
    harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "holdout_tf32_attention")


if __name__ == "__main__":
    main()
