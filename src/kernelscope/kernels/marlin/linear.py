"""``W4A16Linear``: an ``nn.Linear`` with 4-bit weights whose forward runs the W4A16 GEMM: the Triton kernel, or on
sm_90 at m <= 64 the Gluon decode kernel, as :func:`launch.decide_launch` picks (same weights).

``W4A16Linear.from_linear(linear, groupsize=128)`` quantizes the layer's weight as Marlin does
(:mod:`format`), packs it and converts it once into the kernel layout; ``forward`` flattens the
leading dimensions, calls ``torch.ops.kernelscope.w4a16_mm`` and adds the bias. The op is a
``torch.library`` custom op with a fake (shape-only) implementation, so ``torch.compile`` traces
through it without a graph break, and the kernel launch inside it does no host synchronisation
and allocates only its output and split-k partials through torch's allocator, so a forward can
be captured in a CUDA graph (the launch is chosen on the host per call: :func:`launch.decide_launch`;
nothing is tuned while capturing, so run one eager forward per batch size first to tune).
"""
from __future__ import annotations


import torch

from .format import pack, quantize
from .gemm import to_kernel_layout
from .launch import w4a16_matmul


@torch.library.custom_op("kernelscope::w4a16_mm", mutates_args=())
def w4a16_mm(a: torch.Tensor, words: torch.Tensor, scales: torch.Tensor, groupsize: int) -> torch.Tensor:
    """fp16 ``a (m, k) @ dequant(words, scales)`` -> fp16 ``(m, n)`` with the launch for this shape."""
    m, k = a.shape
    n = words.shape[1]
    if m == 0:
        return a.new_empty((0, n))
    return w4a16_matmul(a.contiguous(), words, scales, groupsize)  # the launch: launch.decide_launch


@w4a16_mm.register_fake
def _w4a16_mm_fake(a: torch.Tensor, words: torch.Tensor, scales: torch.Tensor, groupsize: int) -> torch.Tensor:
    return a.new_empty((a.shape[0], words.shape[1]))


class W4A16Linear(torch.nn.Module):
    """``y = x @ W^T + b`` with W held as 4-bit values and fp16 group scales (kernel layout buffers)."""

    def __init__(self, in_features: int, out_features: int, groupsize: int, words: torch.Tensor,
                 scales: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        self.in_features, self.out_features, self.groupsize = in_features, out_features, groupsize
        self.register_buffer("words", words)
        self.register_buffer("scales", scales)
        self.register_buffer("bias", bias)

    @classmethod
    def from_linear(cls, linear: torch.nn.Linear, groupsize: int = 128) -> "W4A16Linear":
        """Quantize ``linear``'s weight (one fp16 scale per ``groupsize`` inputs, or per column with -1)."""
        if not isinstance(linear, torch.nn.Linear):
            raise TypeError(f"W4A16Linear.from_linear takes an nn.Linear, got {type(linear).__name__}")
        w = linear.weight.detach().to(torch.float16)  # (out, in) = (n, k)
        q, scales = quantize(w, groupsize)
        B, s = pack(q, scales, groupsize)
        words, sk = to_kernel_layout(B, s, groupsize)
        bias = None if linear.bias is None else linear.bias.detach().to(torch.float16).clone()
        return cls(linear.in_features, linear.out_features, groupsize, words, sk, bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        a = x.reshape(-1, self.in_features).to(torch.float16)
        y = torch.ops.kernelscope.w4a16_mm(a, self.words, self.scales, self.groupsize)
        if self.bias is not None:
            y = y + self.bias
        return y.reshape(*lead, self.out_features).to(x.dtype)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, groupsize={self.groupsize}, "
                f"bias={self.bias is not None}")


def swap_linears(module: torch.nn.Module, groupsize: int = 128) -> int:
    """Replace every ``nn.Linear`` inside ``module`` (in place) by a W4A16Linear; returns how many."""
    count = 0
    for name, child in module.named_children():
        if isinstance(child, torch.nn.Linear):
            setattr(module, name, W4A16Linear.from_linear(child, groupsize))
            count += 1
        else:
            count += swap_linears(child, groupsize)
    return count
