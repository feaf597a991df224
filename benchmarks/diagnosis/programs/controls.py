"""Controls: tuned programs on which no rule should find more than 20%.

Each function is one program: its docstring says what it plants, and it returns the names the program
defines (build, main, SIZES, CPU_SKIP and its helpers). ``python run.py NAME --variant V`` runs one.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

import harness
import launch_bound


def control_bf16_train() -> dict:
    """control, training: a bf16 MLP (three 8192 x 8192 layers, batch 8192) trained with plain SGD, every matmul a
    large tensor-core GEMM; nothing else of note runs. No finding should exceed 20%."""
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

    return locals()


def control_graphed_decode() -> dict:
    """control, inference: greedy decoding of 16 tokens a step for a batch of 64 with a 4096-wide bf16 model
    (launch_decode_loop's model: 8 blocks, 32000-token head), the whole 16-token loop captured in one CUDA graph and
    replayed: back-to-back weight-streaming matmuls at memory speed, no launch gaps, no syncs. No finding should
    exceed 20%."""
    TinyLM = launch_bound.launch_decode_loop()["TinyLM"]
    CPU_SKIP = "a CUDA graph"
    SIZES = {"full": dict(vocab=32000, dim=4096, blocks=8, tokens=16, batch=64),
             "tiny": dict(vocab=16, dim=8, blocks=2, tokens=4, batch=2)}

    def build(variant: str, tiny: bool, dev: torch.device):
        s = SIZES["tiny" if tiny else "full"]
        torch.manual_seed(0)
        model = TinyLM(s["vocab"], s["dim"], s["blocks"]).to(dev, torch.bfloat16).eval()
        tok = torch.zeros(s["batch"], dtype=torch.long, device=dev)
        state = torch.zeros(s["batch"], s["dim"], device=dev, dtype=torch.bfloat16)
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
        args = harness.parse(argv, ("control",), steps=40)
        dev = harness.device(args.tiny)
        harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "control_graphed_decode")

    return locals()


def holdout_control_compiled() -> dict:
    """control (holdout): a tuned bf16 inference loop: a 2-block pre-norm transformer (width 4096, 32 heads, MLP
    16384) over 8 sequences of 1024 tokens, flash attention via scaled_dot_product_attention, no host reads, inputs
    already on the GPU, the whole forward captured once in a CUDA graph and replayed each step (eager on the CPU).
    Tensor-core GEMMs dominate; nothing here is a defect."""
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

    return locals()
