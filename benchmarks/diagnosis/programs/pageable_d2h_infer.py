"""pageable-copies, inference, device to host: each step runs a bf16 projection over 4 chunks of inputs and
brings every 32 MB FP32 result back with .cpu() into fresh pageable memory, the GPU idle during each copy.
Fixed: results copied into preallocated pinned buffers with non_blocking=True on a side stream, each chunk's
copy overlapping the next chunk's compute; one wait at the end of the step."""
from __future__ import annotations

import torch

import harness

CPU_SKIP = "the fix needs pinned memory and a CUDA side stream"
SIZES = {"full": dict(chunks=4, rows=2048, cols=4096, hidden=4096), "tiny": dict(chunks=2, rows=4, cols=8, hidden=8)}


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


if __name__ == "__main__":
    main()
