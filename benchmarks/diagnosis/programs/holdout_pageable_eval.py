"""pageable-copies, evaluation (holdout): each step copies one 64 MB fp16 batch (32768 x 1024) held in ordinary
pageable host memory to the GPU with .cuda()-style .to(device) and evaluates a 4-block bf16 MLP on it, the copy
running at pageable speed and serialised with the compute. Fixed: the evaluation set held in pinned memory and
the next batch copied with non_blocking=True on a side stream while the current one is evaluated."""
from __future__ import annotations

import torch

import harness

CPU_SKIP = "the fix needs pinned memory and a CUDA side stream"
SIZES = {"full": dict(rows=32768, cols=1024, hidden=4096, blocks=4, classes=1000, pool=4),
         "tiny": dict(rows=8, cols=16, hidden=32, blocks=2, classes=5, pool=3)}


def build(variant: str, tiny: bool, dev: torch.device):
    s = SIZES["tiny" if tiny else "full"]
    torch.manual_seed(0)
    dataset = [torch.randn(s["rows"], s["cols"]).half() for _ in range(s["pool"])]  # pageable host memory
    if variant == "fixed":
        dataset = [b.pin_memory() for b in dataset]
    layers: list[torch.nn.Module] = []
    for _ in range(s["blocks"]):
        layers += [torch.nn.Linear(s["cols"], s["hidden"]), torch.nn.GELU(), torch.nn.Linear(s["hidden"], s["cols"])]
    model = torch.nn.Sequential(*layers, torch.nn.Linear(s["cols"], s["classes"])).to(dev, torch.bfloat16).eval()
    labels = torch.randint(0, s["classes"], (s["rows"],), device=dev)
    copy_stream = torch.cuda.Stream(dev) if variant == "fixed" else None
    state = {"i": 0, "next": None}

    def evaluate(x: torch.Tensor) -> torch.Tensor:
        logits = model(x.to(torch.bfloat16)).float()
        return torch.stack([(logits.argmax(-1) == labels).float().mean(), logits.logsumexp(-1).mean()])

    def prefetch(i: int) -> torch.Tensor:
        with torch.cuda.stream(copy_stream):
            return dataset[i % len(dataset)].to(dev, non_blocking=True)

    @torch.inference_mode()
    def step() -> torch.Tensor:
        i = state["i"]
        state["i"] += 1
        if variant == "defect":
            return evaluate(dataset[i % len(dataset)].to(dev))
        x = state["next"] if state["next"] is not None else prefetch(i)
        torch.cuda.current_stream(dev).wait_stream(copy_stream)
        x.record_stream(torch.cuda.current_stream(dev))
        state["next"] = prefetch(i + 1)  # overlaps the evaluation below
        return evaluate(x)

    return step


def main(argv: list[str] | None = None) -> None:
    args = harness.parse(argv, ("defect", "fixed"), steps=15)
    dev = harness.device(args.tiny)
    harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "holdout_pageable_eval")


if __name__ == "__main__":
    main()
