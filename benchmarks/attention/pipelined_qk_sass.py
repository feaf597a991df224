"""Does Triton 3.6 leave an early-issued QK^T in flight across the softmax? A CPU-only check (no GPU needed).

    python3 benchmarks/attention/pipelined_qk_sass.py

Compiles, for sm_90, a minimal flash-attention forward loop two ways: plain (QK^T of a block, softmax, PV) and
software-pipelined (the next block's QK^T issued before this block's softmax, FlashAttention-3's in-warpgroup
overlap), and reports, for each group of QK^T warpgroup MMAs (HGMMA.64x64 here; PV is 64x128) in the SASS, how many
exp2 (MUFU.EX2, the softmax) are issued between the group's first MMA and the wait for it (WARPGROUP.DEPBAR).
None anywhere means the softmax never runs while a QK^T is in flight: the compiler issued the early QK^T after
the softmax and waited for it at once (NOTES.md v7).
"""
from __future__ import annotations

import os
import subprocess
import tempfile

import triton
import triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource


@triton.jit
def _loop(desc_q, desc_k, desc_v, desc_o, seq_q, seq_k, qk_scale, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr,
          BLOCK_N: tl.constexpr, PIPE: tl.constexpr):
    start_m = tl.program_id(0)
    off_bh = tl.program_id(1)
    q = desc_q.load([off_bh * seq_q + start_m * BLOCK_M, 0])
    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    base = off_bh * seq_k
    if PIPE:
        qk = tl.dot(q, desc_k.load([base, 0]).T)
    for start_n in tl.range(0, seq_k, BLOCK_N):
        if PIPE:  # the next block's scores first (the last trip recomputes the last block; unused)
            qk_next = tl.dot(q, desc_k.load([base + tl.minimum(start_n + BLOCK_N, seq_k - BLOCK_N), 0]).T)
        else:
            qk = tl.dot(q, desc_k.load([base + start_n, 0]).T)
        m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.math.exp2(qk * qk_scale - m_ij[:, None])
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = tl.dot(p.to(q.dtype), desc_v.load([base + start_n, 0]), acc * alpha[:, None])
        m_i = m_ij
        if PIPE:
            qk = qk_next
    desc_o.store([off_bh * seq_q + start_m * BLOCK_M, 0], (acc / l_i[:, None]).to(q.dtype))


def qk_overlap(sass: str) -> list[int]:
    """Per QK^T MMA group: exp2 instructions between its first MMA and the next wait."""
    out, start, ex2 = [], None, 0
    for line in sass.splitlines():
        if "HGMMA.64x64x16" in line and start is None:
            start, ex2 = line, 0
        elif start is not None and "MUFU.EX2" in line:
            ex2 += 1
        elif start is not None and "WARPGROUP.DEPBAR" in line:
            out.append(ex2)
            start = None
    return out


def sass_of(pipe: bool, block_n: int = 64) -> str:
    """The SASS of one compile for sm_90."""
    desc = "tensordesc<fp16[{}, 128]>"
    sig = {"desc_q": desc.format(128), "desc_k": desc.format(block_n), "desc_v": desc.format(block_n),
           "desc_o": desc.format(128), "seq_q": "i32", "seq_k": "i32", "qk_scale": "fp32",
           "HEAD_DIM": "constexpr", "BLOCK_M": "constexpr", "BLOCK_N": "constexpr", "PIPE": "constexpr"}
    src = ASTSource(fn=_loop, signature=sig,
                    constexprs={"HEAD_DIM": 128, "BLOCK_M": 128, "BLOCK_N": block_n, "PIPE": pipe})
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 128), options={"num_warps": 4, "num_stages": 2})
    nvdisasm = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        return subprocess.run([nvdisasm, "-c", f.name], capture_output=True, text=True, check=True).stdout


if __name__ == "__main__":
    print(f"triton {triton.__version__}, sm_90, BLOCK_M 128, BLOCK_N 64, head dim 128, 4 warps, 2 stages")
    for pipe in (False, True):
        groups = qk_overlap(sass_of(pipe))
        print(f"{'pipelined' if pipe else 'plain':>9}: {len(groups)} QK^T MMA groups; exp2 issued while one is in "
              f"flight: {groups}")
