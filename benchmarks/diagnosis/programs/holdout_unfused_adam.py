"""unfused-elementwise, training (holdout): a hand-written AdamW update (weight decay, both moments, bias
correction, sqrt, eps, step) over four 64M-element FP32 parameters, written as 16 separate elementwise torch
ops per tensor; each op streams 256 MB tensors through memory again. Fixed: the same update as one Triton
kernel per tensor, reading param, grad and both moments once and writing param and moments once."""
from __future__ import annotations

import torch
import triton
import triton.language as tl

import harness

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


if __name__ == "__main__":
    main()
