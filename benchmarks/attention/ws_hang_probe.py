"""Does a warp-specialised attention loop finish on this GPU? One case per process, so a hung launch
can be killed by ``timeout`` without taking the next case with it.

``python benchmarks/attention/ws_hang_probe.py CASE`` prints ``CASE ok <ms per call> max|err| <e>``
or never returns. Cases:
  tiny-ws / tiny-plain: a minimal one-loop flash forward (2-D descriptors, no mask, S multiple of
      the blocks), written for this probe, with and without ``warp_specialize=True``;
  flash-ws / flash-flat: kernels/attention/flash.py's _attn_fwd_ws with and without the
      specialisation; suffix -causal for the masked loop.
Shape: B=4, H=16, S=4096, D=128, fp16.
"""
from __future__ import annotations

import math
import sys
import time

import torch
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor


@triton.jit
def _tiny(desc_q, desc_k, desc_v, out_ptr, seq, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
          BLOCK_N: tl.constexpr, WS: tl.constexpr):
    start_m = tl.program_id(0)
    row_q = tl.program_id(1) * seq + start_m * BLOCK_M
    row_k = tl.program_id(1) * seq
    q = desc_q.load([row_q, 0])
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    for start_n in tl.range(0, seq, BLOCK_N, warp_specialize=WS):
        qk = tl.dot(q, desc_k.load([row_k + start_n, 0]).T)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(tl.float16), desc_v.load([row_k + start_n, 0]), acc * alpha[:, None])
        m_i = m_ij
    rows = row_q + tl.arange(0, BLOCK_M)
    tl.store(out_ptr + rows[:, None].to(tl.int64) * HEAD_DIM + tl.arange(0, HEAD_DIM)[None, :],
             (acc / l_i[:, None]).to(tl.float16))


def main() -> int:
    case = sys.argv[1]
    b, h, s, d = 4, 16, 4096, 128
    causal = case.endswith("-causal")
    gen = torch.Generator(device="cuda").manual_seed(0)
    q, k, v = (torch.randn((b, h, s, d), generator=gen, device="cuda", dtype=torch.float16) for _ in range(3))
    scale = 1.4426950408889634 / math.sqrt(d)
    if case.startswith("tiny"):
        out = torch.empty_like(q)
        descs = [TensorDescriptor(t.view(-1, d), [b * h * s, d], [d, 1], [rows, d]) for t, rows in ((q, 128), (k, 64), (v, 64))]

        def call():
            _tiny[(s // 128, b * h)](*descs, out, s, scale, HEAD_DIM=d, BLOCK_M=128, BLOCK_N=64,
                                     WS=case.startswith("tiny-ws"), num_warps=4, num_stages=2)
            return out
    else:
        from kernelscope.kernels.attention.flash import FlashConfig, _flash_ws

        def call():
            return _flash_ws(q, k, v, causal, scale, FlashConfig(128, 64, 4, 2, True),
                             warp_spec=case.startswith("flash-ws"))
    o = call()
    torch.cuda.synchronize()
    ref = torch.nn.functional.scaled_dot_product_attention(q[:1].float(), k[:1].float(), v[:1].float(), is_causal=causal)
    err = float((o[:1].float() - ref).abs().max())
    t = time.perf_counter()
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    print(f"{case} ok {(time.perf_counter() - t) / 5 * 1e3:.3f} ms per call (wall, incl. launch) max|err| {err:.3g}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
