"""PyTorch attention the Triton kernel is checked and benchmarked against.

* :func:`reference_attention`: fp32 ground truth (inputs upcast, scores materialised).
* :func:`naive_attention`: the same recipe in the inputs' own precision, the way
  a plain PyTorch model writes it; the error yardstick of the kernel tests.
* :func:`sdpa_attention`: ``torch.nn.functional.scaled_dot_product_attention``
  pinned to one backend (flash, cudnn, efficient, math), so a benchmark row
  names the kernel that really ran; a backend that cannot take the inputs raises.

All share the kernel's conventions: ``(batch, heads, seq, head_dim)``, causal
masks aligned to the bottom-right corner, and query rows that see no key are 0.
"""
from __future__ import annotations

import math

import torch

SDPA_BACKENDS = ("flash", "cudnn", "efficient", "math")


def causal_mask(seq_q: int, seq_k: int, device: torch.device | str) -> torch.Tensor:
    """Boolean (seq_q, seq_k): True where query i may see key j (j <= i + seq_k - seq_q)."""
    i = torch.arange(seq_q, device=device)[:, None]
    j = torch.arange(seq_k, device=device)[None, :]
    return j <= i + (seq_k - seq_q)


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool, sm_scale: float | None) -> torch.Tensor:
    """Materialised-scores attention in q's dtype; rows that see no key give 0."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if sm_scale is None else sm_scale
    scores = torch.matmul(q, k.transpose(-2, -1)) * scale
    if causal:
        visible = causal_mask(q.shape[-2], k.shape[-2], q.device)
        scores = scores.masked_fill(~visible, float("-inf"))
    p = torch.softmax(scores, dim=-1)
    if causal and q.shape[-2] > k.shape[-2]:
        p = p.masked_fill(~visible.any(dim=-1, keepdim=True), 0.0)  # softmax of all -inf is NaN
    return torch.matmul(p, v)


def reference_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                        sm_scale: float | None = None) -> torch.Tensor:
    """fp32 attention of the (upcast) inputs; returns fp32."""
    return _attention(q.float(), k.float(), v.float(), causal, sm_scale)


def naive_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                    sm_scale: float | None = None) -> torch.Tensor:
    """Attention in the inputs' precision with the full score matrix in memory."""
    return _attention(q, k, v, causal, sm_scale)


def sdpa_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False,
                   sm_scale: float | None = None, backend: str = "flash") -> torch.Tensor:
    """PyTorch SDPA restricted to one backend; raises RuntimeError if it cannot run these inputs."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
                "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}
    if backend not in backends:
        raise ValueError(f"sdpa_attention: backend must be one of {', '.join(SDPA_BACKENDS)}, got {backend!r}.")
    if causal and q.shape[-2] != k.shape[-2]:
        # SDPA's is_causal is top-left aligned; these conventions agree only for equal lengths.
        raise ValueError("sdpa_attention: causal attention needs seq_q == seq_k here "
                         f"(got {q.shape[-2]} and {k.shape[-2]}).")
    with sdpa_kernel(backends[backend]):
        return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=sm_scale)
