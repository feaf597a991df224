"""control (holdout): a tuned bf16 inference loop: a 2-block pre-norm transformer (width 4096, 32 heads, MLP
16384) over 8 sequences of 1024 tokens, flash attention via scaled_dot_product_attention, no host reads, inputs
already on the GPU, the whole forward captured once in a CUDA graph and replayed each step (eager on the CPU).
Tensor-core GEMMs dominate; nothing here is a defect."""
from __future__ import annotations

import torch
import torch.nn.functional as F

import harness

CPU_SKIP = None
SIZES = {"full": dict(batch=8, seq=1024, dim=4096, heads=32, blocks=2),
         "tiny": dict(batch=2, seq=8, dim=16, heads=2, blocks=1)}


class Block(torch.nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
        self.up, self.down = torch.nn.Linear(dim, 4 * dim), torch.nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        x = x + self.proj(F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.ln2(x)), approximate="tanh"))


def build(variant: str, tiny: bool, dev: torch.device):
    s = SIZES["tiny" if tiny else "full"]
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[Block(s["dim"], s["heads"]) for _ in range(s["blocks"])]).to(dev, torch.bfloat16)
    model.eval()
    x = torch.randn(s["batch"], s["seq"], s["dim"], device=dev, dtype=torch.bfloat16)
    if dev.type != "cuda":
        @torch.inference_mode()
        def eager() -> torch.Tensor:
            return model(x)
        return eager
    with torch.inference_mode():
        side = torch.cuda.Stream(dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            for _ in range(2):
                model(x)
        torch.cuda.current_stream(dev).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = model(x)

    def step() -> torch.Tensor:
        graph.replay()
        return out

    return step


def main(argv: list[str] | None = None) -> None:
    args = harness.parse(argv, ("control",), steps=15)
    dev = harness.device(args.tiny)
    harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "holdout_control_compiled")


if __name__ == "__main__":
    main()
