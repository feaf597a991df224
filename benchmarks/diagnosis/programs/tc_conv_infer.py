"""tensor-cores-unused, inference: an FP32 convolutional network run with cuDNN's TF32 switched off (and matmul
TF32 off), so the convolutions run on the FMA pipes. Fixed: the same network under torch.autocast(bfloat16) with
channels_last, so cuDNN picks tensor-core kernels."""
from __future__ import annotations

import torch

import harness

CPU_SKIP = None
SIZES = {"full": dict(batch=32, channels=256, hw=56, blocks=4), "tiny": dict(batch=2, channels=8, hw=8, blocks=2)}


def build(variant: str, tiny: bool, dev: torch.device):
    if variant == "defect":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    s = SIZES["tiny" if tiny else "full"]
    torch.manual_seed(0)
    c = s["channels"]
    layers: list[torch.nn.Module] = []
    for _ in range(s["blocks"]):
        layers += [torch.nn.Conv2d(c, c, 3, padding=1, bias=False), torch.nn.BatchNorm2d(c), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers, torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(c, 100))
    model = model.to(dev).eval()
    x = torch.randn(s["batch"], c, s["hw"], s["hw"], device=dev)
    if variant == "fixed":
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)

    @torch.inference_mode()
    def step() -> torch.Tensor:
        if variant == "fixed":
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                return model(x).float()
        return model(x)

    return step


def main(argv: list[str] | None = None) -> None:
    args = harness.parse(argv, ("defect", "fixed"), steps=30)
    dev = harness.device(args.tiny)
    harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "tc_conv_infer")


if __name__ == "__main__":
    main()
