"""The CLI as a user meets it: exit codes, pass-through, partial sessions, one-sentence errors."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from conftest import DATA, default_signals, HANG_S, one_sentence_error, ROOT, run_cli
from kernelscope.model import Session

DEMO = ROOT / "src" / "kernelscope" / "data" / "demo_session.json.gz"


ks = run_cli
_assert_one_sentence_error = one_sentence_error


def test_run_passes_stdout_and_exit_code_through_and_writes_session(tmp_path):
    script = tmp_path / "w.py"
    script.write_text("import sys\nprint('out', sys.argv[1:])\nprint('err', file=sys.stderr)\nsys.exit(3)\n")
    out = tmp_path / "s.json"
    r = ks("run", "-o", str(out), "--", sys.executable, str(script), "a", "--flag")
    assert r.returncode == 3
    assert "out ['a', '--flag']" in r.stdout and "err" in r.stderr
    s = Session.load(out)
    assert s.exit_code == 3 and s.outcome == "workload-failed"
    assert s.command == [sys.executable, str(script), "a", "--flag"]
    assert s.collectors["trace"].status in ("ok", "not-run") and s.collectors["trace"].reason


def test_run_module_form(tmp_path):
    (tmp_path / "wmod.py").write_text("import sys\nprint('module ran', sys.argv[1:])\n")
    out = tmp_path / "s.json"
    r = ks("run", "-o", str(out), "-m", "wmod", "x", "-v", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "module ran ['x', '-v']" in r.stdout
    assert Session.load(out).command == ["-m", "wmod", "x", "-v"]


def test_workload_that_raises_leaves_a_session_and_its_own_traceback(tmp_path):
    script = tmp_path / "boom.py"
    script.write_text("def f():\n    raise ValueError('boom')\nf()\n")
    out = tmp_path / "s.json"
    r = ks("run", "-o", str(out), "--", sys.executable, str(script))
    assert r.returncode == 1
    assert "ValueError: boom" in r.stderr and "bootstrap" not in r.stderr
    s = Session.load(out)
    assert s.outcome == "workload-failed" and s.exit_code == 1


@pytest.mark.parametrize("workload", [
    "import time\nprint('ready', flush=True)\ntime.sleep(60)\n",
    # the workload swallows KeyboardInterrupt and exits 0: the run is still an interrupted one (issue 37 item 11)
    "import time\nprint('ready', flush=True)\ntry:\n    time.sleep(60)\nexcept KeyboardInterrupt:\n    pass\n",
], ids=["plain", "catches-ctrl-c"])
def test_interrupted_workload_keeps_the_session(tmp_path, workload):
    script = tmp_path / "slow.py"
    script.write_text(workload)
    out = tmp_path / "s.json"
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    p = subprocess.Popen([sys.executable, "-m", "kernelscope", "run", "-o", str(out), "--", sys.executable,
                          str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True, preexec_fn=default_signals)
    assert p.stdout.readline().strip() == "ready"
    os.killpg(p.pid, signal.SIGINT)  # what Ctrl-C does: the whole foreground group
    p.wait(timeout=HANG_S)
    assert p.returncode == 130, p.stderr.read()[-2000:]
    s = Session.load(out)
    assert s.outcome == "interrupted" and s.exit_code == 130


def test_crashed_workload_still_gets_a_session_saying_so(tmp_path):
    script = tmp_path / "crash.py"
    script.write_text("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n")
    out = tmp_path / "s.json"
    r = ks("run", "-o", str(out), "--", sys.executable, str(script))
    assert r.returncode == 128 + 9
    s = Session.load(out)
    assert s.collectors["trace"].status == "failed" and "SIGKILL" in s.collectors["trace"].reason


@pytest.mark.parametrize("args,phrase", [
    (["run", "--", sys.executable, "no_such_script.py"], "no such file"),
    (["run", "--", "ls", "-l"], "not a Python program"),
    (["run"], "nothing to run"),
    (["run", "--bogus", "x"], "unknown run option"),
    (["show", "no_such_session.json"], "no such session file"),
    (["show", "tests/data/trace_h100_mixed.json.gz"], "not a kernelscope session"),
    (["occupancy", "--arch", "sm_42", "--block", "128", "--regs", "32"], "no occupancy table"),
])
def test_bad_input_is_one_sentence_and_exit_2(args, phrase):
    r = ks(*args)
    _assert_one_sentence_error(r)
    assert phrase in r.stderr


def test_run_refuses_to_overwrite_without_force(tmp_path):
    out = tmp_path / "s.json"
    out.write_text("precious")
    script = tmp_path / "w.py"
    script.write_text("pass\n")
    r = ks("run", "-o", str(out), "--", sys.executable, str(script))
    _assert_one_sentence_error(r)
    assert out.read_text() == "precious"
    assert ks("run", "-f", "-o", str(out), "--", sys.executable, str(script)).returncode == 0


def test_damaged_session_file(tmp_path):
    p = tmp_path / "s.json"
    p.write_text('{"format": "kernelscope-session", "schema_version": 1, "launches": [{"kernel": ')
    r = ks("show", str(p))
    _assert_one_sentence_error(r)
    assert "damaged" in r.stderr


def test_version_and_help():
    r = ks("--version")
    assert r.returncode == 0 and r.stdout.startswith("kernelscope ")
    r = ks("run", "--help")
    assert r.returncode == 0 and "usage: kernelscope run" in r.stdout


def test_demo_without_a_gpu_renders_the_bundled_h100_session():
    from kernelscope.collect.driver import gpu_available

    if gpu_available()[0]:
        pytest.skip("this machine has a GPU: the demo profiles for real (see tests/gpu)")
    from kernelscope.bundled_session import bundled_session

    session, label = bundled_session()
    r = ks("demo", "--width", "100", "--no-color")
    assert r.returncode == 0, r.stderr
    first = " ".join(r.stdout.split("╭")[0].split())  # the banner sentence, however it wrapped
    assert first.startswith("No CUDA GPU is available here (") and f"recorded on {label}" in first
    assert label.startswith("NVIDIA ") and label.split(" on ")[1].startswith("2026-")
    assert "Kernel configuration · _w4a16_kernel" in r.stdout
    assert "regions: w4a16_gemm" in r.stdout
    # The recording holds only what the demo is about (issue #20): the W4A16 kernel is in the first
    # table's top rows, and no weight-preparation kernel was recorded.
    table = r.stdout[r.stdout.index("Kernels by total GPU time"):r.stdout.index("Kernel configuration")]
    rows = [ln for ln in table.splitlines() if ln.startswith("│")]
    assert any("_w4a16_kernel" in ln for ln in rows[:3]), table
    assert {x.regions[-1] for x in session.launches} <= {"w4a16_gemm", "l2_flush"}
    assert r.stdout.index("Verdict") < r.stdout.index("Kernels by total GPU time")


def test_report_and_import_say_what_they_wrote(tmp_path):
    r = run_cli("report", str(DATA / "counters_h100_region.json.gz"), "-o", str(tmp_path / "a.html"))
    assert "panels for 3 of 9 kernels (--panels N or --kernel REGEX for others)" in r.stdout
    r = run_cli("report", str(DEMO), "-o", str(tmp_path / "b.html"))
    assert "panels for both kernels" in r.stdout
    r = run_cli("import", str(DATA / "ranks" / "job2_rank0.pt.trace.json.gz"), "-o", str(tmp_path / "s.json"))
    assert r.returncode == 0, r.stderr
    assert "96 kernel launches from 1 trace file written to" in r.stderr
