"""unfused-elementwise: chains of elementwise kernels, each reading and writing the whole tensor.

Each function is one program: its docstring says what it plants, and it returns the names the program
defines (build, main, SIZES, CPU_SKIP and its helpers). ``python run.py NAME --variant V`` runs one.
"""
from __future__ import annotations

import math

import torch
import triton
import triton.language as tl

import harness


def unfused_gelu_chain() -> dict:
    """unfused-elementwise, inference: a hand-written bias + tanh-GELU + scale + residual chain in FP32, eleven
    separate elementwise kernels over the same 256 MB tensors, each reading and writing them in full. Fixed: the
    same math in one Triton kernel (one read of each input, one write)."""
    CPU_SKIP = None
    SIZES = {"full": dict(rows=8192, cols=8192, repeats=4), "tiny": dict(rows=4, cols=64, repeats=2)}
    C = math.sqrt(2.0 / math.pi)

    def gelu_chain(x: torch.Tensor, bias: torch.Tensor, res: torch.Tensor, scale: float) -> torch.Tensor:
        h = x + bias
        cube = h * h * h
        inner = h + 0.044715 * cube
        inner = inner * C
        t = torch.tanh(inner)
        t = t + 1.0
        g = h * t
        g = g * 0.5
        g = g * scale
        return g + res

    @triton.jit
    def _gelu_chain_kernel(x_ptr, b_ptr, r_ptr, o_ptr, n, cols, scale, C: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(x_ptr + offs, mask=mask)
        b = tl.load(b_ptr + offs % cols, mask=mask)
        r = tl.load(r_ptr + offs, mask=mask)
        h = x + b
        inner = (h + 0.044715 * h * h * h) * C
        e = tl.exp(-2.0 * tl.abs(inner))  # tanh(|u|) = (1 - e^-2|u|) / (1 + e^-2|u|)
        t = (1.0 - e) / (1.0 + e)
        t = tl.where(inner < 0, -t, t)
        tl.store(o_ptr + offs, h * (t + 1.0) * 0.5 * scale + r, mask=mask)

    def gelu_chain_fused(x: torch.Tensor, bias: torch.Tensor, res: torch.Tensor, scale: float) -> torch.Tensor:
        out = torch.empty_like(x)
        n = x.numel()
        block = 1024
        _gelu_chain_kernel[(triton.cdiv(n, block),)](x, bias, res, out, n, x.shape[-1], scale, C=C, BLOCK=block)
        return out

    def build(variant: str, tiny: bool, dev: torch.device):
        s = SIZES["tiny" if tiny else "full"]
        torch.manual_seed(0)
        x = torch.randn(s["rows"], s["cols"], device=dev)
        bias = torch.randn(s["cols"], device=dev)
        res = torch.randn(s["rows"], s["cols"], device=dev)
        fn = gelu_chain if variant == "defect" else gelu_chain_fused

        def step() -> torch.Tensor:
            y = x
            for _ in range(s["repeats"]):
                y = fn(y, bias, res, 0.5)
            return y

        return step

    def main(argv: list[str] | None = None) -> None:
        args = harness.parse(argv, ("defect", "fixed"), steps=30)
        dev = harness.device(args.tiny)
        harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "unfused_gelu_chain")

    return locals()


def unfused_layernorm_chain() -> dict:
    """unfused-elementwise, training-style forward in bf16: a hand-written layer norm (mean, centre, square, mean,
    rsqrt, scale, shift) followed by SiLU and a residual add, twelve separate kernels (two of them reductions) over
    the same (16384, 4096) bf16 activations. Fixed: one Triton kernel per row doing the whole chain in registers."""
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

    return locals()


def holdout_unfused_adam() -> dict:
    """unfused-elementwise, training (holdout): a hand-written AdamW update (weight decay, both moments, bias
    correction, sqrt, eps, step) over four 64M-element FP32 parameters, written as 16 separate elementwise torch
    ops per tensor; each op streams 256 MB tensors through memory again. Fixed: the same update as one Triton
    kernel per tensor, reading param, grad and both moments once and writing param and moments once."""
    CPU_SKIP = None
    SIZES = {"full": dict(tensors=4, numel=64 * 1024 * 1024), "tiny": dict(tensors=2, numel=1000)}
    LR, B1, B2, EPS, WD = 1e-3, 0.9, 0.999, 1e-8, 0.01

    def adamw_unfused(p, g, m, v, t: int) -> None:
        g = g + WD * p
        m.mul_(B1)
        m.add_(g * (1 - B1))
        v.mul_(B2)
        v.add_(g * g * (1 - B2))
        m_hat = m / (1 - B1 ** t)
        v_hat = v / (1 - B2 ** t)
        denom = v_hat.sqrt()
        denom = denom + EPS
        update = LR * m_hat
        update = update / denom
        p.sub_(update)

    @triton.jit
    def _adamw_kernel(p_ptr, g_ptr, m_ptr, v_ptr, n, lr, b1, one_m_b1, b2, one_m_b2, bc1, bc2, eps, wd,
                      BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        p = tl.load(p_ptr + offs, mask=mask)
        g = tl.load(g_ptr + offs, mask=mask)
        m = tl.load(m_ptr + offs, mask=mask)
        v = tl.load(v_ptr + offs, mask=mask)
        g = g + wd * p
        m = m * b1 + g * one_m_b1
        v = v * b2 + g * g * one_m_b2
        denom = tl.sqrt_rn(v / bc2) + eps
        p = p - lr * (m / bc1) / denom
        tl.store(p_ptr + offs, p, mask=mask)
        tl.store(m_ptr + offs, m, mask=mask)
        tl.store(v_ptr + offs, v, mask=mask)

    def adamw_fused(p, g, m, v, t: int) -> None:
        n = p.numel()
        block = 1024
        _adamw_kernel[(triton.cdiv(n, block),)](p, g, m, v, n, LR, B1, 1 - B1, B2, 1 - B2, 1 - B1 ** t, 1 - B2 ** t,
                                                EPS, WD, BLOCK=block)

    def build(variant: str, tiny: bool, dev: torch.device):
        s = SIZES["tiny" if tiny else "full"]
        torch.manual_seed(0)
        params = [torch.randn(s["numel"], device=dev) for _ in range(s["tensors"])]
        grads = [torch.randn(s["numel"], device=dev) * 1e-2 for _ in range(s["tensors"])]  # stand-in gradients
        exp_avg = [torch.zeros_like(p) for p in params]
        exp_avg_sq = [torch.zeros_like(p) for p in params]
        update = adamw_unfused if variant == "defect" else adamw_fused
        state = {"t": 0}

        @torch.no_grad()
        def step() -> list[torch.Tensor]:
            state["t"] += 1
            for p, g, m, v in zip(params, grads, exp_avg, exp_avg_sq):
                update(p, g, m, v, state["t"])
            return params

        return step

    def main(argv: list[str] | None = None) -> None:
        args = harness.parse(argv, ("defect", "fixed"), steps=15)
        dev = harness.device(args.tiny)
        harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "holdout_unfused_adam")

    return locals()
