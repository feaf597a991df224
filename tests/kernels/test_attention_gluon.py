"""The Gluon attention kernel (kernels/attention/gluon_hopper.py) without a GPU: its default launch compiles for
sm_90; in the key loop the next block's QK^T and the previous block's PV warpgroup MMAs are issued back to back,
then S is waited for with the PV MMA still outstanding; local memory stays at the few spills the causal mask costs.
Correctness against the reference is tests/gpu/test_attention_gpu.py's (there is no Gluon interpreter)."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from conftest import HANG_S, ROOT

torch = pytest.importorskip("torch")
pytest.importorskip("triton.experimental.gluon")

COMPILE = r"""
import os, subprocess, sys, tempfile
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from kernelscope.kernels.attention import gluon_hopper as g
c = g.GluonConfig()
bm, bn, d, causal = c.block_m, c.block_n, int(sys.argv[1]), sys.argv[2] == "1"
ql = gl.NVMMASharedLayout.get_default_for([bm, d], gl.float16)
kl = gl.NVMMASharedLayout.get_default_for([bn, d], gl.float16)
sig = {"q_desc": f"tensordesc<fp16[{bm}, {d}],{ql!r}>", "k_desc": f"tensordesc<fp16[{bn}, {d}],{kl!r}>",
       "v_desc": f"tensordesc<fp16[{bn}, {d}],{kl!r}>", "o_desc": f"tensordesc<fp16[{bm}, {d}],{ql!r}>",
       "seq": "i32", "qk_scale": "fp32"}
consts = {"HEAD_DIM": d, "BLOCK_M": bm, "BLOCK_N": bn, "CAUSAL": causal, "STAGES": c.stages, "num_warps": c.num_warps}
sig.update({k: "constexpr" for k in consts})
k = triton.compile(GluonASTSource(fn=g._attn_fwd_gluon, signature=sig, constexprs=consts),
                   target=GPUTarget("cuda", 90, 128), options={"num_warps": c.num_warps})
nvdisasm = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
    f.write(k.asm["cubin"]); f.flush()
    print(subprocess.run([nvdisasm, "-c", f.name], capture_output=True, text=True, check=True).stdout)
"""


@pytest.fixture(scope="module", params=[(128, False), (128, True), pytest.param((64, False), marks=pytest.mark.slow)],
                ids=["d128", "d128-causal", "d64"])
def sass(request):
    d, causal = request.param
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT / "src")
    r = subprocess.run([sys.executable, "-c", COMPILE, str(d), "1" if causal else "0"], capture_output=True,
                       text=True, env=env, timeout=HANG_S)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout.splitlines()


def test_local_memory_only_for_the_causal_mask(sass, request):
    spills = sum(op in line for line in sass for op in ("STL", "LDL"))
    if "causal" in request.node.callspec.id:
        assert spills <= 8  # 3 stores and 4 loads at head dim 128 (Triton 3.6); timed with them (docs/decisions/0003)
    else:
        assert spills == 0


def test_qk_and_pv_mmas_are_issued_together_and_s_waited_alone(sass):
    waits = [i for i, line in enumerate(sass) if "WARPGROUP.DEPBAR" in line]
    one_left = [i for i in waits if "gsb0, 0x1" in sass[i]]
    assert one_left, "no wait that leaves the PV MMA running"
    i = one_left[0]
    before = [line for line in sass[max(w for w in waits if w < i) + 1:i] if "HGMMA" in line]
    # Q K^T reads both operands from shared memory; P V takes P from registers ("HGMMA... Rd, Ra, gdesc")
    kinds = ["PV" if re.search(r"HGMMA\S* R\d+, R\d+,", line) else "S" for line in before]
    assert "S" in kinds and "PV" in kinds and kinds.index("PV") > kinds.index("S"), kinds


def test_supported_says_why_not_in_one_sentence():
    from kernelscope.kernels.attention.flash import gluon_runs
    from kernelscope.kernels.attention.gluon_hopper import supported

    q = torch.zeros(1, 2, 128, 128, dtype=torch.float16)
    assert "sm_90" in supported(q, q, q)
    assert not gluon_runs(q, q, q)  # CPU tensors: flash.py's kernel (or the interpreter)


WS_COMPILE = r"""
import os, subprocess, sys, tempfile
import triton
from triton.backends.compiler import GPUTarget
from triton.experimental.gluon import language as gl
from triton.experimental.gluon._runtime import GluonASTSource
from kernelscope.kernels.attention import gluon_hopper as g
d, bn, causal = 128, 128, sys.argv[1] == "1"
ql = gl.NVMMASharedLayout.get_default_for([64, d], gl.float16)
kl = gl.NVMMASharedLayout.get_default_for([bn, d], gl.float16)
sig = {"q_desc": f"tensordesc<fp16[64, {d}],{ql!r}>", "k_desc": f"tensordesc<fp16[{bn}, {d}],{kl!r}>",
       "v_desc": f"tensordesc<fp16[{bn}, {d}],{kl!r}>", "o_desc": f"tensordesc<fp16[64, {d}],{ql!r}>",
       "seq": "i32", "qk_scale": "fp32"}
consts = {"HEAD_DIM": d, "BLOCK_M": 128, "BLOCK_N": bn, "CAUSAL": causal, "STAGES": 2, "CONSUMER_REGS": 240,
          "num_warps": 4}
sig.update({k: "constexpr" for k in consts})
k = triton.compile(GluonASTSource(fn=g._attn_fwd_gluon_ws, signature=sig, constexprs=consts),
                   target=GPUTarget("cuda", 90, 128), options={"num_warps": 4, "maxnreg": 168})
print("WARPS", k.metadata.num_warps)
nvdisasm = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
    f.write(k.asm["cubin"]); f.flush()
    print(subprocess.run([nvdisasm, "-c", f.name], capture_output=True, text=True, check=True).stdout)
"""


@pytest.mark.parametrize("causal", [False, pytest.param(True, marks=pytest.mark.slow)], ids=["full", "causal"])
def test_warp_specialised_kernel_has_its_partitions(causal):
    """Two consumer warpgroups and a producer warp (12 warps once rounded to warpgroups), registers moved between
    them with setmaxnreg, nothing spilled."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT / "src")
    r = subprocess.run([sys.executable, "-c", WS_COMPILE, "1" if causal else "0"], capture_output=True, text=True,
                       env=env, timeout=HANG_S)
    assert r.returncode == 0, r.stderr[-2000:]
    sass = r.stdout.splitlines()
    assert "WARPS 12" in sass[0]
    assert any("USETMAXREG.TRY_ALLOC" in line for line in sass) and any("USETMAXREG.DEALLOC" in line for line in sass)
    assert sum("HGMMA" in line for line in sass) > 0
    assert not any(op in line for line in sass for op in ("STL", "LDL"))


def test_operands_are_row_views_with_the_kernels_blocks():
    import math

    from kernelscope.kernels.attention.gluon_hopper import LOG2_E, _operands

    q = torch.randn(2, 3, 256, 64, dtype=torch.bfloat16).transpose(1, 2).contiguous().transpose(1, 2)  # strided
    k, v = torch.randn(2, 3, 256, 64, dtype=torch.bfloat16), torch.randn(2, 3, 256, 64, dtype=torch.bfloat16)
    out, (qd, kd, vd, od), scale = _operands(q, k, v, None, 64, 128)
    assert out.shape == (2 * 3 * 256, 64) and out.data_ptr() not in (q.data_ptr(), k.data_ptr(), v.data_ptr())
    assert [qd.block_shape, kd.block_shape, vd.block_shape, od.block_shape] == [[64, 64], [128, 64], [128, 64],
                                                                                [64, 64]]
    assert torch.equal(qd.base, q.reshape(-1, 64)) and kd.base.data_ptr() == k.data_ptr()  # k was contiguous: a view
    assert scale == pytest.approx(LOG2_E / math.sqrt(64)) and _operands(q, k, v, 0.5, 64, 128)[2] == 0.5 * LOG2_E
