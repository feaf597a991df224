"""Writers: no clobbering without -f, never over an input, and atomic (SIGKILL and a full disk mid-write
leave the old file as it was)."""
from __future__ import annotations

import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import DATA, HANG_S, ROOT, default_signals, error_sentence, run_cli, run_cli_process
from kernelscope.model.files import OutputFileError, check_output, write_atomic

SESSION = DATA / "session_h100_mixed.json.gz"


def test_export_over_its_own_input_is_refused_even_with_force(session_file):
    before = session_file.read_bytes()
    for extra in ([], ["-f"]):
        code, _, err = run_cli("export", str(session_file), "--chrome", str(session_file), *extra)
        assert code == 2 and "is also an input of this command" in error_sentence(err)
    assert session_file.read_bytes() == before  # the session is still the session


def test_export_refuses_an_existing_file_without_force(session_file, tmp_path):
    out = tmp_path / "trace.json"
    out.write_text("keep me")
    code, _, err = run_cli("export", str(session_file), "-o", str(out))
    assert code == 2 and "already exists; use -f" in error_sentence(err)
    assert out.read_text() == "keep me"
    code, _, err = run_cli("export", str(session_file), "-o", str(out), "-f")
    assert code == 0, err
    assert out.read_text().startswith("{")


def test_import_never_writes_over_the_report(tmp_path):
    pytest.importorskip("ncu_report")
    from ncu_fixtures import report_file

    report = report_file("ncu_h100_region", tmp_path)
    before = report.read_bytes()
    code, _, err = run_cli("import", str(report), "-o", str(report), "-f")
    assert code == 2 and "is also an input" in error_sentence(err)
    assert report.read_bytes() == before


def test_run_never_writes_its_session_over_the_script_it_profiles(tmp_path):
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    code, _, err = run_cli("run", "-o", str(script), "-f", "--", sys.executable, str(script))
    assert code == 2 and "is also an input" in error_sentence(err)
    assert script.read_text() == "print('hi')\n"


def test_show_checks_the_roofline_png_before_drawing(session_file, tmp_path):
    png = tmp_path / "roof.png"
    png.write_bytes(b"old")
    code, out, err = run_cli("show", str(session_file), "--roofline-png", str(png))
    assert code == 2 and "already exists" in error_sentence(err) and out == ""  # nothing drawn first
    assert png.read_bytes() == b"old"


def test_plot_refuses_to_replace_pngs_without_force(tmp_path):
    pytest.importorskip("matplotlib")
    d = tmp_path / "plots"
    d.mkdir()
    (d / "attention_latency.png").write_bytes(b"old")
    code, _, err = run_cli("plot", str(DATA / "bench_attention_h100.json"), "--output-dir", str(d))
    assert code == 2 and "already exists" in error_sentence(err)
    assert (d / "attention_latency.png").read_bytes() == b"old" and len(list(d.iterdir())) == 1


def test_check_output_names_what_is_wrong(tmp_path):
    with pytest.raises(OutputFileError, match="does not exist"):
        check_output(tmp_path / "no" / "such" / "dir.json")
    with pytest.raises(OutputFileError, match="is a directory"):
        check_output(tmp_path, force=True)
    assert check_output(tmp_path / "new.json") == tmp_path / "new.json"


_SLOW_WRITER = """
import sys, time
from kernelscope.model.files import write_atomic
def write(f):
    for i in range(100_000):  # ~1.6 GB in 16 KiB chunks, slowly: it is signalled long before the end
        f.write(b"N" * 16384)
        f.flush()
        if i % 64 == 0:
            time.sleep(0.01)
write_atomic(sys.argv[1], write, force=True)
"""


def _signalled_mid_write(target: Path, sig: int) -> int:
    """A child writing TARGET slowly with write_atomic (force), sent SIG once its temporary file holds 1 MiB; the
    child's exit status."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    p = subprocess.Popen([sys.executable, "-c", _SLOW_WRITER, str(target)], env=env, preexec_fn=default_signals)
    while p.poll() is None:  # wait until the temporary file holds real data
        partial = [f for f in target.parent.iterdir() if f.name.endswith(".partial")]
        if partial and partial[0].stat().st_size > 1 << 20:
            break
        time.sleep(0.02)
    else:
        pytest.fail(f"the writer ended (exit {p.returncode}) before it was signalled mid-write")
    p.send_signal(sig)
    return p.wait(timeout=HANG_S)


def test_sigkill_mid_write_leaves_the_old_file_byte_for_byte(tmp_path):
    target = tmp_path / "session.json"
    old = os.urandom(4096)
    target.write_bytes(old)
    assert _signalled_mid_write(target, signal.SIGKILL) == -signal.SIGKILL
    assert target.read_bytes() == old  # untouched: the half-written data never had its name


def _fsize_limit() -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, like a full disk
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, 64 * 1024))


@pytest.mark.parametrize("command", ["export", "import-session"])
def test_a_full_disk_mid_write_is_one_sentence_and_keeps_the_old_file(tmp_path, command):
    big = tmp_path / "big.json.gz"  # a session whose output is larger than the limit
    shutil.copy(DATA / "session_h100_samples.json.gz", big)
    out = tmp_path / ("trace.json" if command == "export" else "copy.json")
    out.write_text("the previous, good file")
    if command == "export":
        r = run_cli_process("export", str(big), "-o", str(out), "-f", preexec_fn=_fsize_limit)
    else:  # a session written by the model's save(), through the same writer
        code = ("import sys; from kernelscope.model import Session; from kernelscope.cli import main; "
                "s = Session.load(sys.argv[1]); s.save(sys.argv[2])")
        r = subprocess.run([sys.executable, "-c", code, str(big), str(out)], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, preexec_fn=_fsize_limit)
    assert r.returncode != 0
    if command == "export":
        assert r.returncode == 2 and "File too large" in error_sentence(r.stderr) and "left as it was" in r.stderr
    else:
        assert "OutputFileError" in r.stderr and "File too large" in r.stderr
    assert out.read_text() == "the previous, good file"
    assert not [f for f in tmp_path.iterdir() if f.name.endswith(".partial")]  # no temporary file left behind


def test_write_atomic_keeps_the_old_file_when_the_writer_raises(tmp_path):
    target = tmp_path / "x.json"
    target.write_text("old")

    def boom(f):
        f.write(b"half")
        raise KeyboardInterrupt  # Ctrl-C mid-write

    with pytest.raises(KeyboardInterrupt):
        write_atomic(target, boom)
    assert target.read_text() == "old" and sorted(p.name for p in tmp_path.iterdir()) == ["x.json"]


# Files written outside model/files.py: each a private hand-off between kernelscope's own processes, never a
# path a user named (issue 37: "every writer goes through write_atomic").
PRIVATE_WRITES = {"kernelscope/collect/ncu/rank_counters.py": ("write_text",),  # spec and result between ranks
                  "kernelscope/collect/trace/recorder.py": ("replace",)}  # the step window's trace to a temp file


def test_every_writer_goes_through_model_files():
    import ast

    found = []
    for path in sorted((ROOT / "src" / "kernelscope").rglob("*.py")):
        rel = path.relative_to(ROOT / "src").as_posix()
        if rel == "kernelscope/model/files.py" or rel.startswith("kernelscope/kernels/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            owner = f.value.id if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) else ""
            mode = next((a.value for a in node.args[1:2] if isinstance(a, ast.Constant)), None)
            mode = next((k.value.value for k in node.keywords if k.arg == "mode" and isinstance(k.value, ast.Constant)),
                        mode)
            if (name in ("write_text", "write_bytes") or (owner in ("os", "shutil") and name in (
                    "replace", "rename", "move", "copy", "copyfile")) or
                    (name == "open" and isinstance(mode, str) and any(c in mode for c in "wax"))):
                if name not in PRIVATE_WRITES.get(rel, ()):
                    found.append(f"{rel}:{node.lineno} {name}")
    assert not found, f"writes outside model/files.write_atomic: {found}"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_mid_write_removes_the_partial_file(tmp_path, sig):
    target = tmp_path / "session.json"
    target.write_bytes(b"old")
    assert _signalled_mid_write(target, sig) == -sig  # it still dies of the signal, as SIGTERM's sender expects
    assert target.read_bytes() == b"old"
    assert sorted(f.name for f in tmp_path.iterdir()) == ["session.json"]  # no .partial left behind
