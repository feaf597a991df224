"""tensor-cores-unused: FP32 matmul work on the FMA pipes while the tensor cores sit idle.

Each function is one program: its docstring says what it plants, and it returns the names the program
defines (build, main, SIZES, CPU_SKIP and its helpers). ``python run.py NAME --variant V`` runs one.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

import harness


def tc_mlp_train() -> dict:
    """tensor-cores-unused, training: an FP32 MLP trained with TF32 switched off, so every matmul runs on the FMA
    pipes. Fixed: TF32 on (torch.set_float32_matmul_precision("high")), the same FP32 model and data."""
    CPU_SKIP = None
    SIZES = {"full": dict(batch=4096, hidden=4096, layers=3), "tiny": dict(batch=16, hidden=32, layers=3)}

    def build(variant: str, tiny: bool, dev: torch.device):
        if variant == "defect":
            torch.backends.cuda.matmul.allow_tf32 = False
            torch.backends.cudnn.allow_tf32 = False
            torch.set_float32_matmul_precision("highest")
        else:
            torch.set_float32_matmul_precision("high")
            torch.backends.cudnn.allow_tf32 = True
        s = SIZES["tiny" if tiny else "full"]
        torch.manual_seed(0)
        layers: list[torch.nn.Module] = []
        for _ in range(s["layers"]):
            layers += [torch.nn.Linear(s["hidden"], s["hidden"]), torch.nn.ReLU()]
        model = torch.nn.Sequential(*layers, torch.nn.Linear(s["hidden"], 10)).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3, momentum=0.9)
        x = torch.randn(s["batch"], s["hidden"], device=dev)
        y = torch.randint(0, 10, (s["batch"],), device=dev)

        def step() -> torch.Tensor:
            loss = torch.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return loss.detach()

        return step

    def main(argv: list[str] | None = None) -> None:
        args = harness.parse(argv, ("defect", "fixed"), steps=30)
        dev = harness.device(args.tiny)
        harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "tc_mlp_train")

    return locals()


def tc_conv_infer() -> dict:
    """tensor-cores-unused, inference: an FP32 convolutional network run with cuDNN's TF32 switched off (and matmul
    TF32 off), so the convolutions run on the FMA pipes. Fixed: the same network under torch.autocast(bfloat16) with
    channels_last, so cuDNN picks tensor-core kernels."""
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

    return locals()


def holdout_tf32_attention() -> dict:
    """tensor-cores-unused, inference (holdout): a 4-layer FP32 attention stack written by hand (q/k/v/out
    projections, q @ k.transpose(-2, -1) * scale, softmax, @ v) over 8 sequences of 1024 tokens, width 2048, 16
    heads, with TF32 explicitly off (torch.backends.cuda.matmul.allow_tf32 = False): every matmul runs on the FP32
    FMA pipes. Fixed: the same model under bf16 autocast with F.scaled_dot_product_attention (tensor cores, flash
    attention)."""
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

    return locals()
