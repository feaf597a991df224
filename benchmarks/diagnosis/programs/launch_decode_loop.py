"""launch-bound, inference: greedy decoding of 64 tokens a step with a small bf16 model (batch 1, width 512,
4 blocks), every token a few dozen tiny kernels launched from Python, the GPU idle between them. Fixed: the whole
64-token decode captured once in a CUDA graph (torch.cuda.graph) and replayed each step."""
from __future__ import annotations

import torch

import harness

CPU_SKIP = "the fix is a CUDA graph"
SIZES = {"full": dict(vocab=1000, dim=512, blocks=4, tokens=64), "tiny": dict(vocab=16, dim=8, blocks=2, tokens=4)}


class TinyLM(torch.nn.Module):
    def __init__(self, vocab: int, dim: int, blocks: int) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(vocab, dim)
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.LayerNorm(dim), torch.nn.Linear(dim, 2 * dim), torch.nn.GELU(),
                                torch.nn.Linear(2 * dim, dim)) for _ in range(blocks))
        self.head = torch.nn.Linear(dim, vocab)

    def decode(self, tok: torch.Tensor, state: torch.Tensor, n: int) -> torch.Tensor:
        out = []
        for _ in range(n):
            x = self.emb(tok) + state
            for blk in self.blocks:
                x = x + blk(x)
            state = 0.5 * state + 0.5 * x
            tok = self.head(x).argmax(dim=-1)
            out.append(tok)
        return torch.stack(out, dim=1)


def build(variant: str, tiny: bool, dev: torch.device):
    s = SIZES["tiny" if tiny else "full"]
    torch.manual_seed(0)
    model = TinyLM(s["vocab"], s["dim"], s["blocks"]).to(dev, torch.bfloat16).eval()
    tok = torch.zeros(1, dtype=torch.long, device=dev)
    state = torch.zeros(1, s["dim"], device=dev, dtype=torch.bfloat16)
    if variant == "defect":
        @torch.inference_mode()
        def step() -> torch.Tensor:
            return model.decode(tok, state, s["tokens"])
        return step
    with torch.inference_mode():
        side = torch.cuda.Stream(dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            for _ in range(2):
                model.decode(tok, state, s["tokens"])
        torch.cuda.current_stream(dev).wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = model.decode(tok, state, s["tokens"])

    def step() -> torch.Tensor:
        graph.replay()
        return out

    return step


def main(argv: list[str] | None = None) -> None:
    args = harness.parse(argv, ("defect", "fixed"), steps=30)
    dev = harness.device(args.tiny)
    harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "launch_decode_loop")


if __name__ == "__main__":
    main()
