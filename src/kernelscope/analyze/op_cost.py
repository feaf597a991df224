"""FLOPs and bytes of one operator call from its input shapes, each by a named formula.

The matmul, convolution and attention formulas count what ``torch.utils.flop_counter.FlopCounterMode`` counts
(2 FLOPs per multiply-add; tests/test_op_cost.py holds them to it); the elementwise, reduction, norm, softmax,
embedding and copy formulas are kernelscope's own (FlopCounterMode counts none of them). Bytes are the tensors an
op must read and write once: its tensor inputs and its output, at their dtypes' sizes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable

from kernelscope.model.operators import Operator, dtype_bytes


@dataclass(frozen=True)
class OpCost:
    flops: float | None  # per call; None where the formula counts no arithmetic it can name (a copy counts 0)
    bytes: float | None  # per call: inputs read once and the output written once
    formula: str  # the formula's name and what it computes


def _tensor(d: Any) -> bool:
    return isinstance(d, tuple) and all(isinstance(x, int) for x in d)


def _numel(d: tuple[int, ...]) -> int:
    return math.prod(d)


def _size(op: Operator, i: int) -> int | None:
    t = op.input_types[i] if i < len(op.input_types) else ""
    b = dtype_bytes(t)
    d = op.input_dims[i]
    return None if b is None or not _tensor(d) else b * _numel(d)


def _in_bytes(op: Operator) -> int | None:
    """The bytes of every tensor input (0-d and empty out= tensors count what they hold)."""
    sizes = [_size(op, i) for i, d in enumerate(op.input_dims) if _tensor(d) and d]
    return None if any(s is None for s in sizes) else sum(s for s in sizes if s is not None)


def _elt(op: Operator) -> int:
    for t in op.input_types:
        b = dtype_bytes(t)
        if b is not None:
            return b
    return 4


def _broadcast(op: Operator) -> tuple[int, ...] | None:
    shapes = [d for d in op.input_dims if _tensor(d) and d]
    if not shapes:
        return None
    n = max(len(s) for s in shapes)
    out = []
    for k in range(n):
        dims = {s[len(s) - n + k] for s in shapes if len(s) - n + k >= 0} - {1}
        if len(dims) > 1:
            return None
        out.append(dims.pop() if dims else 1)
    return tuple(out)


def _mm(op: Operator, a: int, b: int) -> OpCost | None:
    if len(op.input_dims) <= max(a, b) or not (_tensor(op.input_dims[a]) and _tensor(op.input_dims[b])):
        return None
    x, w = op.input_dims[a], op.input_dims[b]
    if len(x) < 2 or len(w) < 2 or x[-1] != w[-2]:
        return None
    batch = _numel(x[:-2])
    m, k, n = x[-2], x[-1], w[-1]
    ins = _in_bytes(op)
    out = batch * m * n * _elt(op)
    return OpCost(2.0 * batch * m * k * n, None if ins is None else float(ins + out),
                  "matmul: 2 x batch x M x K x N (inputs + M x N output)")


def _linear(op: Operator) -> OpCost | None:
    if len(op.input_dims) < 2 or not (_tensor(op.input_dims[0]) and _tensor(op.input_dims[1])):
        return None
    x, w = op.input_dims[0], op.input_dims[1]
    if not x or len(w) != 2 or x[-1] != w[1]:
        return None
    rows = _numel(x[:-1])
    ins = _in_bytes(op)
    return OpCost(2.0 * rows * w[1] * w[0], None if ins is None else float(ins + rows * w[0] * _elt(op)),
                  "linear: 2 x rows x in_features x out_features")


def _sdpa(op: Operator) -> OpCost | None:
    """q [B, H, Sq, D], k [B, H, Sk, D], v [B, H, Sk, Dv] (flash_attention_forward: [B, S, H, D])."""
    if len(op.input_dims) < 3 or not all(_tensor(d) and len(d) == 4 for d in op.input_dims[:3]):
        return None
    q, k, v = op.input_dims[:3]
    if op.name == "aten::_flash_attention_forward":  # [B, S, H, D]
        q, k, v = (q[0], q[2], q[1], q[3]), (k[0], k[2], k[1], k[3]), (v[0], v[2], v[1], v[3])
    b, h, sq, d = q
    sk, dv = k[2], v[3]
    ins = _in_bytes(op)
    out = b * h * sq * dv * _elt(op)
    return OpCost(2.0 * b * h * sq * sk * d + 2.0 * b * h * sq * sk * dv, None if ins is None else float(ins + out),
                  "attention: 2 x B x H x Sq x Sk x (D + Dv), the two matmuls, no mask skipped")


def _conv(op: Operator) -> OpCost | None:
    """input [N, C, *spatial], weight [O, C / groups, *kernel]; the output's size from the stride, padding and
    dilation the trace recorded as concrete inputs (convolution's argument order). Not recorded: None."""
    if len(op.input_dims) < 2 or len(op.concrete_inputs) < 9 or not all(map(_tensor, op.input_dims[:2])):
        return None
    x, w = op.input_dims[0], op.input_dims[1]
    stride, padding, dilation = (_ints(op.concrete_inputs[i]) for i in (3, 4, 5))
    transposed = op.concrete_inputs[6].strip().lower() == "true"
    if transposed or len(x) < 3 or len(w) != len(x) or not (len(stride) == len(padding) == len(dilation) == len(x) - 2):
        return None
    out = [(n + 2 * p - d * (k - 1) - 1) // s + 1 for n, k, s, p, d in zip(x[2:], w[2:], stride, padding, dilation)]
    flops = 2.0 * x[0] * _numel(w) * _numel(tuple(out))
    ins = _in_bytes(op)
    wr = x[0] * w[0] * _numel(tuple(out)) * _elt(op)
    return OpCost(flops, None if ins is None else float(ins + wr),
                  "convolution: 2 x N x weight elements x output positions")


def _ints(text: str) -> list[int]:
    """"[1, 1]" -> [1, 1]."""
    return [int(t) for t in text.strip("[] ").split(",") if t.strip()]


def _pointwise(flops_per_element: float, name: str) -> Callable[[Operator], OpCost | None]:
    def cost(op: Operator) -> OpCost | None:
        shape = _broadcast(op)
        if shape is None:
            return None
        ins = _in_bytes(op)
        n = _numel(shape)
        out = n * _elt(op)  # in place too: the result is written over the first input
        return OpCost(flops_per_element * n, None if ins is None else float(ins + out),
                      f"{name}: {flops_per_element:g} x output elements")
    return cost


def _reduction(op: Operator) -> OpCost | None:
    if not op.input_dims or not _tensor(op.input_dims[0]):
        return None
    n = _numel(op.input_dims[0])
    ins = _size(op, 0)
    return OpCost(float(n), None if ins is None else float(ins), "reduction: 1 x input elements (output not counted)")


def _norm(flops_per_element: float, name: str) -> Callable[[Operator], OpCost | None]:
    def cost(op: Operator) -> OpCost | None:
        if not op.input_dims or not _tensor(op.input_dims[0]):
            return None
        n = _numel(op.input_dims[0])
        ins = _in_bytes(op)
        return OpCost(flops_per_element * n, None if ins is None else float(ins + n * _elt(op)),
                      f"{name}: {flops_per_element:g} x input elements, read once and written once")
    return cost


def _copy(op: Operator) -> OpCost | None:
    if not op.input_dims or not _tensor(op.input_dims[0]):
        return None
    src = op.input_dims[1] if op.name == "aten::copy_" and len(op.input_dims) > 1 else op.input_dims[0]
    if not _tensor(src):
        return None
    i = 1 if src is not op.input_dims[0] else 0
    rd = _size(op, i)
    wr = _size(op, 0) if i == 1 else rd
    return OpCost(0.0, None if rd is None or wr is None else float(rd + wr), "copy: no arithmetic, read + write")


def _embedding(op: Operator) -> OpCost | None:
    if len(op.input_dims) < 2 or not (_tensor(op.input_dims[0]) and _tensor(op.input_dims[1])):
        return None
    w, idx = op.input_dims[0], op.input_dims[1]
    rows = _numel(idx) * w[-1] * (dtype_bytes(op.input_types[0]) or 4)
    return OpCost(0.0, float(rows * 2 + (_size(op, 1) or 0)), "embedding: no arithmetic, gathered rows read + written")


FORMULAS: dict[str, Callable[[Operator], OpCost | None]] = {
    "aten::mm": lambda op: _mm(op, 0, 1), "aten::bmm": lambda op: _mm(op, 0, 1),
    "aten::matmul": lambda op: _mm(op, 0, 1), "aten::addmm": lambda op: _mm(op, 1, 2),
    "aten::baddbmm": lambda op: _mm(op, 1, 2), "aten::linear": _linear,
    "aten::_scaled_dot_product_flash_attention": _sdpa, "aten::_scaled_dot_product_efficient_attention": _sdpa,
    "aten::_scaled_dot_product_cudnn_attention": _sdpa, "aten::_flash_attention_forward": _sdpa,
    "aten::_efficient_attention_forward": _sdpa, "aten::scaled_dot_product_attention": _sdpa,
    "aten::convolution": _conv, "aten::_convolution": _conv, "aten::cudnn_convolution": _conv,
    "aten::_softmax": _norm(5, "softmax"), "aten::softmax": _norm(5, "softmax"),
    "aten::native_layer_norm": _norm(8, "layer norm"), "aten::layer_norm": _norm(8, "layer norm"),
    "aten::_fused_rms_norm": _norm(4, "RMS norm"), "aten::rms_norm": _norm(4, "RMS norm"),
    "aten::native_group_norm": _norm(8, "group norm"), "aten::native_batch_norm": _norm(8, "batch norm"),
    "aten::_batch_norm_impl_index": _norm(8, "batch norm"),
    "aten::sum": _reduction, "aten::mean": _reduction, "aten::max": _reduction, "aten::min": _reduction,
    "aten::amax": _reduction, "aten::argmax": _reduction, "aten::var": _reduction, "aten::norm": _reduction,
    "aten::copy_": _copy, "aten::clone": _copy, "aten::contiguous": _copy, "aten::_to_copy": _copy,
    "aten::embedding": _embedding, "aten::index_select": _embedding,
}
ELEMENTWISE = ("add", "sub", "mul", "div", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "pow", "tanh", "sigmoid",
               "relu", "gelu", "silu", "clamp", "clamp_min", "clamp_max", "where", "masked_fill", "maximum",
               "minimum", "gt", "lt", "ge", "le", "eq", "ne", "threshold", "reciprocal", "addcmul", "addcdiv",
               "lerp", "sin", "cos", "erf", "fill", "zero", "triu", "tril", "square")
for _name in ELEMENTWISE:
    for _form in (f"aten::{_name}", f"aten::{_name}_"):
        FORMULAS.setdefault(_form, _pointwise(1, "elementwise"))


def op_cost(op: Operator) -> OpCost | None:
    """FLOPs and bytes of one call of ``op`` by the formula of its name, or None (no formula for the op, or its
    inputs' shapes are not recorded or do not fit the formula)."""
    f = FORMULAS.get(op.name)
    if f is None or not op.input_dims:
        return None
    try:
        return f(op)
    except (TypeError, ValueError, IndexError):
        return None
