"""The Gluon W4A16 kernel (kernels/marlin/gluon_kernel.py) without a GPU: it compiles for sm_90 with and without
shared (stream-K) tiles, and the SASS shows what the kernel is built for: no local memory, the words of a block as
two TMA copies read word by word from shared memory, each MMA waited for before the next block, no serialisation
reported by ptxas; the stream-K split (gluon_host.py) covers every unit once, with enough partial slots.
Correctness against the reference is tests/gpu/test_w4a16_gluon_gpu.py's (there is no Gluon interpreter)."""
from __future__ import annotations

import os
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
from kernelscope.kernels.marlin import gluon_kernel as g
bm, stages, partials, per_channel, regs, sync, pdl, record, cluster = (int(x) for x in sys.argv[1:10])
bn = g.BLOCK_N.value
wl = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=32, rank=2)
al = gl.NVMMASharedLayout.get_default_for([bm, 128], gl.float16)
sl = gl.NVMMASharedLayout(swizzle_byte_width=0, element_bitwidth=16, rank=1)
sig = {"w_desc": f"tensordesc<i32[16, {bn}],{wl!r}>", "a_desc": f"tensordesc<fp16[{bm}, 128],{al!r}>",
       "s_desc": f"tensordesc<fp16[{bn}],{sl!r}>", "c_ptr": "*fp16", "s_ptr": "*fp16", "part_ptr": "*fp32",
       "count_ptr": "*i32", "M": "i32", "N": "i32", "KB": "i32", "U": "i32", "P": "i32", "SLOTS": "i32",
       "rec_ptr": "*i64"}
consts = {"GROUP_BLOCKS": 1, "PER_CHANNEL": bool(per_channel), "PARTIALS": bool(partials), "STAGES": stages,
          "BLOCK_M": bm, "SYNC_MMA": bool(sync), "PDL": bool(pdl), "RECORD": bool(record), "CLUSTER": cluster,
          "num_warps": 4}
sig.update({k: "constexpr" for k in consts})
k = triton.compile(GluonASTSource(fn=g._w4a16_gluon, signature=sig, constexprs=consts),
                   target=GPUTarget("cuda", 90, 128), options={"num_warps": 4, "maxnreg": regs})
bin_dir = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
with tempfile.TemporaryDirectory() as d:
    ptx, cubin = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
    open(ptx, "w").write(k.asm["ptx"])
    info = subprocess.run([os.path.join(bin_dir, "ptxas"), "-arch=sm_90a", "-v", ptx, "-o", cubin],
                          capture_output=True, text=True, check=True)
    print(info.stdout + info.stderr)
    print("\n".join(line for line in k.asm["ptx"].splitlines() if "reqntid" in line or ".b8 _w4a16_gluon_p" in line))
    open(cubin, "wb").write(k.asm["cubin"])
    print(subprocess.run([os.path.join(bin_dir, "nvdisasm"), "-c", cubin], capture_output=True, text=True,
                         check=True).stdout)
"""

# (BLOCK_M, stages, tiles shared by programs, one scale per column, registers at launch, mma.sync,
# programmatic dependent launch, block records, cluster size)
VARIANTS = {"m1-whole-tiles": (8, 4, 0, 0, 96, 0, 0, 0, 1),
            "m16-stream-k-per-column": (16, 4, 1, 1, 96, 0, 0, 0, 1),
            "m1-stream-k-st6-r80": (8, 6, 1, 0, 80, 0, 0, 0, 1),
            "m1-stream-k": (8, 4, 1, 0, 96, 0, 0, 0, 1),
            "m16-whole-tiles": (16, 4, 0, 0, 96, 0, 0, 0, 1),
            "m16-stream-k-r64": (16, 4, 1, 0, 64, 0, 0, 0, 1),
            "sync-m1-whole-tiles-st6": (8, 6, 0, 0, 96, 1, 0, 0, 1),
            "sync-m1-stream-k-per-column-r80": (8, 4, 1, 1, 80, 1, 0, 0, 1),
            "pdl-m16-stream-k": (16, 4, 1, 0, 96, 0, 1, 0, 1),
            "sync-pdl-m1-whole-tiles-r64": (8, 4, 0, 0, 64, 1, 1, 0, 1),
            "record-m1-stream-k": (8, 4, 1, 0, 96, 0, 0, 1, 1),
            "sync-m1-cluster4": (8, 4, 1, 0, 96, 1, 0, 0, 4),
            "pdl-m16-cluster3-r80": (16, 6, 1, 0, 80, 0, 1, 0, 3),
            # 17-64 tokens, the tuner's 128 registers (gluon_wide_launches)
            "m64-stream-k-r128": (64, 4, 1, 0, 128, 0, 0, 0, 1),
            "pdl-m32-stream-k-per-column-r128": (32, 4, 1, 1, 128, 0, 1, 0, 1)}


# The default run compiles one variant of each feature (per-column scales, stream-k, a sync, PDL, block records,
# a cluster); the slow step compiles every variant (each is a compile of its own, seconds long).
DEFAULT_VARIANTS = ("m16-stream-k-per-column", "pdl-m16-stream-k", "record-m1-stream-k", "sync-m1-cluster4")


@pytest.fixture(scope="module", params=[v if v in DEFAULT_VARIANTS else pytest.param(v, marks=pytest.mark.slow)
                                        for v in VARIANTS], ids=list(VARIANTS))
def compiled(request):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT / "src")
    r = subprocess.run([sys.executable, "-c", COMPILE, *map(str, VARIANTS[request.param])], capture_output=True,
                       text=True, env=env, timeout=HANG_S)
    assert r.returncode == 0, r.stderr[-2000:]
    return request.param, r.stdout.splitlines()


def test_no_local_memory_and_no_serialised_mma(compiled):
    _, out = compiled
    assert any("0 bytes spill stores, 0 bytes spill loads" in line for line in out)
    assert not any("serialized" in line for line in out), [line for line in out if "serialized" in line]
    assert not any(op in line for line in out for op in ("STL", "LDL"))


def test_words_come_in_two_tma_halves_read_word_by_word(compiled):
    """A block's (word, column) tile is two TMA copies of 128-byte-swizzled (16, 32) halves, read word by word (no
    LDS.128); no shuffles unpack (either MMA)."""
    name, out = compiled
    assert not any("LDS.128" in line for line in out)
    # two halves each: the words, the activations; PDL issues the first blocks' copies in a loop of their own;
    # a producer warpgroup (clusters) issues the two halves from two warps, one instruction each
    halves = 1 if "cluster" in name else 2
    assert sum("UTMALDG.2D" in line for line in out) == halves * (4 if "pdl" in name else 2)
    # the split-k counter's broadcast at most, and a producer warpgroup's (clusters) warp index, once a copy loop
    # (PDL adds one: the first blocks' copies)
    cluster = "cluster" in name
    assert sum("SHFL" in line for line in out) <= 1 + cluster + (cluster and "pdl" in name)
    # 8 warps: the producer warp's partition padded to a warpgroup (two programs an SM at 96 registers, four at 64)
    assert any(".reqntid 256" in line for line in out)


def test_each_mma_is_waited_for_before_the_next_block(compiled):
    """The warpgroup MMA: one wait a block, for all its MMAs. mma.sync: eight m16n8k16 MMAs a block in four chains
    of two (each nibble slice its own sum), and no warpgroup MMA at all."""
    name, out = compiled
    mmas = [line for line in out if "HMMA.16816.F32" in line]
    if "sync" in name:
        assert not any("HGMMA" in line or "WARPGROUP" in line for line in out)
        assert len(mmas) == 8
        zero = [line for line in mmas if line.rstrip(" ;").endswith("RZ")]
        assert len(zero) == 4  # four sums start from zero: the chains are independent
        return
    waits = [line for line in out if "WARPGROUP.DEPBAR" in line]
    assert waits and all("gsb0, 0x0" in w for w in waits), waits


def test_programmatic_dependent_launch_waits_for_the_launch_before(compiled):
    """With PDL the kernel waits for the launch before it (griddepcontrol.wait, SASS ACQBULK) and lets the next one
    start (launch_dependents, PREEXIT) only after a wait; without, neither instruction is there."""
    name, out = compiled
    sass = [line for line in out if "/*" in line]
    waits = [i for i, line in enumerate(sass) if "ACQBULK" in line]
    triggers = [i for i, line in enumerate(sass) if "PREEXIT" in line]
    if "pdl" not in name:
        assert not waits and not triggers
        return
    assert len(waits) >= 2  # the producer's, before the first activations, and the consumer's
    assert triggers and min(triggers) > min(waits)


@pytest.mark.parametrize("k,n,programs", [(4096, 4096, 132), (3584, 18944, 264), (5120, 13824, 216),
                                          (1920, 768, 7), (1920, 768, 24), (512, 64, 4), (13824, 5120, 396),
                                          (256, 128, 4)])
def test_stream_k_split_covers_every_unit_once(k, n, programs):
    """_segment's shares, inverted as _finish inverts them: every unit in exactly one program, each shared tile's
    programs first..last found from the tile alone, and within the slots work_split allocates."""
    from kernelscope.kernels.marlin.gluon_host import work_split

    kb, units, partials, slots = work_split(k, n, programs)
    seen = [0] * units
    by_tile: dict[int, list[int]] = {}
    for pid in range(programs):
        start, end = pid * units // programs, (pid + 1) * units // programs
        assert end > start
        for u in range(start, end):
            seen[u] += 1
            if pid not in by_tile.setdefault(u // kb, []):
                by_tile[u // kb].append(pid)
    assert seen == [1] * units
    shared = any(len(p) > 1 or (p[0] * units // programs) % kb or ((p[0] + 1) * units // programs) % kb
                 for p in by_tile.values())
    assert partials or not shared  # whole tiles only where the kernel compiles the partial sums out
    for t, pids in by_tile.items():
        first, last = ((t * kb + 1) * programs - 1) // units, ((t * kb + kb) * programs - 1) // units
        assert pids == list(range(first, last + 1))
        assert len(pids) <= slots or not partials


def test_token_tile_is_the_next_power_of_two_from_8():
    from kernelscope.kernels.marlin.gluon_host import MAX_M, block_m_for

    assert [block_m_for(m) for m in (1, 8, 9, 16, 17, 32, 33, 40, MAX_M)] == [8, 8, 16, 16, 32, 32, 64, 64, 64]


def test_supported_says_why_not_in_one_sentence():
    from kernelscope.kernels.marlin.gluon_host import supported
    from kernelscope.kernels.marlin.gluon_kernel import gluon_w4a16

    a = torch.zeros(1, 256, dtype=torch.float16)
    assert "sm_90" in supported(a, 256)
    with pytest.raises(ValueError, match="^gluon_w4a16: the Gluon W4A16 kernel is written for sm_90"):
        gluon_w4a16(a, torch.zeros((32, 256), dtype=torch.int32), torch.zeros((2, 256), dtype=torch.float16),
                    128, 256)


def test_bad_arguments_say_why_in_one_sentence():
    from kernelscope.kernels.marlin.gluon_host import check_args

    k, n = 512, 256
    a = torch.zeros(3, k, dtype=torch.float16)
    bk = torch.zeros((k // 8, n), dtype=torch.int32)
    s = torch.zeros((k // 128, n), dtype=torch.float16)
    assert check_args(a, bk, s, 128, n, 2, 4, None) == 128
    assert check_args(a, bk, s[:1], -1, n, 16, 2, torch.zeros(3, n, dtype=torch.float16)) == k
    cases = [((a[:, :200], bk, s, 128, n, 1, 4, None), "multiple of 128"),
             ((a, bk, s, 128, n, 17, 4, None), "programs must be between 1 and the 16"),
             ((a, bk, s, 128, n, 0, 4, None), "programs must be between"),
             ((a, bk, s, 128, n, 1, 1, None), "stages must be at least 2"),
             ((a, bk.t(), s, 128, n, 1, 4, None), "words must be int32"),
             ((a, bk.float(), s, 128, n, 1, 4, None), "words must be int32"),
             ((a, bk, s.float(), 128, n, 1, 4, None), "s must be a contiguous float16"),
             ((a, bk, s, 128, n, 1, 4, torch.zeros(n, 3, dtype=torch.float16)), "out must be")]
    for args, why in cases:
        with pytest.raises(ValueError, match=f"^gluon_w4a16: .*{why}.*\\.$"):
            check_args(*args)


def test_block_records_are_compiled_in_only_when_asked(compiled):
    """records=...: the consumer reads %globaltimer at its start and end and %smid once; without records neither
    register is read, so the recorded kernel is the shipped one plus its stores."""
    name, out = compiled
    sass = [line for line in out if "/*" in line]
    timer = [line for line in sass if "SR_GLOBALTIMER" in line]
    smid = [line for line in sass if "SMID" in line]  # %smid is SR_VIRTUALSMID in SASS
    if "record" not in name:
        assert not timer and not smid
        return
    assert len(timer) >= 2 and smid


def test_the_tma_descriptors_are_prefetched_by_their_parameter_names(compiled):
    """_prefetch_descriptors names the descriptors by their PTX parameters (0, 5 and 10): they must be the three
    128-byte parameters, and the SASS must prefetch three descriptors (UTMACCTL.PF)."""
    _, out = compiled
    descriptors = [line.split()[-1].rstrip(",") for line in out if ".b8 _w4a16_gluon_param" in line]
    assert descriptors == ["_w4a16_gluon_param_0[128]", "_w4a16_gluon_param_5[128]", "_w4a16_gluon_param_10[128]"]
    assert sum("UTMACCTL.PF" in line for line in out) == 3


def test_clusters_sum_through_distributed_shared_memory(compiled):
    """cluster=S: every thread of both partitions arrives on the cluster barrier (the producer's partition is then a
    full warpgroup: still 256 threads), the partners' partials go out as asynchronous remote stores (STAS) that
    count on program 0's mbarrier, and the sum needs no memory fence; without clusters none of it is compiled in."""
    name, out = compiled
    sass = [line for line in out if "/*" in line]
    assert any(".reqntid 256" in line for line in out)
    arrive = sum("UCGABAR_ARV" in line for line in sass)
    wait = sum("UCGABAR_WAIT" in line for line in sass)
    stas = sum(" STAS " in line for line in sass)
    if "cluster" not in name:
        assert arrive == wait == stas == 0
        return
    assert (arrive, wait) == (2, 1)
    assert stas == VARIANTS[name][0] * 64 // 128  # each consumer thread's share of the (64, BLOCK_M) tile
    assert not any("MEMBAR" in line for line in sass)


def test_cluster_arguments_say_why_in_one_sentence():
    from kernelscope.kernels.marlin.gluon_host import check_cluster

    check_cluster(1, 5, 12, 15)
    check_cluster(3, 36, 12, 15)
    for args, why in [((9, 12 * 9, 12, 18), "cluster must be between 1 and 8"),
                      ((0, 12, 12, 15), "cluster must be between"),
                      ((3, 35, 12, 15), "needs programs = 12 tiles x 3"),
                      ((2, 24, 12, 15), "divisible by 2")]:
        with pytest.raises(ValueError, match=f"^gluon_w4a16: .*{why}.*\\.$"):
            check_cluster(*args)
