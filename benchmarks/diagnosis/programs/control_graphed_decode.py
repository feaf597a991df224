"""control, inference: greedy decoding of 16 tokens a step for a batch of 64 with a 4096-wide bf16 model
(launch_decode_loop's model: 8 blocks, 32000-token head), the whole 16-token loop captured in one CUDA graph and
replayed: back-to-back weight-streaming matmuls at memory speed, no launch gaps, no syncs. No finding should
exceed 20%."""
from __future__ import annotations

import torch

import harness
from launch_decode_loop import TinyLM

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


if __name__ == "__main__":
    main()
