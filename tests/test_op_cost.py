"""FLOPs per operator from its recorded shapes (analyze/op_cost.py), checked against torch's FlopCounterMode on the
CPU: a small program runs once under FlopCounterMode and once under torch.profiler(record_shapes=True); the
formulas applied to the profiler's cpu_op events must agree within 1% on every op both count."""
from __future__ import annotations

import json
from collections import defaultdict

import pytest

from kernelscope.analyze.op_cost import op_cost
from kernelscope.model.operators import Operator

torch = pytest.importorskip("torch")
F = torch.nn.functional


def _program() -> None:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(4, 32, 64, generator=g)
    w = torch.randn(96, 64, generator=g)
    b = torch.randn(96, generator=g)
    torch.mm(x[0], w.t())
    torch.addmm(b, x[0], w.t())
    F.linear(x, w, b)
    torch.bmm(x, x.transpose(1, 2))
    torch.baddbmm(torch.zeros(4, 32, 32), x, x.transpose(1, 2))
    torch.matmul(x, x.transpose(1, 2))
    img = torch.randn(2, 3, 17, 19, generator=g)
    F.conv2d(img, torch.randn(8, 3, 3, 3, generator=g), stride=2, padding=1)
    F.conv2d(img, torch.randn(6, 1, 5, 3, generator=g), padding=(2, 0), dilation=(1, 2), groups=3)
    F.conv1d(torch.randn(2, 4, 33, generator=g), torch.randn(5, 4, 4, generator=g), stride=3)
    q, k, v = (torch.randn(2, 4, 48, 16, generator=g) for _ in range(3))
    F.scaled_dot_product_attention(q, k, v)
    F.scaled_dot_product_attention(q, torch.randn(2, 4, 40, 16, generator=g), torch.randn(2, 4, 40, 24, generator=g))


def _counted() -> dict[str, float]:
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as fc:
        _program()
    return {f"aten::{str(k).split('.')[-1]}": float(v) for k, v in fc.get_flop_counts()["Global"].items()}


def _ours(tmp_path) -> dict[str, float]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True) as prof:
        _program()
    prof.export_chrome_trace(str(tmp_path / "t.json"))
    events = json.loads((tmp_path / "t.json").read_text())["traceEvents"]
    out: dict[str, float] = defaultdict(float)
    for e in events:
        if e.get("cat") != "cpu_op":
            continue
        args = e.get("args", {})

        def tup(v):
            return tuple(tup(x) for x in v) if isinstance(v, list) else v
        op = Operator(e["name"], input_dims=tup(args.get("Input Dims", [])),
                      input_types=tuple(args.get("Input type", [])),
                      concrete_inputs=tuple(str(c) for c in args.get("Concrete Inputs", [])))
        cost = op_cost(op)
        if cost is not None and cost.flops:
            out[e["name"]] += cost.flops
    return out


def test_flops_agree_with_flop_counter_mode_on_every_op_both_count(tmp_path):
    counted, ours = _counted(), _ours(tmp_path)
    both = set(counted) & set(ours)
    assert {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm", "aten::convolution"} <= both
    for name in both:
        assert ours[name] == pytest.approx(counted[name], rel=0.01), name


def test_a_formula_needs_the_shapes_it_names():
    assert op_cost(Operator("aten::mm")) is None  # no shapes recorded
    assert op_cost(Operator("aten::mm", input_dims=((4, 8), (9, 3)), input_types=("float", "float"))) is None
    mm = op_cost(Operator("aten::mm", input_dims=((4, 8), (8, 3)), input_types=("c10::Half", "c10::Half")))
    assert mm.flops == 2 * 4 * 8 * 3 and mm.bytes == 2 * (32 + 24 + 12) and mm.formula.startswith("matmul")
    add = op_cost(Operator("aten::add", input_dims=((4, 1), (1, 5), ()), input_types=("float", "float", "Scalar")))
    assert add.flops == 20 and add.bytes == 4 * (4 + 5 + 20)


@pytest.mark.parametrize("name", ["aten::_scaled_dot_product_flash_attention", "aten::scaled_dot_product_attention",
                                  "aten::_scaled_dot_product_efficient_attention"])
def test_attention_flops_are_flop_counter_modes_sdpa_formula(name):
    """On the CPU scaled_dot_product_attention decomposes into matmuls before FlopCounterMode sees it: the GPU
    kernels' formula is checked against the one FlopCounterMode registers for them."""
    from torch.utils.flop_counter import sdpa_flop_count

    q, k, v = (2, 4, 48, 16), (2, 4, 40, 16), (2, 4, 40, 24)
    ours = op_cost(Operator(name, input_dims=(q, k, v), input_types=("c10::BFloat16",) * 3))
    assert ours.flops == pytest.approx(sdpa_flop_count(q, k, v), rel=0.01)
    flash = op_cost(Operator("aten::_flash_attention_forward", input_dims=tuple((s[0], s[2], s[1], s[3])
                                                                                  for s in (q, k, v))))
    assert flash.flops == ours.flops
