"""`kernelscope run --counters -- torchrun ...` without a GPU: the stand-in ncu (tests/fakes/ncu) under a
gloo torchrun job on the CPU, and the per-rank kernel filter on the session recorded on 2x H200.
Unverified on a GPU: these tests check the command lines built, which ranks run under ncu, and the merge."""
from __future__ import annotations

import os
import re
import shutil
import sys
from pathlib import Path

import pytest

from conftest import ROOT, CliResult, run_cli
from kernelscope.collect.ncu.counter_pass import CounterRequest
from kernelscope.collect.ncu.rank_counters import NO_NCCL_REGEX, is_nccl, rank_kernel_filter, rank_report_path
from kernelscope.model import Session
from ncu_fixtures import report_file

FAKE_NCU = str(ROOT / "tests" / "fakes" / "ncu")
RUN = ROOT / "tests" / "data" / "ranks" / "session_h200x2_run_torchrun.json.gz"
TORCHRUN = shutil.which("torchrun", path=os.path.dirname(sys.executable))
GLOO = ROOT / "tests" / "workloads" / "gloo_ranks.py"


def test_the_kernel_filter_of_a_rank_never_names_an_nccl_kernel() -> None:
    s = Session.load(RUN)
    # rank 1's all-reduce kernels hold its 43.6 ms wait: by time they would be its first pick
    totals: dict[str, int] = {}
    for x in s.launches:
        if x.rank == 1:
            totals[x.kernel] = totals.get(x.kernel, 0) + x.duration_ns
    assert is_nccl(max(totals, key=totals.__getitem__))
    for rank in (0, 1):
        regex, how, nccl = rank_kernel_filter(s, rank, CounterRequest(top=5))
        names = regex[len("^(?:"):-len(")$")].split("|")
        assert len(names) == 5 and not any("nccl" in n for n in names) and "NCCL" in how
        assert nccl and all(n.startswith("ncclDevKernel") for n in nccl)
        assert all(re.fullmatch(regex, n) is None for n in nccl)
    regex, _, _ = rank_kernel_filter(s, 1, CounterRequest(top=5))
    assert "spin_kernel" in regex  # the planted delay runs on rank 1 only
    regex, _, _ = rank_kernel_filter(s, 0, CounterRequest(top=5))
    assert "spin_kernel" not in regex
    # --kernel matching NCCL's and others keeps the others only; matching NCCL's only leaves nothing to profile
    regex, _, nccl = rank_kernel_filter(s, 0, CounterRequest(kernel_regex="Kernel"))
    assert regex is not None and "Kernel2" in regex and "ncclDevKernel" not in regex and nccl
    regex, _, nccl = rank_kernel_filter(s, 0, CounterRequest(kernel_regex="^nccl"))
    assert regex is None and nccl
    # a rank whose trace saw no kernel: every kernel but NCCL's, by a look-ahead
    empty = Session(command=["x"])
    regex, how, _ = rank_kernel_filter(empty, 0, CounterRequest())
    assert regex == NO_NCCL_REGEX and re.match(regex, "ncclDevKernel_AllReduce_Sum_f32_RING_LL") is None
    assert re.match(regex, "ncclKernel_AllGather_RING_LL_Sum_int8_t") is None and re.match(regex, "gemm_kernel")


def test_rank_reports_are_named_for_their_rank(tmp_path: Path) -> None:
    assert rank_report_path(tmp_path / "s.json", 1).name == "s.rank1.ncu-rep"
    assert rank_report_path(tmp_path / "s.json.gz", 0).name == "s.rank0.ncu-rep"


def _run(tmp_path: Path, *opts: str, env: dict[str, str]) -> CliResult:
    return run_cli("run", "-o", str(tmp_path / "s.json"), *opts, "--ncu", FAKE_NCU, "--", TORCHRUN, "--nproc-per-node",
                   "2", "--master-port", "29563", str(GLOO), cwd=tmp_path, env=env)


@pytest.mark.slow
@pytest.mark.skipif(TORCHRUN is None, reason="needs torch's torchrun")
def test_counters_under_torchrun_profile_only_the_chosen_rank_and_merge_its_results(tmp_path: Path) -> None:
    rep = report_file("ncu_h100_access_patterns", tmp_path)
    argv_dir = tmp_path / "argv"
    argv_dir.mkdir()
    r = _run(tmp_path, "--counters", "--ranks", "1", env={"FAKE_NCU_REPORT": str(rep),
                                                          "FAKE_NCU_ARGV_DIR": str(argv_dir)})
    assert r.returncode == 0, r.stderr[-2000:]
    assert "rank 0: sum 1" in r.stdout and "rank 1: sum 1" in r.stdout  # both ranks ran the job, gloo and all
    assert [p.name for p in argv_dir.iterdir()] == ["argv-rank1.txt"]  # only rank 1 ran under ncu
    argv = (argv_dir / "argv-rank1.txt").read_text().split("\n")
    assert argv[argv.index("--kernel-name-base") + 1] == "function"
    assert argv[argv.index("--kernel-name") + 1] == f"regex:{NO_NCCL_REGEX}"  # the CPU trace saw no kernel
    assert argv[argv.index("--clock-control") + 1] == "none"
    command = argv[argv.index("--") + 1:]
    # the rank's own command line: torchrun starts it with its own interpreter (python or python3, one binary)
    assert Path(command[0]).resolve() == Path(sys.executable).resolve() and command[-1] == str(GLOO)
    s = Session.load(tmp_path / "s.json")
    c = s.collectors["counters"]
    assert c.status == "ok", c.reason
    assert c.details["ranks_profiled"] == [1] and c.details["ranks_requested"] == [1]
    assert "NCCL kernels are never profiled" in c.details["nccl"]
    per = c.details["per_rank"]["1"]
    assert per["kernel_filter"] == NO_NCCL_REGEX and per["status"] == "ok"
    assert Path(per["report"]).name == "s.rank1.ncu-rep" and Path(per["report"]).exists()
    profiled = [x for x in s.launches if x.counters]
    assert profiled and {x.rank for x in profiled} == {1}  # rank 1's results, as rank 1's launches
    assert len(profiled) == per["kernels_profiled"] == c.details["kernels_profiled"]
    assert s.artifacts["ncu_report_rank1"] == per["report"]
    assert [(x.rank, x.world_size) for x in s.ranks] == [(0, 2), (1, 2)]
    code = run_cli("show", str(tmp_path / "s.json"), "--json")
    assert code.returncode == 0, code.stderr[-1000:]


@pytest.mark.slow
@pytest.mark.skipif(TORCHRUN is None, reason="needs torch's torchrun")
def test_a_rank_without_counter_permission_is_named_and_the_trace_kept(tmp_path: Path) -> None:
    r = _run(tmp_path, "--counters", env={"FAKE_NCU_MODE": "perm"})
    # torchrun prints its own traceback (ChildFailedError) when a rank fails; none comes from kernelscope
    assert r.returncode == 1 and str(ROOT / "src") not in r.stderr
    assert "counter pass failed" in r.stderr and "ERR_NVGPUCTRPERM" in r.stderr
    s = Session.load(tmp_path / "s.json")
    c = s.collectors["counters"]
    assert c.status == "failed" and "rank 0:" in c.reason and "rank 1:" in c.reason
    assert [x.rank for x in s.ranks] == [0, 1]  # the trace pass's session is kept


def test_ranks_option_is_checked(tmp_path: Path) -> None:
    w = tmp_path / "w.py"
    w.write_text("pass\n")
    for opts, phrase in ((["--ranks", "0"], "--ranks needs --counters"),
                         (["--counters", "--ranks", "a,b"], "--ranks takes ranks"),
                         (["--counters", "--ranks", "0"], "--ranks chooses ranks of a torchrun job")):
        r = run_cli("run", *opts, "-o", str(tmp_path / "s.json"), "--", sys.executable, str(w))
        assert r.returncode == 2 and phrase in r.stderr and "Traceback" not in r.stderr


def test_the_session_header_says_which_ranks_ncu_profiled_and_that_nccl_was_left_out(tmp_path: Path) -> None:
    from kernelscope.cli import main as cli_main
    from kernelscope.model import CollectorStatus

    s = Session.load(RUN)
    s.collectors["counters"] = CollectorStatus("ok", None, {"ranks_profiled": [1], "nccl": "x"})
    s.save(tmp_path / "s.json")
    import contextlib
    import io

    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert cli_main(["show", str(tmp_path / "s.json"), "--width", "200", "--panels", "0"]) == 0
    assert "ranks profiled: 1 · NCCL kernels never profiled" in buf.getvalue()
