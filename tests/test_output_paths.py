"""Hostile output paths (issue 37, items 1, 4, 5, 6, 9): `-o X` never replaces a device, FIFO, socket,
file-descriptor link or dangling symbolic link (also not with -f), never an input (--ceilings too), a file
created while the command ran is never destroyed, and SIGTERM mid-write leaves no temporary file."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from conftest import DATA, HANG_S, ROOT, error_sentence, run_cli
from kernelscope.model.files import OutputFileError, check_output, write_atomic

SESSION = DATA / "session_h100_mixed.json.gz"


def _fifo(d: Path) -> Path:
    os.mkfifo(d / "fifo")
    return d / "fifo"


def _null_link(d: Path) -> Path:
    (d / "mynull").symlink_to("/dev/null")
    return d / "mynull"


def _dangling(d: Path) -> Path:
    (d / "dangling").symlink_to(d / "nowhere.json")
    return d / "dangling"


def _socket(d: Path) -> Path:
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(d / "sock"))
    s.close()
    return d / "sock"


SPECIAL = {"fifo": _fifo, "symlink to /dev/null": _null_link, "dangling symlink": _dangling, "socket": _socket}


def _what_it_is(p: Path) -> tuple:
    st = os.lstat(p)
    return (stat.S_IFMT(st.st_mode), os.readlink(p) if stat.S_ISLNK(st.st_mode) else None,
            stat.S_IFMT(os.stat(p).st_mode) if p.exists() else None)


@pytest.mark.parametrize("force", [[], ["-f"]])
@pytest.mark.parametrize("kind", sorted(SPECIAL))
def test_export_never_replaces_a_special_file(session_file, tmp_path, kind, force):
    target = SPECIAL[kind](tmp_path)
    before = _what_it_is(target)
    code, out, err = run_cli("export", str(session_file), "-o", str(target), *force)
    assert code == 2, err
    line = error_sentence(err)
    assert any(w in line for w in ("not a regular file", "does not exist", "already exists")), line
    assert _what_it_is(target) == before  # still the FIFO / the link to /dev/null / the dangling link
    assert not (tmp_path / "nowhere.json").exists()  # a dangling link is never followed
    assert not [f for f in tmp_path.iterdir() if f.name.endswith(".partial")]


def test_a_character_device_made_with_mknod_is_never_replaced(session_file, tmp_path):
    dev = tmp_path / "mynull"
    try:
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except (PermissionError, OSError):
        pytest.skip("mknod is not permitted here")
    code, _, err = run_cli("report", str(session_file), "-o", str(dev), "-f")
    assert code == 2 and "a character device, not a regular file" in error_sentence(err)
    assert stat.S_ISCHR(os.lstat(dev).st_mode)


@pytest.mark.parametrize("name", ["/proc/self/fd/1", "/dev/fd/2", "-", "/dev/stdout"])
def test_fd_links_and_stdout_spellings_are_refused(session_file, name):
    code, out, err = run_cli("export", str(session_file), "-o", name, "-f")
    assert code == 2 and out == ""
    assert any(w in error_sentence(err) for w in ("file-descriptor", "standard stream")), err


def test_write_atomic_refuses_a_special_file_even_with_force(tmp_path):
    fifo = _fifo(tmp_path)
    with pytest.raises(OutputFileError, match="FIFO"):
        write_atomic(fifo, b"data", force=True)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    with pytest.raises(OutputFileError, match="symbolic link to a file that does not exist"):
        check_output(_dangling(tmp_path))


def test_a_name_over_255_bytes_is_one_sentence(session_file, tmp_path):
    code, _, err = run_cli("export", str(session_file), "-o", str(tmp_path / ("x" * 300 + ".json")))
    assert code == 2 and "at most 255 bytes" in error_sentence(err)


def test_width_is_bounded(session_file):
    code, out, err = run_cli("show", str(session_file), "--width", "99999999999")
    assert code == 2 and "at most 10000 columns" in err and "Traceback" not in err and out == ""


# -- every file a command reads is an input ---------------------------------------------------------------------
def test_the_ceilings_file_is_an_input_of_report_and_show(session_file, tmp_path):
    ceilings = tmp_path / "c.json"
    shutil.copy(DATA / "ceilings_h100.json", ceilings)
    before = ceilings.read_bytes()
    code, _, err = run_cli("report", str(session_file), "--ceilings", str(ceilings), "-o", str(ceilings), "-f")
    assert code == 2 and "is also an input" in error_sentence(err)
    pytest.importorskip("matplotlib")
    code, out, err = run_cli("show", str(session_file), "--ceilings", str(ceilings), "--roofline-png", str(ceilings),
                              "-f")
    assert code == 2 and "is also an input" in error_sentence(err) and out == ""
    assert ceilings.read_bytes() == before


# -- no-clobber without -f is exclusive -------------------------------------------------------------------------
def test_a_file_created_during_the_write_is_never_destroyed_without_force(tmp_path):
    target = tmp_path / "out.json"
    check_output(target)  # free when checked

    def slow(f):
        f.write(b"new")
        target.write_text("someone else's")  # created between the check and the move into place

    with pytest.raises(OutputFileError, match="created by something else"):
        write_atomic(target, slow, force=False)
    assert target.read_text() == "someone else's"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]  # no temporary file either


def test_two_writers_without_force_cannot_both_win(tmp_path):
    target = tmp_path / "out.json"
    results: dict[str, str] = {}
    inside = threading.Barrier(2)

    def writer(name: str) -> None:
        def data(f):
            f.write(name.encode())
            inside.wait(timeout=HANG_S)  # both have checked and written; both now try to take the name
        try:
            write_atomic(target, data, force=False)
            results[name] = "won"
        except OutputFileError:
            results[name] = "refused"

    threads = [threading.Thread(target=writer, args=(n,)) for n in ("a", "b")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=HANG_S)
    assert sorted(results.values()) == ["refused", "won"]
    winner = next(n for n, r in results.items() if r == "won")
    assert target.read_text() == winner
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json"]


def test_export_without_force_keeps_a_file_that_appeared_meanwhile(session_file, tmp_path, monkeypatch):
    out = tmp_path / "trace.json"
    from kernelscope.render import chrome_trace

    real = chrome_trace.ChromeTrace.write_json

    def racing(self, f):
        out.write_text("appeared meanwhile")
        return real(self, f)

    monkeypatch.setattr(chrome_trace.ChromeTrace, "write_json", racing)
    code, _, err = run_cli("export", str(session_file), "-o", str(out))
    assert code == 2 and "created by something else" in error_sentence(err)
    assert out.read_text() == "appeared meanwhile"


# -- names from a session or a results file in output paths ------------------------------------------------
def test_a_device_name_longer_than_a_file_name_is_drawn(tmp_path, monkeypatch):
    d = json.loads(gzip.decompress(SESSION.read_bytes()))
    d["device"]["name"] = "NVIDIA " + "H" * 400  # the ceilings cache path was over 255 bytes
    p = tmp_path / "long.json"
    p.write_text(json.dumps(d))
    monkeypatch.setenv("KERNELSCOPE_CACHE_DIR", str(tmp_path / "cache"))
    code, out, err = run_cli("show", str(p), "--width", "120", "--no-color")
    assert code == 0 and "internal error" not in err, err
    from kernelscope.collect.calibrate.ceilings import CeilingKey

    name = CeilingKey(d["device"]["name"], "550.1", 1980).file_name()
    assert len(name.encode()) <= 255 and name != CeilingKey("NVIDIA " + "H" * 401, "550.1", 1980).file_name()


def test_plot_names_from_the_results_file_stay_inside_the_output_dir(tmp_path):
    """The benchmark name in a results file became the PNGs' name prefix as it was: '../x' wrote beside
    --output-dir, not in it."""
    pytest.importorskip("matplotlib")
    d = json.loads((DATA / "bench_attention_h100.json").read_text())
    d["benchmark"] = "../escaped\x1b[31m"
    results = tmp_path / "r.json"
    results.write_text(json.dumps(d))
    out = tmp_path / "plots"
    code, stdout, err = run_cli("plot", str(results), "--output-dir", str(out))
    assert code == 0, err
    written = sorted(p.name for p in out.iterdir())
    assert written and all(n.startswith("escaped-31m_") for n in written)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plots", "r.json"]  # nothing beside it
    assert "\x1b" not in stdout + err


def test_run_keep_trace_is_an_output_like_the_session(tmp_path):
    """--keep-trace FILE was os.replace()d into place unchecked: over a FIFO or device, over a file without -f,
    and not at all across file systems."""
    script = tmp_path / "w.py"
    script.write_text("print('hi')\n")
    fifo = _fifo(tmp_path)
    for target, extra, phrase in ((fifo, ["-f"], "not a regular file"), (script, ["-f"], "is also an input"),
                                  (tmp_path / "dangling", [], "does not exist")):
        if target.name == "dangling":
            _dangling(tmp_path)
        code, _, err = run_cli("run", "-o", str(tmp_path / "s.json"), "--keep-trace", str(target), *extra, "--",
                                sys.executable, str(script))
        assert code == 2 and phrase in error_sentence(err), err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and not (tmp_path / "s.json").exists()
    from kernelscope.collect.trace.recorder import _keep  # what the trace pass does with the trace (needs CUDA)

    trace = tmp_path / "trace.json"
    trace.write_text('{"traceEvents": []}')
    _keep(str(trace), str(tmp_path / "kept.json"))
    assert json.loads((tmp_path / "kept.json").read_text()) == {"traceEvents": []}
    _keep(str(trace), str(fifo))  # a FIFO appeared after the check: said, never replaced
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert not [f for f in tmp_path.iterdir() if f.name.endswith(".partial")]


def test_run_never_replaces_a_session_file_created_while_the_workload_ran(tmp_path):
    """Issue 37 item 5: `run` checked the name before the workload and renamed after it, so a file created in
    between was destroyed without -f. Now the session is moved into place only onto a free name."""
    out = tmp_path / "s.json"
    script = tmp_path / "w.py"
    script.write_text(f"open({str(out)!r}, 'w').write('mine')\n")  # the workload takes the name itself
    code, _, err = run_cli("run", "-o", str(out), "--", sys.executable, str(script))
    assert code == 2 and "created by something else" in error_sentence(err), err
    assert out.read_text() == "mine"
    kept = [p for p in tmp_path.iterdir() if p.name.startswith(".kernelscope-run-")]
    assert len(kept) == 1 and str(kept[0]) in err  # what was collected is not lost: named in the sentence
    from kernelscope.model import Session

    assert Session.load(kept[0]).command == [sys.executable, str(script)]
    code, _, err = run_cli("run", "-o", str(out), "-f", "--", sys.executable, str(script))
    assert code == 0, err
    assert Session.load(out).command == [sys.executable, str(script)]  # -f: the run's session replaces it
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".kernelscope-run-")] == [kept[0].name]


def test_run_leaves_no_private_file_behind(tmp_path):
    script = tmp_path / "w.py"
    script.write_text("print('hi')\n")
    code, _, err = run_cli("run", "-o", str(tmp_path / "s.json"), "--", sys.executable, str(script))
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.json", "w.py"]


def test_kept_trace_honours_no_clobber_from_the_parent(tmp_path, monkeypatch, capsys):
    from kernelscope.collect.trace.recorder import KEEP_TRACE_NO_CLOBBER, _keep

    trace = tmp_path / "trace.json"
    trace.write_text('{"traceEvents": []}')
    kept = tmp_path / "kept.json"
    kept.write_text("appeared meanwhile")
    monkeypatch.setenv(KEEP_TRACE_NO_CLOBBER, "1")  # run without -f
    _keep(str(trace), str(kept))
    assert kept.read_text() == "appeared meanwhile" and "was not kept" in capsys.readouterr().err
    monkeypatch.setenv(KEEP_TRACE_NO_CLOBBER, "0")  # run -f
    _keep(str(trace), str(kept))
    assert json.loads(kept.read_text()) == {"traceEvents": []}


def test_bench_results_first_write_honours_force(tmp_path):
    """`bench` saves after every row: the first save must not replace a file that appeared since the check."""
    from kernelscope.bench.results import BenchResults
    from kernelscope.cli.bench.common import ResultsWriter

    out = tmp_path / "r.json"
    out.write_text("appeared meanwhile")
    results = BenchResults(benchmark="attention", environment={}, settings={})
    with pytest.raises(SystemExit) as e:
        ResultsWriter(out, force=False)(results)
    assert e.value.code == 2 and out.read_text() == "appeared meanwhile"
    out.unlink()
    save = ResultsWriter(out, force=False)
    save(results)
    save(results)  # later rows replace the file this command wrote
    assert json.loads(out.read_text())["benchmark"] == "attention"


def test_an_empty_output_name_is_refused_not_replaced_by_the_default(tmp_path):
    """`import TRACE -o ""` (an unset variable in a script) wrote the default file next to the input and exited 0;
    an empty name is given, so it is checked like any other and refused."""
    trace = tmp_path / "t.pt.trace.json.gz"
    shutil.copy(DATA / "trace_h100_mixed.json.gz", trace)
    code, _, err = run_cli("import", str(trace), "-o", "")
    assert code == 2 and "internal error" not in err and "give a file name" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t.pt.trace.json.gz"]


# -- stdout that cannot be written: a full disk, a closed pipe, an encoding without the characters --------------
STDOUT_COMMANDS = {
    "show": ["show", str(SESSION), "--no-color"],
    "show --json": ["show", str(SESSION), "--json"],
    "learn": ["learn", "marlin", "--no-color"],
    "occupancy": ["occupancy", "--arch", "sm_90", "--block", "256", "--regs", "32"],
    "diff": ["diff", str(SESSION), str(SESSION), "--no-color"],
}


def _kernelscope(argv: list[str], stdout, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m kernelscope` with stdout where the test says, stderr captured as bytes."""
    full_env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), **(env or {}))
    for name in ("PYTHONIOENCODING", "FORCE_COLOR", "KERNELSCOPE_DEBUG"):
        if name not in (env or {}):
            full_env.pop(name, None)
    return subprocess.run([sys.executable, "-m", "kernelscope", *argv], stdout=stdout, stderr=subprocess.PIPE,
                          cwd=ROOT, env=full_env, timeout=HANG_S)


def _needs_of(command: str) -> None:
    """`learn marlin` reads its bundled session with torch (the CI's first pass has none): skipped there."""
    if command == "learn":
        pytest.importorskip("torch")


@pytest.mark.parametrize("command", sorted(STDOUT_COMMANDS))
def test_a_full_stdout_is_one_sentence(command):
    """`show > /dev/full` printed 'internal error: OSError: [Errno 28]' and exit 1, as for a bug."""
    _needs_of(command)
    with open("/dev/full", "w") as full:
        r = _kernelscope(STDOUT_COMMANDS[command], full)
    err = r.stderr.decode()
    assert r.returncode == 2, err
    assert err == "kernelscope: error: cannot write to stdout: No space left on device.\n", err


@pytest.mark.parametrize("command", sorted(STDOUT_COMMANDS))
def test_a_closed_pipe_ends_every_command_quietly(command):
    """`occupancy | true` exited 1 (Rich's own handling) where `show | true` exited 0: every command alike."""
    _needs_of(command)
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write: every write is EPIPE
    try:
        r = _kernelscope(STDOUT_COMMANDS[command], write_end)
    finally:
        os.close(write_end)
    assert r.returncode == 0 and r.stderr == b"", r.stderr.decode()


@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "ascii"}, {"PYTHONIOENCODING": "latin-1"},
                                 {"LC_ALL": "C", "LANG": "C", "PYTHONUTF8": "0"}], ids=["ascii", "latin-1", "C"])
@pytest.mark.parametrize("command", ["show", "occupancy", "diff"])
def test_a_stdout_without_utf8_still_gets_the_output(command, env):
    """A stdout whose encoding cannot hold the box drawing, µ or · gave 'internal error: UnicodeEncodeError'; now
    what it cannot hold is written as escapes, in its own encoding."""
    r = _kernelscope(STDOUT_COMMANDS[command], subprocess.PIPE, env)
    err = r.stderr.decode("utf-8", "replace")
    assert r.returncode == 0 and "internal error" not in err and "Traceback" not in err, err
    encoding = env.get("PYTHONIOENCODING", "ascii")
    out = r.stdout.decode(encoding)  # in the encoding asked for, every byte
    assert len(out.splitlines()) > 5
    if command == "occupancy":
        assert "theoretical occupancy on sm_90" in out
    if encoding == "ascii":  # escapes where ASCII has no character (·, µ, ×, —), never the character
        assert "\\xb7" in out or "\\xb5" in out


@pytest.mark.parametrize("command", ["show", "diff", "occupancy"])
def test_a_command_started_with_stdout_closed_drops_its_output_like_print(command, tmp_path):
    """`kernelscope show A >&-`: Python then has no sys.stdout (None); show printed 'internal error: AttributeError'
    where diff (Rich drops the output) and export (print() drops its line) exit 0. Every command alike: exit 0."""
    full_env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))

    def closed_stdout(argv: list[str]) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "kernelscope", *argv], stdout=None, stderr=subprocess.PIPE,
                              cwd=ROOT, env=full_env, timeout=HANG_S, preexec_fn=lambda: os.close(1))

    r = closed_stdout(STDOUT_COMMANDS[command])
    assert r.returncode == 0 and r.stderr == b"", r.stderr.decode()
    r = closed_stdout(["export", str(SESSION), "-o", str(tmp_path / "t.json")])
    assert r.returncode == 0 and (tmp_path / "t.json").stat().st_size > 0, r.stderr.decode()
