"""pageable-copies: host<->device copies from or to pageable memory inside the loop.

Each function is one program: its docstring says what it plants, and it returns the names the program
defines (build, main, SIZES, CPU_SKIP and its helpers). ``python run.py NAME --variant V`` runs one.
"""
from __future__ import annotations

import torch

import harness


def pageable_h2d_train() -> dict:
    """pageable-copies, training: each step copies its input batches, 4 x 32 MB of FP32 features kept in ordinary
    (pageable) host memory, to the GPU with .to("cuda") and trains a small bf16 MLP on them; the copies serialise
    with compute and run at pageable speed. Fixed: the host batches pinned (pin_memory()), each copied with
    non_blocking=True on a side stream one micro-batch ahead, overlapping the compute of the previous one."""
    CPU_SKIP = "the fix needs pinned memory and a CUDA side stream"
    SIZES = {"full": dict(micro=4, rows=8192, cols=1024, hidden=1024, pool=8),
             "tiny": dict(micro=2, rows=8, cols=16, hidden=16, pool=3)}

    def build(variant: str, tiny: bool, dev: torch.device):
        s = SIZES["tiny" if tiny else "full"]
        torch.manual_seed(0)
        host = [torch.randn(s["rows"], s["cols"]) for _ in range(s["pool"])]  # the "dataset", in host memory
        if variant == "fixed":
            host = [t.pin_memory() for t in host]
        model = torch.nn.Sequential(torch.nn.Linear(s["cols"], s["hidden"]), torch.nn.GELU(),
                                    torch.nn.Linear(s["hidden"], 1)).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=1e-4)
        copy_stream = torch.cuda.Stream(dev) if variant == "fixed" else None
        state = {"i": 0}

        def next_host() -> torch.Tensor:
            t = host[state["i"] % len(host)]
            state["i"] += 1
            return t

        def train_on(x: torch.Tensor) -> torch.Tensor:
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                loss = model(x).float().pow(2).mean()
            loss.backward()
            return loss.detach()

        def prefetch() -> torch.Tensor:
            with torch.cuda.stream(copy_stream):
                return next_host().to(dev, non_blocking=True)

        def step() -> torch.Tensor:
            losses = []
            if variant == "defect":
                for _ in range(s["micro"]):
                    losses.append(train_on(next_host().to(dev)))
            else:
                ahead = prefetch()
                for k in range(s["micro"]):
                    torch.cuda.current_stream(dev).wait_stream(copy_stream)
                    x = ahead
                    x.record_stream(torch.cuda.current_stream(dev))
                    if k + 1 < s["micro"]:
                        ahead = prefetch()
                    losses.append(train_on(x))
            opt.step()
            opt.zero_grad(set_to_none=True)
            return torch.stack(losses)

        return step

    def main(argv: list[str] | None = None) -> None:
        args = harness.parse(argv, ("defect", "fixed"), steps=20)
        dev = harness.device(args.tiny)
        harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "pageable_h2d_train")

    return locals()


def pageable_d2h_infer() -> dict:
    """pageable-copies, inference, device to host: each step runs a bf16 projection over 4 chunks of inputs and
    brings every 32 MB FP32 result back with .cpu() into fresh pageable memory, the GPU idle during each copy.
    Fixed: results copied into preallocated pinned buffers with non_blocking=True on a side stream, each chunk's
    copy overlapping the next chunk's compute; one wait at the end of the step."""
    CPU_SKIP = "the fix needs pinned memory and a CUDA side stream"
    SIZES = {"full": dict(chunks=4, rows=2048, cols=4096, hidden=4096),
             "tiny": dict(chunks=2, rows=4, cols=8, hidden=8)}

    def build(variant: str, tiny: bool, dev: torch.device):
        s = SIZES["tiny" if tiny else "full"]
        torch.manual_seed(0)
        w1 = torch.randn(s["cols"], s["hidden"], device=dev, dtype=torch.bfloat16) / s["cols"] ** 0.5
        w2 = torch.randn(s["hidden"], s["cols"], device=dev, dtype=torch.bfloat16) / s["hidden"] ** 0.5
        xs = [torch.randn(s["rows"], s["cols"], device=dev, dtype=torch.bfloat16) for _ in range(s["chunks"])]
        pinned = [torch.empty(s["rows"], s["cols"], pin_memory=True) for _ in range(s["chunks"])] \
            if variant == "fixed" else []
        copy_stream = torch.cuda.Stream(dev) if variant == "fixed" else None

        def project(x: torch.Tensor) -> torch.Tensor:
            return (torch.relu(x @ w1) @ w2).float()

        def step() -> list[torch.Tensor]:
            if variant == "defect":
                return [project(x).cpu() for x in xs]
            main_stream = torch.cuda.current_stream(dev)
            for x, buf in zip(xs, pinned):
                y = project(x)
                copy_stream.wait_stream(main_stream)
                with torch.cuda.stream(copy_stream):
                    buf.copy_(y, non_blocking=True)
                y.record_stream(copy_stream)
            copy_stream.synchronize()
            return pinned

        return step

    def main(argv: list[str] | None = None) -> None:
        args = harness.parse(argv, ("defect", "fixed"), steps=20)
        dev = harness.device(args.tiny)
        harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "pageable_d2h_infer")

    return locals()


def holdout_pageable_eval() -> dict:
    """pageable-copies, evaluation (holdout): each step copies one 64 MB fp16 batch (32768 x 1024) held in ordinary
    pageable host memory to the GPU with .cuda()-style .to(device) and evaluates a 4-block bf16 MLP on it, the copy
    running at pageable speed and serialised with the compute. Fixed: the evaluation set held in pinned memory and
    the next batch copied with non_blocking=True on a side stream while the current one is evaluated."""
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
            layers += [torch.nn.Linear(s["cols"], s["hidden"]), torch.nn.GELU(),
                       torch.nn.Linear(s["hidden"], s["cols"])]
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

    return locals()
