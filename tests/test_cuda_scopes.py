"""kernelscope.cuh and its Python side without a GPU: the header's layout numbers against the reader's, the reader
on buffers built the way the header's code writes them (claims of SCOPES_CHUNK slots per warp, drops counted, never
written past the capacity), the sentences for bad buffers, CudaScopes on CPU tensors, attachment to a launch in a
session and the panels drawn from it, `kernelscope include-dir` and the header as package data. Where nvcc is on
PATH: the header compiles, a plain build is the same code as a kernel without the macros, and a host compiler can
include it. tests/gpu/test_cuda_scopes_gpu.py runs it on a GPU."""
from __future__ import annotations

import io
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass

import pytest

from conftest import HANG_S, ROOT
from kernelscope.collect.instrument import cuda_scopes as cs
from kernelscope.collect.instrument import scope_sink, sink
from kernelscope.collect.instrument.cuda_scopes import (
    CudaScopesError,
    NotInstrumentedError,
    read_cuda_blocks,
    read_scope_buffer,
)
from kernelscope.model import Launch, Session

HEADER = ROOT / "src" / "kernelscope" / "include" / "kernelscope.cuh"
NAMES = {0: "load", 1: "mma", 2: "store"}
T0 = 1_700_000_000_000_000_000  # a %globaltimer value (ns since the epoch on a real GPU)


# -- buffers as the header writes them ----------------------------------------------------------------------
@dataclass
class Rec:
    t: int
    block: int
    warp: int
    smid: int
    scope: int
    end: bool


def packed(r: Rec) -> int:
    """Bits as kernelscope.cuh packs them: block 0-31, warp 32-39, smid 40-51, scope 52-61, END bit 62."""
    return r.block | (r.warp << 32) | (r.smid << 40) | (r.scope << 52) | (int(r.end) << 62)


def kernel_writes(records: list[Rec], capacity: int, chunk: int = 8) -> list[int]:
    """The buffer after a launch, by the header's algorithm: the host wrote [capacity, 0, magic, 0]; each record
    (in the order the GPU made them) takes the next slot of its warp's claim, a new claim of ``chunk`` slots
    when that one is used up; a slot at or past the capacity is counted in value 3, never written."""
    buf = [capacity, 0, cs.SCOPES_MAGIC, 0] + [0] * (2 * capacity)
    claims: dict[tuple[int, int], list[int]] = {}
    for r in records:
        nxt, stop = claims.get((r.block, r.warp), [0, 0])
        if nxt == stop:
            nxt, stop = buf[1], buf[1] + chunk
            buf[1] += chunk
        slot, nxt = nxt, nxt + 1
        claims[(r.block, r.warp)] = [nxt, stop]
        if slot >= capacity:
            buf[3] += 1
            continue
        buf[4 + 2 * slot], buf[5 + 2 * slot] = r.t, packed(r)
    return buf


def phases(block: int, warp: int, start: int, lengths: list[tuple[int, int]], smid: int = 5) -> list[Rec]:
    """One warp's scopes one after another: (scope id, length ns) each, from ``start``."""
    out, t = [], start
    for scope, n in lengths:
        out += [Rec(t, block, warp, smid, scope, False), Rec(t + n, block, warp, smid, scope, True)]
        t += n
    return out


def launch_records() -> list[Rec]:
    """Two blocks of two warps, three phases each; block 1 starts 800 ns after block 0, on another SM; in
    time order across warps (the order the GPU makes them)."""
    recs = []
    for b in range(2):
        for w in range(2):
            recs += phases(b, w, T0 + 800 * b + 40 * w, [(0, 20_000), (1, 40_000 + 1000 * w), (2, 10_000)],
                           smid=3 + 4 * b)
    return sorted(recs, key=lambda r: r.t)


# -- the header and the reader agree ------------------------------------------------------------------------
def _defines() -> dict[str, int]:
    return {m[1]: int(m[2].rstrip("LlUu"), 0)
            for m in re.finditer(r"^#define (KS_\w+) (0x[0-9A-Fa-f]+L*|\d+)", HEADER.read_text(), re.M)}


def test_the_headers_layout_numbers_are_the_readers():
    d = _defines()
    assert d["KS_BLOCK_ROW_VALUES"] == 4  # collect/instrument/layout.py ROW_VALUES
    assert (d["KS_SCOPES_HEADER_VALUES"], d["KS_SCOPES_RECORD_VALUES"]) == (cs.HEADER_VALUES, cs.RECORD_VALUES)
    assert (d["KS_SCOPES_MAGIC"], d["KS_SCOPES_MAX_ID"], d["KS_SCOPES_CHUNK"]) == (
        cs.SCOPES_MAGIC, cs.MAX_SCOPE_ID, cs.SCOPES_CHUNK)
    text = HEADER.read_text()
    # the packing expression: each field's mask and shift as the reader unpacks it
    for mask, shift in (("0xFF", cs.WARP_FIELD), ("0xFFF", cs.SMID_FIELD)):
        assert f"& {mask}) << {shift[0]})" in text, (mask, shift)
        assert int(mask, 16) == shift[1]
    assert f"& KS_SCOPES_MAX_ID) << {cs.SCOPE_FIELD[0]})" in text and cs.SCOPE_FIELD[1] == d["KS_SCOPES_MAX_ID"]
    assert f"<< {cs.END_FIELD[0]})" in text and "& 0xFFFFFFFFULL)" in text and cs.BLOCK_FIELD == (0, 0xFFFFFFFF)
    assert "buf + 1" in text and "buf + 3" in text and "buf[0]" in text  # claimed, dropped, capacity
    assert cs.HDR_CLAIMED == 1 and cs.HDR_DROPPED == 3 and cs.HDR_CAPACITY == 0 and cs.HDR_MAGIC == 2


def test_the_header_has_no_include_and_guards_its_device_code():
    text = HEADER.read_text()
    assert not re.search(r"^\s*#\s*include", text, re.M)  # NVRTC: nothing to find
    assert "#if defined(KS_RECORD) && (defined(__CUDACC__) || defined(__CUDACC_RTC__))" in text


# -- the reader --------------------------------------------------------------------------------------------
def test_a_complete_buffer_reads_back_per_warp():
    s = read_scope_buffer(kernel_writes(launch_records(), capacity=32), NAMES)
    assert s.problems == [] and s.names == ["load", "mma", "store"] and s.clock == "globaltimer"
    assert s.source == "kernelscope.cuh" and s.time_unit == "ns"
    assert [(w.block_id, w.warp, w.smid) for w in s.warps] == [(0, 0, 3), (0, 1, 3), (1, 0, 7), (1, 1, 7)]
    w = s.warps[3]  # block 1 warp 1: from its block's first record (block 1 warp 0, 40 ns earlier)
    assert w.scope == [0, 1, 2] and w.start_ns == [40, 20_040, 61_040] and w.end_ns == [20_040, 61_040, 71_040]
    assert [x.block_offset_ns for x in s.warps] == [0, 0, 800, 800]


def test_bytes_numpy_and_lists_read_the_same():
    buf = kernel_writes(launch_records(), capacity=32)
    raw = b"".join(v.to_bytes(8, "little", signed=True) for v in buf)
    want = read_scope_buffer(buf, NAMES).to_dict()
    assert read_scope_buffer(raw, NAMES).to_dict() == want
    np = pytest.importorskip("numpy")
    assert read_scope_buffer(np.array(buf, dtype=np.int64), NAMES).to_dict() == want
    with pytest.raises(CudaScopesError, match="not whole int64"):
        read_scope_buffer(raw[:-3], NAMES)


def test_names_as_a_list_and_ids_without_a_name():
    s = read_scope_buffer(kernel_writes(launch_records(), capacity=32), ["load", "mma"])
    assert s.names == ["load", "mma", "scope 2"]
    assert any("scope id(s) 2 were recorded but given no name" in p for p in s.problems)


def test_sparse_scope_ids_map_onto_the_names_list():
    recs = phases(0, 0, T0, [(7, 100), (900, 200)])
    s = read_scope_buffer(kernel_writes(recs, capacity=8), {7: "load", 900: "epilogue"})
    assert s.names == ["load", "epilogue"] and s.warps[0].scope == [0, 1] and s.problems == []


def test_a_small_buffer_counts_the_dropped_records_and_keeps_what_fit():
    recs = launch_records()  # 4 warps x 6 records; room for one warp's claim of 8
    buf = kernel_writes(recs, capacity=8)
    assert len(buf) == 4 + 2 * 8 and buf[3] == 18  # the other three warps' records: counted, not written
    s = read_scope_buffer(buf, NAMES)
    assert len(s.warps) == 1 and len(s.warps[0].scope) == 3
    assert s.problems[0].startswith("the scope buffer was too small: 18 of 24 records were dropped")
    assert "allocate room for 32 or more" in s.problems[0]


def test_a_buffer_that_fills_mid_warp_names_the_scopes_left_open():
    recs = launch_records()
    buf = kernel_writes(recs, capacity=11)  # the second warp's claim holds slots 8-15: only 8-10 have room
    s = read_scope_buffer(buf, NAMES)
    assert any("records were dropped" in p for p in s.problems)
    unended = [p for p in s.problems if "began and never ended" in p]
    assert unended and all("their ends may be among the dropped records" in p for p in unended)


def test_scopes_that_never_end_are_named_and_left_out():
    recs = phases(0, 0, T0, [(0, 100), (1, 200)]) + [Rec(T0 + 300, 0, 0, 5, 2, False)]  # store begins, never ends
    recs += phases(0, 1, T0, [(0, 100)]) + [Rec(T0 + 100, 0, 1, 5, 2, False)]
    s = read_scope_buffer(kernel_writes(sorted(recs, key=lambda r: r.t), capacity=16), NAMES)
    assert ["2 'store' scope(s) began and never ended (block 0 warp 0, block 0 warp 1): left out, not drawn as "
            "complete"] == [p for p in s.problems if "never ended" in p]
    assert all(s.names[i] != "store" for w in s.warps for i in w.scope)


def test_an_end_without_a_begin_is_said_and_left_out():
    recs = phases(0, 0, T0, [(0, 100)]) + [Rec(T0 + 150, 0, 0, 5, 1, True)]
    s = read_scope_buffer(kernel_writes(recs, capacity=8), NAMES)
    assert any(p.startswith("1 'mma' scope(s) ended without a begin (block 0 warp 0)") for p in s.problems)
    assert s.warps[0].scope == [0]


def test_nested_scopes_pair_innermost_first():
    recs = [Rec(T0, 0, 0, 1, 0, False), Rec(T0 + 10, 0, 0, 1, 1, False), Rec(T0 + 20, 0, 0, 1, 1, True),
            Rec(T0 + 30, 0, 0, 1, 0, True)]
    w = read_scope_buffer(kernel_writes(recs, capacity=8), NAMES).warps[0]
    assert list(zip(w.scope, w.start_ns, w.end_ns)) == [(0, 0, 30), (1, 10, 20)]


def test_an_uninstrumented_buffer_says_what_was_not_recorded_and_how_to_enable_it():
    with pytest.raises(NotInstrumentedError) as e:
        read_scope_buffer([16, 0, cs.SCOPES_MAGIC, 0] + [0] * 32, NAMES)
    assert "no warp recorded a phase scope" in str(e.value) and "-DKS_RECORD" in str(e.value)
    with pytest.raises(NotInstrumentedError, match="no block wrote its record.*-DKS_RECORD"):
        read_cuda_blocks([0] * 16, (4, 1, 1))


@pytest.mark.parametrize("buf, match", [
    ([1, 2, 3], "starts with 4 header values"),
    ([4, 0, 12345, 0] + [0] * 8, "lacks kernelscope's mark"),
    ([9, 0, cs.SCOPES_MAGIC, 0] + [0] * 8, "holds 9 records but it has room for 4"),
    ([4, -8, cs.SCOPES_MAGIC, 0] + [0] * 8, "counters are negative"),
    (["a", "b"], "not a buffer of int64"),
])
def test_buffers_that_are_not_scope_buffers_are_refused_in_one_sentence(buf, match):
    with pytest.raises(CudaScopesError, match=match):
        read_scope_buffer(buf, NAMES)


def test_records_past_the_claimed_slots_are_said():
    buf = kernel_writes(phases(0, 0, T0, [(0, 100)]), capacity=16)
    buf[4 + 2 * 12], buf[5 + 2 * 12] = T0, packed(Rec(T0, 3, 0, 1, 0, False))  # slot 12: nobody claimed it
    s = read_scope_buffer(buf, NAMES)
    assert any(p.startswith("1 record(s) lie past the 8 slots the kernel claimed") for p in s.problems)
    assert [w.block_id for w in s.warps] == [0]


def test_a_warp_on_two_sms_is_said():
    recs = phases(0, 0, T0, [(0, 100)], smid=1) + phases(0, 0, T0 + 200, [(1, 100)], smid=2)
    s = read_scope_buffer(kernel_writes(recs, capacity=8), NAMES)
    assert any("1 warp(s) recorded more than one SM (block 0 warp 0)" in p for p in s.problems)


@pytest.mark.parametrize("names, match", [({-1: "x"}, "scope id -1"), ({1024: "x"}, "scope id 1024"),
                                          ({0: ""}, "needs a name"), ({True: "x"}, "scope id True")])
def test_scope_names_are_checked(names, match):
    with pytest.raises(CudaScopesError, match=match):
        cs.scope_names(names)


def test_capacity_rounds_each_warp_up_to_whole_claims():
    assert cs.scope_capacity((10, 1, 1), 128, 3) == 10 * 4 * 8  # 6 records a warp: one claim of 8
    assert cs.scope_capacity((2, 2, 1), (96, 1, 1), 5) == 4 * 3 * 16  # 10 records: two claims
    assert cs.scope_capacity(3, 33, 4) == 3 * 2 * 8  # 33 threads: two warps


def test_block_records_from_the_header_read_with_the_shared_reader():
    rows = []
    for b in range(4):
        rows += [b, 3 + b | (132 << 32), T0 + 10 * b, T0 + 1000 + b]
    r = read_cuda_blocks(rows, (4, 1, 1))
    assert r.source == "kernelscope.cuh" and r.block_id == [0, 1, 2, 3] and r.nsmid == 132 and r.problems == []


# -- the host helper on CPU tensors, the sinks and the session ----------------------------------------------
def _torch():
    return pytest.importorskip("torch")


def _fill(rec: cs.CudaScopes, recs: list[Rec], blocks: int) -> None:
    """Write what a launch would have written into the helper's (CPU) buffers."""
    torch = _torch()
    header = [int(v) for v in rec.scopes[:4].tolist()]
    assert header == [rec.capacity, 0, cs.SCOPES_MAGIC, 0]
    rec.scopes.copy_(torch.tensor(kernel_writes(recs, rec.capacity), dtype=torch.int64))
    rows = []
    for b in range(blocks):
        ts = [r.t for r in recs if r.block == b]
        rows += [b, 3 + 4 * b | (132 << 32), min(ts) - 100, max(ts) + 100]
    rec.blocks.copy_(torch.tensor(rows, dtype=torch.int64))


def test_the_helper_sizes_and_arms_the_buffers_and_reads_them_back():
    _torch()
    rec = cs.CudaScopes((2, 1, 1), NAMES, block=64, scopes_per_warp=3, device="cpu")
    assert rec.capacity == 2 * 2 * 8 and rec.scopes.numel() == 4 + 2 * 32 and rec.blocks.numel() == 2 * 4
    _fill(rec, launch_records(), 2)
    got = rec.read()
    assert got is not None and got.scopes.problems == [] and len(got.scopes.warps) == 4
    assert got.blocks is not None and got.blocks.block_id == [0, 1] and got.blocks.source == "kernelscope.cuh"


def test_the_helper_says_when_the_kernel_was_built_without_instrumentation():
    _torch()
    rec = cs.CudaScopes((2, 1, 1), NAMES, block=64, scopes_per_warp=3, device="cpu")
    with pytest.raises(NotInstrumentedError) as e:
        rec.read()
    assert str(e.value).startswith("the kernel wrote no block record and no phase scope (its buffers are as the host "
                                   "left them): it was built without KS_RECORD; compile it with -DKS_RECORD")
    rec = cs.CudaScopes((2, 1, 1), NAMES, block=64, scopes_per_warp=3, device="cpu", blocks=False)
    with pytest.raises(NotInstrumentedError, match="^the kernel wrote no phase scope"):
        rec.read()


def test_the_helper_names_a_buffer_the_kernel_did_not_reach():
    torch = _torch()
    rec = cs.CudaScopes((2, 1, 1), NAMES, block=64, scopes_per_warp=3, device="cpu")
    rec.blocks.copy_(torch.tensor([0, 1, T0, T0 + 5, 1, 1, T0, T0 + 5], dtype=torch.int64))
    with pytest.raises(CudaScopesError, match="block records but no phase scope: it never reached KS_SCOPE_BEGIN"):
        rec.read()
    rec = cs.CudaScopes((2, 1, 1), NAMES, block=64, scopes_per_warp=3, device="cpu")
    rec.scopes.copy_(torch.tensor(kernel_writes(launch_records(), rec.capacity), dtype=torch.int64))
    with pytest.raises(CudaScopesError, match="no block wrote its record: it never reached KS_BLOCK_END"):
        rec.read()


@pytest.mark.parametrize("kw, match", [({}, "give the scope buffer's capacity"), ({"capacity": 0}, "positive"),
                                        ({"capacity": 8, "array": "jax"}, "'torch' or 'cupy'")])
def test_the_helper_refuses_bad_arguments(kw, match):
    with pytest.raises(CudaScopesError, match=match):
        cs.CudaScopes((2, 1, 1), NAMES, device="cpu", **kw)


def test_disabled_helper_gives_placeholders_and_submits_nothing():
    _torch()
    rec = cs.CudaScopes((2, 1, 1), NAMES, block=64, scopes_per_warp=3, device="cpu", enabled=False)
    sink.take_pending(), scope_sink.take_pending()
    assert rec.blocks.numel() == 1 and rec.read() is None and rec.submit("k") is None
    assert sink.take_pending() == [] and scope_sink.take_pending() == []


K = "spin_phases"


def _session() -> Session:
    x = Launch(K, (2, 1, 1), (64, 1, 1), 5_000_000, 80_000, stream=7)
    return Session(time_origin_ns=1_000_000_000, launches=[x])


def _submitted(capacity: int | None = None) -> tuple[Session, cs.CudaRecords]:
    _torch()
    sink.take_pending(), scope_sink.take_pending()
    rec = cs.CudaScopes((2, 1, 1), NAMES, block=64, scopes_per_warp=3, capacity=capacity, device="cpu")
    rec.host_start_ns = 1_000_000_000 + 4_000_000  # armed 1 ms before the traced launch started
    _fill(rec, launch_records(), 2)
    got = rec.submit(K)
    assert got is not None
    s = _session()
    subs, scope_subs = sink.take_pending(), scope_sink.take_pending()
    assert len(subs) == 1 and len(scope_subs) == 1
    for sub in subs + scope_subs:
        sub.host_end_ns = 1_000_000_000 + 6_000_000  # read back 1 ms after it started
    for sub in subs:
        sink.submit(sub)
    for sub in scope_subs:
        scope_sink.submit(sub)
    sink.attach_pending(s)
    scope_sink.attach_pending(s)
    return s, got


def test_records_attach_to_their_launch_through_the_trace_pass_sinks(tmp_path):
    s, got = _submitted()
    x = s.launches[0]
    assert x.block_records is got.blocks and x.scopes is got.scopes
    assert s.collectors["instrument"].status == "ok" and s.collectors["scopes"].status == "ok"
    assert s.collectors["scopes"].details["collector"] == cs.COLLECTOR
    back = Session.load(s.save(tmp_path / "s.json")).launches[0]
    assert back.scopes is not None and back.scopes.to_dict() == got.scopes.to_dict()
    assert back.block_records is not None and back.block_records.source == "kernelscope.cuh"


def test_dropped_records_are_said_in_the_collector_status_and_the_session():
    s, got = _submitted(capacity=8)
    assert s.collectors["scopes"].details["caveats"] == [got.scopes.problems[0]]
    assert "18 of 24 records were dropped" in s.collectors["scopes"].details["caveats"][0]
    assert s.launches[0].scopes is not None and "records were dropped" in s.launches[0].scopes.problems[0]


def test_show_draws_the_panels_from_such_a_session():
    from kernelscope.analyze.report import build_report
    from kernelscope.render.show import ShowView, make_console

    s, _ = _submitted()
    buf = io.StringIO()
    make_console(width=140, file=buf, color=False).print(ShowView(build_report(s, None, 1), with_analysis=False))
    text = buf.getvalue()
    assert "Block → SM layout · spin_phases · measured" in text
    assert text.index("Block → SM layout") < text.index("Warp execution") < text.index("Kernel timeline (inside)")
    assert "measured: kernelscope.cuh scopes, globaltimer per warp" in text
    assert "block 0 on SM 3 · 2 warps · span 71,040 ns" in text
    assert "mma" in text and "Proton" not in text


def test_the_html_report_and_the_chrome_export_draw_them():
    from kernelscope.render.chrome_trace import session_to_chrome_trace

    s, _ = _submitted()
    t = session_to_chrome_trace(s)
    scopes = [e for e in t.events if e.get("cat") == "scope"]
    assert len(scopes) == 12 and {e["args"]["clock"] for e in scopes} == {"globaltimer"}
    first_b1 = min(e["ts"] for e in scopes if e["args"]["block_id"] == 1)
    assert first_b1 == pytest.approx((5_000_000 + 800) / 1000)  # the block's measured offset from the launch start
    assert not any("SM cycles" in n for n in t.notes)
    html = _html(s)
    assert "measured: kernelscope.cuh scopes" in html and "Warp execution" in html


def _html(s: Session) -> str:
    from kernelscope.analyze.report import build_report
    from kernelscope.render.html import render_html

    return str(render_html(build_report(s, None, 1)))


# -- compilers (where nvcc is on PATH) ----------------------------------------------------------------------
NVCC = shutil.which("nvcc")
KERNEL = r"""
#include "kernelscope.cuh"
extern "C" __global__ void k(float* x, int n, long long* ks_blocks, long long* ks_scopes) {
    KS_BLOCK_BEGIN();
    KS_SCOPES_INIT(ks_scopes);
    KS_SCOPE_BEGIN(0);
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? x[i] : 0.f;
    KS_SCOPE_END(0);
    KS_SCOPE_BEGIN(1);
    if (i < n) x[i] = v * 2.f + 1.f;
    KS_SCOPE_END(1);
    KS_BLOCK_END(ks_blocks);
}
"""


def _nvcc(tmp_path, source: str, name: str, *flags: str) -> str:
    src = tmp_path / f"{name}.cu"
    src.write_text(source)
    out = tmp_path / f"{name}.ptx"
    r = subprocess.run([NVCC, "-arch=sm_90", "-ptx", f"-I{cs.include_dir()}", *flags, "-o", str(out), str(src)],
                       capture_output=True, text=True, timeout=HANG_S)
    assert r.returncode == 0, r.stderr
    return "\n".join(ln for ln in out.read_text().splitlines() if not ln.startswith("//"))


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")
def test_a_plain_build_is_the_kernel_without_the_macros(tmp_path):
    plain = _nvcc(tmp_path, KERNEL, "plain")
    bare = _nvcc(tmp_path, "\n".join(ln for ln in KERNEL.splitlines() if "KS_" not in ln and "kernelscope" not in ln),
                 "bare")
    assert plain == bare  # zero cost: the same PTX, instruction for instruction
    assert "globaltimer" not in plain and "atom" not in plain


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")
def test_a_recording_build_reads_the_timer_and_claims_slots(tmp_path):
    ptx = _nvcc(tmp_path, KERNEL, "rec", "-DKS_RECORD")
    assert ptx.count("%globaltimer") >= 5  # block start and end, and a record's time per scope boundary
    assert "atom.global.add.u64" in ptx and "%smid" in ptx and "%nsmid" in ptx and "activemask" in ptx


@pytest.mark.skipif(shutil.which("g++") is None, reason="no host C++ compiler")
def test_host_code_can_include_the_header_for_its_layout_numbers(tmp_path):
    src = tmp_path / "host.cpp"
    src.write_text('#include "kernelscope.cuh"\nint main() { return KS_SCOPES_HEADER_VALUES + '
                   'KS_SCOPES_RECORD_VALUES * 2 + KS_BLOCK_ROW_VALUES - 12; }\n')
    exe = tmp_path / "host"
    r = subprocess.run(["g++", f"-I{cs.include_dir()}", "-DKS_RECORD", str(src), "-o", str(exe)],
                       capture_output=True, text=True, timeout=HANG_S)
    assert r.returncode == 0, r.stderr
    assert subprocess.run([str(exe)]).returncode == 0


# -- where the header is ------------------------------------------------------------------------------------
def test_include_dir_prints_the_headers_folder():
    from conftest import run_cli

    code, out, err = run_cli("include-dir")
    assert code == 0 and err == ""
    assert (out.strip() + "/kernelscope.cuh") == str(HEADER) and HEADER.is_file()
    assert cs.compile_options() == (f"-I{HEADER.parent}", "-DKS_RECORD") and cs.compile_options(False) == (
        f"-I{HEADER.parent}",)


def test_the_header_is_package_data():
    import fnmatch

    tomllib = pytest.importorskip("tomllib")
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = cfg["tool"]["setuptools"]["package-data"]["kernelscope"]
    rel = str(HEADER.relative_to(ROOT / "src" / "kernelscope"))
    assert any(fnmatch.fnmatch(rel, p) for p in patterns), patterns


def test_an_installed_copy_has_the_header(tmp_path):
    """Builds the wheel from a copy of the project (setuptools builds in the project's folder) and looks inside. The
    test extra brings a setuptools that builds wheels by itself (70.1 and later: no `wheel` package needed)."""
    import zipfile

    proj = tmp_path / "proj"
    shutil.copytree(ROOT / "src", proj / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, proj / name)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", str(proj), "--no-deps", "--no-build-isolation",
                        "-w", str(tmp_path), "-q"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    wheel = next(tmp_path.glob("kernelscope-*.whl"))
    assert "kernelscope/include/kernelscope.cuh" in zipfile.ZipFile(wheel).namelist()


# -- buffers and sessions recorded on an H100 (tests/data/cuda_scopes/README.md) -----------------------------
RECORDED = ROOT / "tests" / "data" / "cuda_scopes"


def _recorded(name: str) -> dict:
    import gzip
    import json

    path = RECORDED / name
    return json.loads(gzip.decompress(path.read_bytes()) if name.endswith(".gz") else path.read_text())


def _read_recorded(name: str):
    d = _recorded(name)
    names = {int(k): v for k, v in d["names"].items()}
    return d, read_scope_buffer(d["scopes"], names), read_cuda_blocks(d["blocks"], d["grid"])


def test_recorded_spin_phases_last_as_long_as_the_kernel_spun():
    d, s, blocks = _read_recorded("spin_phases_h100.json.gz")
    assert s.problems == [] and blocks.problems == []
    assert sorted(blocks.block_id) == list(range(264)) and blocks.nsmid == 132  # every block once
    assert len(s.warps) == 264 * 4 and all(len(w.scope) == 3 for w in s.warps)
    assert d["scopes"][1] == 264 * 4 * cs.SCOPES_CHUNK and d["scopes"][3] == 0  # one claim a warp, none dropped
    for i, want in enumerate((20_000, 40_000, 10_000)):
        got = [e - st for w in s.warps for sc, st, e in zip(w.scope, w.start_ns, w.end_ns) if sc == i]
        assert all(want <= g <= 1.05 * want for g in got), (s.names[i], min(got), max(got))
    times = {t for t in d["scopes"][cs.HEADER_VALUES::2] if t}
    assert all(t % 32 == 0 for t in times)  # the H100's %globaltimer step
    for w in s.warps:  # the block recorder's span of each block holds its warps' scopes
        b = blocks.block_id.index(w.block_id)
        assert blocks.end_ns[b] - blocks.start_ns[b] >= w.end_ns[-1] - w.start_ns[0]


def test_recorded_pipeline_overlaps_load_and_compute_more_than_the_serial_one():
    from kernelscope.analyze.phases import summarize_phases

    overlap = {}
    for kernel in ("pipeline_serial", "pipeline_overlap"):
        d, s, blocks = _read_recorded(f"{kernel}_h100.json")
        assert s.problems == [] and blocks.problems == [] and sorted(blocks.block_id) == [0, 1, 2, 3]
        assert s.names == ["load", "compute", "store"] and len(s.warps) == 8
        assert all(sorted(w.scope) == [0] * 4 + [1] * 4 + [2] * 4 for w in s.warps)  # four stages each
        v = summarize_phases(s)
        overlap[kernel] = {frozenset((o.a, o.b)): o.fraction_median for o in v.overlaps}[frozenset(("load", "compute"))]
    # two warps a block: the serial kernel's warps overlap one another a little, the pipeline's own loads much more
    assert overlap["pipeline_overlap"] > 3 * overlap["pipeline_serial"] > 0


def test_recorded_sessions_show_the_panels():
    from kernelscope.analyze.report import build_report
    from kernelscope.render.show import ShowView, make_console

    for name, kernel in (("session_h100_spin.json.gz", "spin_phases"),
                         ("session_h100_pipeline.json.gz", "pipeline_overlap")):
        s = Session.load(RECORDED / name)
        assert s.collectors["instrument"].status == "ok" and s.collectors["scopes"].status == "ok", name
        buf = io.StringIO()
        make_console(width=140, file=buf, color=False).print(ShowView(build_report(s, kernel, 1),
                                                                      with_analysis=False))
        text = buf.getvalue()
        assert f"Block → SM layout · {kernel} · measured" in text, name
        assert "Warp execution" in text and "measured: kernelscope.cuh scopes, globaltimer per warp" in text
        if kernel == "pipeline_overlap":
            assert "load ∥ compute" in text


def test_scopes_without_block_records_say_who_recorded_their_sms():
    from kernelscope.analyze.report import build_report
    from kernelscope.render.show import ShowView, make_console

    s = _session()
    s.launches[0].scopes = read_scope_buffer(kernel_writes(launch_records(), capacity=32), NAMES)
    buf = io.StringIO()
    make_console(width=140, file=buf, color=False).print(ShowView(build_report(s, None, 1), with_analysis=False))
    text = " ".join(buf.getvalue().split())
    assert "kernelscope.cuh scopes of one launch recorded the SM of 2 of its 2 blocks: 2 distinct SMs" in text


def _source_of(path) -> str:
    """The CUDA source string (SOURCE = r\"\"\"...\"\"\") of an example or script, without importing it."""
    m = re.search(r'^SOURCE = r"""(.*?)"""', path.read_text(), re.S | re.M)
    assert m, path
    return m.group(1)


@pytest.mark.skipif(NVCC is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("path", ["examples/cuda_pipeline.py", "scripts/cuda_scopes_overhead.py"])
def test_the_example_and_the_overhead_kernels_compile_both_ways(tmp_path, path):
    source = _source_of(ROOT / path)
    for flags in ((), ("-DKS_RECORD",)):
        ptx = _nvcc(tmp_path, source, "k" + "".join(flags).replace("-", "_"), *flags)
        assert ("%globaltimer" in ptx) == bool(flags)
    if "cuda_pipeline" in path:
        assert "cp.async.cg.shared.global" in ptx and "cp.async.wait_group 0" in ptx


def test_recorded_microsecond_phases_overshoot_by_a_few_timer_steps_at_most():
    """Spins of 2, 4 and 1 µs: each recorded scope lasts the spin plus the time to leave it and write its END,
    here at most four 32 ns steps of %globaltimer."""
    d, s, blocks = _read_recorded("spin_phases_small_h100.json")
    assert s.problems == [] and sorted(blocks.block_id) == list(range(8)) and len(s.warps) == 8 * 4
    for i, want in enumerate((2_000, 4_000, 1_000)):
        got = [e - st for w in s.warps for sc, st, e in zip(w.scope, w.start_ns, w.end_ns) if sc == i]
        assert len(got) == 32 and all(want <= g <= want + 4 * 32 for g in got), (s.names[i], sorted(set(got)))


def _many_records(records: int) -> bytes:
    """A scope buffer of ``records`` records: 1,000 warps (8 per block), each BEGIN/END of three scope ids."""
    import array

    a = array.array("q", [records, records, cs.SCOPES_MAGIC, 0])
    t0 = 1_700_000_000_000_000_000
    for w in range(1000):
        block, warp = w // 8, w % 8
        for k in range(records // 2000):
            packed = block | warp << 32 | (block % 132) << 40 | (k % 3) << 52
            a.extend((t0 + 7 * w + 100 * k, packed, t0 + 7 * w + 100 * k + 60, packed | 1 << 62))
    return a.tobytes()


@pytest.mark.slow
def test_the_scope_reader_holds_no_object_per_record():
    """200,000 records: the reader made an object per record (about 1 KB each: 870 MiB for a million). Its peak
    is now under 300 bytes a record (measured 142 B: the int64 values, one sort key per record while pairing,
    the scopes it returns); a million records read in 3.7 s and 190 MiB RSS on the 2-core dev box."""
    import tracemalloc

    buf = _many_records(200_000)
    tracemalloc.start()
    try:
        s = cs.read_scope_buffer(buf, ["load", "mma", "store"])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert sum(len(w.scope) for w in s.warps) == 100_000 and not s.problems
    assert peak < 300 * 200_000, peak


def test_a_value_outside_int64_is_one_sentence():
    with pytest.raises(cs.CudaScopesError, match="outside int64"):
        cs.read_scope_buffer([4, 1, cs.SCOPES_MAGIC, 0, 1 << 70, 0] + [0] * 6, ["a"])
