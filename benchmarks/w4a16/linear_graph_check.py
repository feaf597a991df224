"""W4A16Linear on the GPU: eager, captured in a CUDA graph and replayed, and under torch.compile (fullgraph).

    PYTHONPATH=src python3 benchmarks/w4a16/linear_graph_check.py [--k 4096 --n 4096] [--m 1,16]

Prints one line per check with the relative error against the eager output and against fp16 nn.Linear, and the
launch the layer ran (a shape outside the shipped table is tuned on first use: on sm_90 it may be the Gluon kernel).
"""
from __future__ import annotations

import argparse

import torch

from kernelscope.kernels.marlin import W4A16Linear


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return ((a.float() - b.float()).norm() / b.float().norm()).item()


def main() -> None:
    from kernelscope.kernels.marlin.autotune import launch_for

    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--m", default="1,16", help="token counts")
    args = ap.parse_args()
    torch.manual_seed(0)
    lin = torch.nn.Linear(args.k, args.n, bias=True).half().cuda()
    layer = W4A16Linear.from_linear(lin)
    for m in (int(v) for v in args.m.split(",")):
        x = torch.randn(m, args.k, device="cuda").half()
        eager = layer(x)
        static_x = x.clone()
        graph = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            layer(static_x)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(graph):
            static_y = layer(static_x)
        static_x.copy_(x)
        graph.replay()
        torch.cuda.synchronize()
        compiled = torch.compile(layer, backend="eager", fullgraph=True)(x)
        print(f"m={m}: graph replay vs eager {rel(static_y, eager):.2e}, compiled vs eager {rel(compiled, eager):.2e}, "
              f"eager vs fp16 nn.Linear {rel(eager, lin(x)):.2e}; launch "
              f"{launch_for(m, args.k, args.n, 128, layer.words, layer.scales).launch}")


if __name__ == "__main__":
    main()
