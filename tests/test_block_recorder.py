"""Block recorder without a GPU: the reader and its validation on buffers shaped exactly
as the kernel writes them, matching records to launches, the recorder compiled out
(it runs in Triton's interpreter) and compiled in (PTX/SASS for sm_90, no GPU needed)."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import DATA, HANG_S, ROOT
from kernelscope.collect.instrument import sink
from kernelscope.collect.instrument.layout import ROW_VALUES, buffer_values, split_sm
from kernelscope.collect.instrument.reader import read_block_buffer
from kernelscope.model import BlockRecords, Session

T0 = 1_795_322_159_289_605_829  # a %globaltimer-like value: ns since the epoch


def kernel_rows(rows: list[tuple[int, int, int, int]], nsmid: int = 132) -> list[int]:
    """A buffer as block_record writes it: [block, smid | nsmid << 32, start, end] per row."""
    out: list[int] = []
    for block, sm, start, end in rows:
        out += [block, sm | (nsmid << 32), start, end]
    return out


def full_buffer(n: int) -> list[int]:
    return kernel_rows([(b, b % 5, T0 + 10 * b, T0 + 10 * b + 7) for b in range(n)])


def test_layout_constants():
    assert ROW_VALUES == 4 and buffer_values((3, 2, 2)) == 48
    assert split_sm(17 | (132 << 32)) == (17, 132)


def test_complete_buffer_reads_back_exactly():
    r = read_block_buffer(full_buffer(6), (3, 2, 1))
    assert r.problems == [] and r.buffer_rows == 6 and r.nsmid == 132
    assert r.block_id == list(range(6)) and r.smid == [0, 1, 2, 3, 4, 0]
    assert r.start_ns[5] == T0 + 50 and r.end_ns[5] == T0 + 57


def test_truncated_buffer_keeps_whole_rows_and_says_so():
    buf = full_buffer(6)[:-2]  # cut in the middle of the last row
    r = read_block_buffer(buf, (6, 1, 1))
    assert r.block_id == [0, 1, 2, 3, 4]
    assert any("truncated" in p and "2 value(s)" in p for p in r.problems)
    assert any("5 rows for 6 blocks" in p and "5 to 5" in p for p in r.problems)


def test_rows_never_written_are_missing_blocks_not_zero_times():
    buf = full_buffer(6)
    buf[2 * ROW_VALUES:3 * ROW_VALUES] = [0, 0, 0, 0]  # block 2 never wrote its row
    r = read_block_buffer(buf, (6, 1, 1))
    assert 2 not in r.block_id and len(r) == 5
    assert 0 not in r.start_ns
    assert any("1 of 6 rows were never written" in p and "blocks 2 did not record" in p for p in r.problems)


def test_misplaced_partial_and_backwards_rows_are_kept_and_reported():
    buf = kernel_rows([(0, 1, T0, T0 + 5), (7, 1, T0, T0 + 5), (2, 1, T0, 0), (3, 1, T0 + 9, T0 + 4)])
    r = read_block_buffer(buf, (4, 1, 1))
    assert r.block_id == [0, 7, 2, 3]  # every written row kept
    text = " | ".join(r.problems)
    assert "row(s) hold another block's id (rows 1)" in text
    assert "zero start or end time (rows 2)" in text
    assert "end before they start (blocks 3)" in text


def test_rows_that_disagree_on_nsmid():
    buf = kernel_rows([(0, 1, T0, T0 + 5)], nsmid=132) + kernel_rows([(1, 1, T0, T0 + 5)], nsmid=7)
    r = read_block_buffer(buf, (2, 1, 1))
    assert r.nsmid is None and any("disagree on %nsmid" in p for p in r.problems)


def test_bad_grid_is_refused():
    with pytest.raises(ValueError, match="three positive sizes"):
        read_block_buffer([], (0, 1, 1))


def _session_with_launches() -> Session:
    return Session.load(DATA / "session_h100_sweep.json.gz")


def _submission(s: Session, kernel: str, grid, lo: int, hi: int) -> sink.Submission:
    g = tuple(grid)
    n = g[0] * g[1] * g[2]
    rec = read_block_buffer(full_buffer(n), g)
    return sink.Submission(kernel, g, rec, s.time_origin_ns + lo, s.time_origin_ns + hi)


def test_attach_matches_kernel_grid_and_host_window():
    s = _session_with_launches()
    target = next(x for x in s.launches if x.grid == (16, 16, 1) and x.block == (256, 1, 1))
    sub = _submission(s, "matmul_kernel", target.grid, target.start_ns - 1000, target.start_ns + 1000)
    attached, notes, left = sink.attach(s, [sub])
    assert (attached, notes, left) == (1, [], [])
    assert target.block_records is sub.records
    assert sum(1 for x in s.launches if x.block_records is not None) == 1


def test_records_matching_no_launch_are_kept_unattached():
    s = _session_with_launches()
    sink.take_pending()
    sink.submit(_submission(s, "matmul_kernel", (16, 16, 1), -10_000, -5_000))  # before the session began
    sink.attach_pending(s)
    st = s.collectors["instrument"]
    assert st.status == "failed" and "kept unattached" in st.reason
    assert st.details["unattached"][0]["records"]["block_id"] == list(range(256))
    assert all(x.block_records is None for x in s.launches)
    json.dumps(s.to_dict())  # the unattached records save with the session
    assert sink.take_pending() == []


def test_two_launches_in_one_window_go_to_the_last_with_a_note():
    s = _session_with_launches()
    both = [x for x in s.launches if x.grid == (1056, 1, 1)][:2]
    sub = _submission(s, "distribution_elementwise_grid_stride_kernel", (1056, 1, 1),
                      both[0].start_ns - 1, both[1].start_ns + 1)
    attached, notes, _ = sink.attach(s, [sub])
    assert attached == 1 and both[1].block_records is sub.records and both[0].block_records is None
    assert "2 launches" in notes[0]


def test_recorder_refuses_to_record_in_the_interpreter_and_runs_disabled():
    pytest.importorskip("torch")
    from kernelscope.collect.instrument.recorder import BlockRecorder, InstrumentError

    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("checks the interpreter path")
    with pytest.raises(InstrumentError, match="interpreter"):
        BlockRecorder((4, 2), device="cpu")
    off = BlockRecorder((4, 2), device="cpu", enabled=False)
    assert off.grid == (4, 2, 1) and off.buffer.numel() == 1
    assert off.read() is None and off.submit("k") is None and sink.take_pending() == []


def _interpreted_example():
    pytest.importorskip("torch")
    pytest.importorskip("triton")
    if os.environ.get("TRITON_INTERPRET") != "1":
        pytest.skip("this machine has a GPU: tests/gpu/test_block_recorder_gpu.py runs the kernel for real")
    sys.path.insert(0, str(ROOT / "tests" / "workloads"))
    import instrumented_example

    return instrumented_example


def test_kernel_runs_in_the_interpreter_with_recording_compiled_out():
    ex = _interpreted_example()  # skips without torch/triton, so it comes before the torch import
    import torch

    torch.manual_seed(0)
    a, b = torch.randn(40, 24), torch.randn(24, 36)
    c = ex.matmul(a, b, block_m=16, block_n=16, block_k=16, num_warps=1, num_stages=1)
    torch.testing.assert_close(c, a @ b, rtol=1e-4, atol=1e-4)
    records = torch.zeros(3 * 3 * ROW_VALUES, dtype=torch.int64)
    ex.matmul_blocks_kernel[(3, 3)](a, b, c, records, 40, 36, 24, *a.stride(), *b.stride(), *c.stride(),
                                    BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, RECORD=False)
    assert int(records.abs().sum()) == 0  # RECORD=False writes nothing


def test_recording_on_needs_the_gpu_the_interpreter_cannot_run_inline_ptx():
    ex = _interpreted_example()  # skips without torch/triton, so it comes before the torch import
    import torch

    a, b = torch.randn(16, 16), torch.randn(16, 16)
    c = torch.empty(16, 16)
    records = torch.zeros(ROW_VALUES, dtype=torch.int64)
    with pytest.raises(Exception, match="inline_asm not supported in interpreter"):
        ex.matmul_blocks_kernel[(1, 1)](a, b, c, records, 16, 16, 16, *a.stride(), *b.stride(), *c.stride(),
                                        BLOCK_M=16, BLOCK_N=16, BLOCK_K=16, RECORD=True)


COMPILE = r"""
import json, os, re, subprocess, sys, tempfile
sys.path.insert(0, sys.argv[1])
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
import instrumented_example as ex
names = ["a_ptr", "b_ptr", "c_ptr", "records_ptr", "M", "N", "K", "stride_am", "stride_ak", "stride_bk", "stride_bn",
         "stride_cm", "stride_cn"]
sig = dict(zip(names, ["*fp16"] * 3 + ["*i64"] + ["i32"] * 9))
sig.update({n: "constexpr" for n in ("BLOCK_M", "BLOCK_N", "BLOCK_K", "RECORD")})
nvdisasm = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "nvdisasm")
out = {}
for record in (False, True):
    src = ASTSource(fn=ex.matmul_blocks_kernel, signature=sig,
                    constexprs={"BLOCK_M": 128, "BLOCK_N": 128, "BLOCK_K": 64, "RECORD": record})
    c = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": 8, "num_stages": 3})
    sass = []
    if os.path.exists(nvdisasm):
        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
            f.write(c.asm["cubin"])
        sass = subprocess.run([nvdisasm, "-c", f.name], capture_output=True, text=True).stdout.splitlines()
    out[str(record)] = {"ptx": c.asm["ptx"].splitlines(), "sass": sass}
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def compiled():
    pytest.importorskip("triton")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = str(ROOT / "src")
    r = subprocess.run([sys.executable, "-c", COMPILE, str(ROOT / "tests" / "workloads")], capture_output=True,
                       text=True, env=env, timeout=HANG_S)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def _first(lines: list[str], pattern: str) -> int:
    return next(i for i, line in enumerate(lines) if re.search(pattern, line))


def _last(lines: list[str], pattern: str) -> int:
    return max(i for i, line in enumerate(lines) if re.search(pattern, line))


def test_recording_off_compiles_to_no_timer_or_sm_reads(compiled):
    ptx = "\n".join(compiled["False"]["ptx"])
    assert "%globaltimer" not in ptx and "%smid" not in ptx and "%nsmid" not in ptx


def test_recording_on_reads_the_timer_before_the_work_and_after_a_barrier(compiled):
    ptx = compiled["True"]["ptx"]
    reads = [i for i, line in enumerate(ptx) if "%globaltimer" in line]
    assert len(reads) == 2
    assert reads[0] < _first(ptx, r"\bld\.global|cp\.async")  # start: before the first load of A or B
    assert _last(ptx, r"^\s*bar\.sync") < reads[1]  # end: after every warp reached the barrier
    assert _last(ptx, r"st\.global\.b16|st\.global\.v") < reads[1]  # ... and after the C tile was stored
    assert sum("%smid" in line for line in ptx) == 1 and sum("%nsmid" in line for line in ptx) == 1
    sass = compiled["True"]["sass"]
    if not sass:
        pytest.skip("nvdisasm is not bundled with this Triton; PTX order checked only")
    timer = [i for i, line in enumerate(sass) if "SR_GLOBALTIMER" in line]
    assert timer[0] < _first(sass, r"\bLDG") and timer[-1] > _last(sass, r"BAR\.SYNC")
    assert any("SMID" in line for line in sass)


def test_block_records_round_trip_in_a_session(tmp_path):
    s = Session.load(DATA / "session_h100_sweep.json.gz")
    s.launches[2].block_records = read_block_buffer(full_buffer(6), (6, 1, 1))
    back = Session.load(s.save(tmp_path / "s.json.gz"))
    assert back.launches[2].block_records == s.launches[2].block_records
    assert back.launches[0].block_records is None and "block_records" not in back.launches[0].to_dict()
    assert isinstance(back.launches[2].block_records, BlockRecords)


def test_phase_scopes_round_trip_and_refuse_ragged_lists(tmp_path):
    from kernelscope.model import PhaseScopes, WarpScopes

    s = Session.load(DATA / "session_h100_sweep.json.gz")
    scopes = PhaseScopes(names=["load", "compute", "store"], source="proton", problems=["1 scope dropped"],
                         warps=[WarpScopes(0, w, smid=3, scope=[0, 1, 2], start_ns=[T0, T0 + 5, T0 + 9],
                                           end_ns=[T0 + 5, T0 + 9, T0 + 12]) for w in range(4)])
    s.launches[1].scopes = scopes
    back = Session.load(s.save(tmp_path / "s.json"))
    assert back.launches[1].scopes == scopes and back.launches[0].scopes is None
    with pytest.raises(ValueError, match="one start and end per scope"):
        WarpScopes(0, 0, scope=[0, 1], start_ns=[T0], end_ns=[T0 + 1])
    with pytest.raises(ValueError, match="one SM id, start and end per block id"):
        BlockRecords((2, 1, 1), [0, 1], [0], [T0, T0], [T0, T0])
