"""unfused-elementwise, training-style forward in bf16: a hand-written layer norm (mean, centre, square, mean,
rsqrt, scale, shift) followed by SiLU and a residual add, twelve separate kernels (two of them reductions) over
the same (16384, 4096) bf16 activations. Fixed: one Triton kernel per row doing the whole chain in registers."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

import harness

CPU_SKIP = None
SIZES = {"full": dict(rows=16384, cols=4096, repeats=4), "tiny": dict(rows=4, cols=32, repeats=2)}
EPS = 1e-5


def norm_silu_chain(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    mean = x.mean(dim=-1, keepdim=True)
    xc = x - mean
    var = (xc * xc).mean(dim=-1, keepdim=True)
    rstd = torch.rsqrt(var + EPS)
    h = xc * rstd
    h = h * w
    h = h + b
    s = torch.sigmoid(h)
    h = h * s
    return h + x


@triton.jit
def _norm_silu_kernel(x_ptr, w_ptr, b_ptr, o_ptr, cols, eps, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < cols
    x = tl.load(x_ptr + row * cols + offs, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / cols
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / cols
    h = xc / tl.sqrt(var + eps)
    w = tl.load(w_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    b = tl.load(b_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    h = h * w + b
    h = h / (1.0 + tl.exp(-h))
    tl.store(o_ptr + row * cols + offs, (h + x).to(o_ptr.dtype.element_ty), mask=mask)


def norm_silu_fused(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    rows, cols = x.shape
    _norm_silu_kernel[(rows,)](x, w, b, out, cols, EPS, BLOCK=triton.next_power_of_2(cols))
    return out


def build(variant: str, tiny: bool, dev: torch.device):
    s = SIZES["tiny" if tiny else "full"]
    torch.manual_seed(0)
    x = torch.randn(s["rows"], s["cols"], device=dev).to(torch.bfloat16)
    w = (1.0 + 0.1 * torch.randn(s["cols"], device=dev)).to(torch.bfloat16)
    b = (0.1 * torch.randn(s["cols"], device=dev)).to(torch.bfloat16)
    fn = norm_silu_chain if variant == "defect" else norm_silu_fused

    def step() -> torch.Tensor:
        y = x
        for _ in range(s["repeats"]):
            y = fn(y, w, b)
        return y

    return step


def main(argv: list[str] | None = None) -> None:
    args = harness.parse(argv, ("defect", "fixed"), steps=30)
    dev = harness.device(args.tiny)
    harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "unfused_layernorm_chain")


if __name__ == "__main__":
    main()
