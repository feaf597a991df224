"""W4A16Linear swapped into a small model built here, on CPU (Triton interpreter), against fp16.

The tolerance is not a guessed constant: the same model with each weight replaced by its dequantized
int4 value (computed in fp32) isolates the quantization error, and the kernel's model must sit within
10 % of that error from the fp16 model, while matching the dequantized model to fp16 rounding.
"""
from __future__ import annotations

import copy
import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from kernelscope.kernels.marlin import W4A16Linear, dequantize, quantize, swap_linears  # noqa: E402

pytestmark = pytest.mark.skipif(os.environ.get("TRITON_INTERPRET") != "1", reason="needs the Triton interpreter")


def small_model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.GELU(), torch.nn.Linear(512, 256, bias=False))


def dequantized_copy(model: torch.nn.Module, groupsize: int) -> torch.nn.Module:
    """fp32 model whose weights are the int4 values the kernel multiplies by ((q - 8) * scale)."""
    out = copy.deepcopy(model).float()
    for layer in out:
        if isinstance(layer, torch.nn.Linear):
            q, scales = quantize(layer.weight.detach().half(), groupsize)
            layer.weight.data = dequantize(q, scales, groupsize).t().float()  # (k, n) -> nn.Linear's (n, k)
    return out


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


@pytest.mark.parametrize("groupsize", [128, -1])
def test_swapped_model_matches_fp16_within_the_quantization_error(groupsize):
    model = small_model()
    x = torch.randn(3, 5, 256)  # leading dims flattened: m = 15 tokens
    ref32 = model(x)
    ref16 = model.half()(x.half())
    deq = dequantized_copy(model.float(), groupsize)(x)
    quant = small_model()
    assert swap_linears(quant, groupsize) == 2 and isinstance(quant[0], W4A16Linear)
    got = quant(x.half())
    assert got.shape == (3, 5, 256) and got.dtype == torch.float16
    quant_err = rel(deq, ref32)  # what int4 costs, measured in fp32
    fp16_err = rel(ref16, ref32)  # what fp16 rounding costs the unquantized model
    assert 0 < fp16_err < 0.1 * quant_err  # so quantization dominates, and 10 % covers the fp16 part
    assert rel(got, deq) < 0.1 * quant_err  # the kernel computes the dequantized model
    assert rel(got, ref16) < 1.1 * quant_err


def test_from_linear_keeps_bias_and_checks_its_input():
    lin = torch.nn.Linear(128, 256)
    layer = W4A16Linear.from_linear(lin)
    assert layer.words.shape == (16, 256) and layer.scales.shape == (1, 256) and layer.bias.dtype == torch.float16
    assert "groupsize=128" in repr(layer)
    with pytest.raises(TypeError, match="takes an nn.Linear"):
        W4A16Linear.from_linear(torch.nn.GELU())


def test_compiles_without_graph_breaks():
    model = small_model()
    swap_linears(model)
    x = torch.randn(4, 256).half()
    eager = model(x)
    compiled = torch.compile(model, backend="eager", fullgraph=True)  # fullgraph: a graph break raises
    assert torch.equal(compiled(x), eager)
