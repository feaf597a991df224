"""launch-bound: many tiny kernels, so the GPU waits on the host's launches.

Each function is one program: its docstring says what it plants, and it returns the names the program
defines (build, main, SIZES, CPU_SKIP and its helpers). ``python run.py NAME --variant V`` runs one.
"""
from __future__ import annotations

import torch

import harness


def launch_param_loop() -> dict:
    """launch-bound, training: a hand-written SGD-with-momentum update over 1000 small parameter tensors (64 x 64
    FP32), three tiny kernels per tensor in a Python loop, 3000 launches a step, each a few microseconds of GPU work.
    Fixed: the parameters, gradients and momentum buffers are views into three flat buffers, and the same update is
    two ops over the flat buffers."""
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

    return locals()


def launch_decode_loop() -> dict:
    """launch-bound, inference: greedy decoding of 64 tokens a step with a small bf16 model (batch 1, width 512,
    4 blocks), every token a few dozen tiny kernels launched from Python, the GPU idle between them. Fixed: the whole
    64-token decode captured once in a CUDA graph (torch.cuda.graph) and replayed each step."""
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

    return locals()


def holdout_launch_small_mlp() -> dict:
    """launch-bound, inference (holdout): a scoring service runs a tiny FP32 3-layer MLP (32 -> 64 -> 64 -> 10,
    softmax) on each of the 64 requests of a batch in a Python loop, four batches a step: about 1,500 kernels of a
    few microseconds each, so the GPU mostly waits for the next launch. Fixed: the same MLP called once on each
    (64, 32) batch."""
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

    return locals()
