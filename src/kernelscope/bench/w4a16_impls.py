"""The three implementations of the W4A16 benchmark, built once per layer shape from one quantized weight.

Each builder takes the :class:`Weights` of a shape and returns ``fn(a)``: fp16 ``A (m, k)`` -> ``C (m, n)``.
All three start from the same q and scales, so they compute the same product. torch is imported on use.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable


@dataclass
class Weights:
    """One layer's quantized weight, in every form an implementation starts from (all on one device)."""

    k: int
    n: int
    groupsize: int
    q: Any  # uint8 (k, n), 0..15
    scales: Any  # fp16 (scale_rows, n)
    B: Any  # Marlin int32 (k / 16, 2n)
    s: Any  # Marlin scales


def make_weights(k: int, n: int, groupsize: int, device: str, seed: int) -> Weights:
    """A weight ~ N(0, 1/k), quantized symmetrically (one fp16 scale per group) and packed as Marlin does."""
    import torch

    from kernelscope.kernels.marlin import pack, quantize

    gen = torch.Generator(device=device).manual_seed(seed)
    w = (torch.randn((n, k), generator=gen, device=device) / math.sqrt(k)).half()
    q, scales = quantize(w, groupsize)
    del w
    B, s = pack(q, scales, groupsize)
    return Weights(k, n, groupsize, q, scales, B, s)


Builder = Callable[[Weights], Callable[[Any], Any]]  # weights -> (fp16 A -> C), built once per shape


class W4A16Call:
    """``w4a16_matmul`` with the launch :func:`launch.decide_launch` picks per m: the rule, the shipped table of
    this GPU, else the first-use tuner (``tune=False``: the shipped table or the rule only). The launch runs the
    Triton kernel, or on sm_90 at m <= 64 the Gluon decode kernel where it was measured faster.
    ``pdl``: a Gluon launch runs as a programmatic dependent launch (back to back in the benchmark's graph, each
    call starts while the one before ends); a Triton launch then raises, and the row says why."""

    def __init__(self, wt: Weights, tune: bool | None = None, pdl: bool = False) -> None:
        from kernelscope.kernels.marlin import to_kernel_layout

        self.wt = wt
        self.tune = tune
        self.pdl = pdl
        self.bk, self.sk = to_kernel_layout(wt.B, wt.s, wt.groupsize)
        self._decided: dict[int, tuple[Any, str]] = {}

    def decision(self, m: int) -> Any:
        """(the LaunchConfig this point runs, where it came from); decided once per m."""
        from kernelscope.kernels.marlin.launch import decide_launch

        if m not in self._decided:
            decision = decide_launch(m, self.wt.k, self.wt.n, self.wt.groupsize, self.bk, self.sk, tune=self.tune)
            config = decision.config
            if self.pdl and config.kernel == "gluon":
                config = config.with_pdl()
            self._decided[m] = (config, decision.source)
        return self._decided[m]

    def launch_info(self, m: int) -> dict[str, Any]:
        config, source = self.decision(m)
        return {"launch": config.to_dict(), "launch_source": source}

    def __call__(self, a: Any) -> Any:
        from kernelscope.kernels.marlin import w4a16_matmul

        config = self.decision(a.shape[0])[0]
        if self.pdl and config.kernel != "gluon":
            raise ValueError("w4a16-pdl: this point's launch is the Triton kernel's, and only the Gluon kernel has "
                             "programmatic dependent launches.")
        return w4a16_matmul(a, self.bk, self.sk, self.wt.groupsize, config=config)


class W4A16GluonCall:
    """The Gluon decode kernel (kernels/marlin/gluon_kernel.py: sm_90, m <= 64) on the shared weights, with the
    first launch of :func:`tune_space.gluon_candidates`; elsewhere the call raises and the row says why."""

    def __init__(self, wt: Weights) -> None:
        from kernelscope.kernels.marlin import to_kernel_layout

        self.wt = wt
        self.bk, self.sk = to_kernel_layout(wt.B, wt.s, wt.groupsize)

    def config(self, m: int) -> Any:
        """The first of :func:`tune_space.gluon_candidates` for m tokens, or None where there is none."""
        import torch

        from kernelscope.kernels.marlin.tune_space import gluon_candidates

        sms = torch.cuda.get_device_properties(self.bk.device).multi_processor_count
        launches = gluon_candidates(m, self.wt.k, self.wt.n, sms)
        return launches[0] if launches else None

    def launch_info(self, m: int) -> dict[str, Any]:
        config = self.config(m)
        return {"launch": config.to_dict() if config else None,
                "launch_source": "rule (tune_space.gluon_candidates, the first)"}

    def __call__(self, a: Any) -> Any:
        from kernelscope.kernels.marlin import LaunchConfig, w4a16_matmul

        config = self.config(a.shape[0]) if a.is_cuda else None
        # without a launch (no GPU, m > 64, n not a multiple of 64) the Gluon kernel's checks say why not
        return w4a16_matmul(a, self.bk, self.sk, self.wt.groupsize, config=config or LaunchConfig.gluon())


def build_w4a16(wt: Weights) -> Callable[[Any], Any]:
    return W4A16Call(wt)


def build_w4a16_untuned(wt: Weights) -> Callable[[Any], Any]:
    """The launch a user got before first-use tuning: the shipped table for its shapes, else the rule."""
    return W4A16Call(wt, tune=False)


def build_w4a16_pdl(wt: Weights) -> Callable[[Any], Any]:
    """The shipped path's launch as a programmatic dependent launch (the Gluon kernel's only)."""
    return W4A16Call(wt, pdl=True)


def build_cublas(wt: Weights) -> Callable[[Any], Any]:
    """cuBLAS fp16: ``a @ w.T`` on the dequantized (n, k) fp16 weight, as nn.Linear stores it."""
    import torch

    from kernelscope.kernels.marlin.format import dequantize

    w = dequantize(wt.q, wt.scales, wt.groupsize).t().contiguous()  # (n, k)
    return lambda a: torch.matmul(a, w.T)


def build_tinygemm(wt: Weights, inner_k_tiles: int = 8) -> Callable[[Any], Any]:
    """torch's int4 tinygemm (bf16): the same q, scales as bf16 and zero points 0, so w = (q - 8) * scale.

    CUDA takes q packed two per byte (n, k/2), even k in the high nibble; older torch and the CPU op take
    int32 (n, k). Any signature mismatch raises, and the sweep records it as a failed row. The zero
    points are 0 because this quantization is symmetric; tinygemm's cost does not depend on their values.
    """
    import torch

    ops = torch.ops.aten
    q = wt.q.t().contiguous().to(torch.int32)  # (n, k)
    group = wt.k if wt.groupsize == -1 else wt.groupsize
    sz = torch.stack([wt.scales.float(), torch.zeros_like(wt.scales, dtype=torch.float32)], dim=-1)
    sz = sz.to(torch.bfloat16).contiguous()  # (scale_rows, n, 2)
    if q.device.type == "cpu":
        packed = ops._convert_weight_to_int4pack_for_cpu(q, inner_k_tiles)
        mm = ops._weight_int4pack_mm_for_cpu
    else:
        try:
            packed = ops._convert_weight_to_int4pack((q[:, ::2] << 4 | q[:, 1::2]).to(torch.uint8), inner_k_tiles)
        except RuntimeError:
            packed = ops._convert_weight_to_int4pack(q, inner_k_tiles)
        mm = ops._weight_int4pack_mm
    last: dict[str, Any] = {}

    def call(a: Any) -> Any:
        # A bf16 model holds bf16 activations: convert A once per input, outside the timed calls.
        if last.get("fp16") is not a:
            last["fp16"], last["bf16"] = a, a.to(torch.bfloat16)
        return mm(last["bf16"], packed, group, sz)
    return call


IMPLEMENTATIONS: dict[str, Builder] = {"w4a16": build_w4a16, "cublas": build_cublas, "tinygemm": build_tinygemm,
                                        "w4a16-untuned": build_w4a16_untuned, "w4a16-gluon": W4A16GluonCall,
                                        "w4a16-pdl": build_w4a16_pdl}
