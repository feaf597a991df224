"""Test setup: GPU tests are skipped without CUDA; Triton runs in its CPU interpreter."""
from __future__ import annotations

import contextlib
import gzip
import io
import os
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
sys.path.insert(0, str(ROOT / "src"))


def _cuda() -> bool:
    try:
        import torch
    except ImportError:
        return False
    return bool(torch.cuda.is_available())


HAS_CUDA = _cuda()

# Repeatable runs: Hypothesis draws the same examples every run (profile "ci", the default), and tests with random
# inputs take their seed from input_seed(). A search for new failures: KERNELSCOPE_FUZZ_EXAMPLES=N (the fuzz suite's
# long run; profile "search", random examples, --hypothesis-seed honoured) and KERNELSCOPE_TEST_SEED=random.
try:
    from hypothesis import settings as _hypothesis_settings
except ImportError:  # the test extra installs it; without it the fuzz suite is not collected
    _hypothesis_settings = None
if _hypothesis_settings is not None:
    _hypothesis_settings.register_profile("ci", derandomize=True, database=None)
    _hypothesis_settings.register_profile("search", derandomize=False, database=None)
    _hypothesis_settings.load_profile(os.environ.get(
        "KERNELSCOPE_HYPOTHESIS_PROFILE", "search" if "KERNELSCOPE_FUZZ_EXAMPLES" in os.environ else "ci"))


@pytest.fixture(autouse=True)
def _same_random_state() -> None:
    """Each test starts from the same random state whatever ran before it: Python's, and numpy's and torch's global
    generators where the test process has imported them (a test that draws without its own seed still repeats)."""
    random.seed(0)
    if (np := sys.modules.get("numpy")) is not None:
        np.random.seed(0)
    if (torch := sys.modules.get("torch")) is not None:
        torch.manual_seed(0)


def input_seed() -> int:
    """The seed of a test's random inputs: KERNELSCOPE_TEST_SEED (an integer, or "random" for a fresh one per call),
    else 0. Tests print it when they fail, so a failure of a random run reruns with KERNELSCOPE_TEST_SEED=that."""
    value = os.environ.get("KERNELSCOPE_TEST_SEED", "0")
    return secrets.randbelow(2**31) if value == "random" else int(value)


if not HAS_CUDA:
    # Must be set before triton is imported anywhere in the test process.
    os.environ.setdefault("TRITON_INTERPRET", "1")


def _gpu_count() -> int:
    if not HAS_CUDA:
        return 0
    import torch

    return torch.cuda.device_count()


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (pyproject's addopts) spreads the suite over the CPU cores; where a CUDA GPU is present the tests run
    in one process, since the GPU tests share the device and time what runs on it."""
    return 0 if HAS_CUDA else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _gpu_count() < 2:
        few = pytest.mark.skip(reason="needs 2 or more NVIDIA GPUs")
        for item in items:
            if "multigpu" in item.keywords:
                item.add_marker(few)
    if HAS_CUDA:
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU with CUDA")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


def default_signals() -> None:
    """Popen preexec_fn: give the child the default actions of SIGINT, SIGTERM and SIGHUP, as a terminal's
    foreground job has.

    A shell starts background jobs (`pytest &`, CI runners) with SIGINT ignored, and `nohup` starts them with
    SIGHUP ignored; children inherit that, so the signal a test sends would do nothing and the test would hang.
    Tests that signal a child start it through this.
    """
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


SNAPSHOTS = ROOT / "tests" / "snapshots"


def assert_snapshot(name: str, text: str, width: int = 120) -> None:
    """Compare terminal text with tests/snapshots/NAME; UPDATE_SNAPSHOTS=1 rewrites it.

    A missing snapshot is written and the test fails, so a new one is always reviewed.
    """
    assert max((len(line) for line in text.splitlines()), default=0) <= width
    snap = SNAPSHOTS / name
    if os.environ.get("UPDATE_SNAPSHOTS") or not snap.exists():
        snap.parent.mkdir(exist_ok=True)
        snap.write_text(text)
        if not os.environ.get("UPDATE_SNAPSHOTS"):
            pytest.fail(f"snapshot {snap.name} was missing and has been written; review and commit it")
    assert text == snap.read_text()


class CliResult(NamedTuple):
    """What a command left: its exit code and what it wrote (unpacks as ``code, out, err``)."""
    returncode: int
    stdout: str
    stderr: str


class _Hang(BaseException):  # not an Exception: the CLI's "internal error" handler must not catch it
    pass


def _hang(signum, frame):
    raise _Hang()


HANG_S = 300  # a command still running after this long is stuck (a blocking open, a loop), not slow


def run_cli(*args: str, env: dict[str, str] | None = None, cwd: str | Path | None = None) -> CliResult:
    """`kernelscope ARGS` through its main() in this process, as the console script calls it: exit code, stdout,
    stderr. Descriptors 1 and 2 go to files for the call, so a workload that `run` starts writes there too, in
    order with the command's own output. ENV is added to the environment and CWD is the working directory (default:
    the checkout) for the call only. A command stuck past HANG_S fails the test instead of hanging the run. Tests of
    what only a real process shows (signals, a closed stdout, the interpreter's exit, start-up) use run_cli_process."""
    from kernelscope.cli import main

    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    os.environ.update(env or {})
    os.chdir(cwd or ROOT)
    files = [tempfile.TemporaryFile(), tempfile.TemporaryFile()]
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    saved_fds = [os.dup(1), os.dup(2)]
    streams = [io.TextIOWrapper(open(os.dup(f.fileno()), "wb"), encoding="utf-8", write_through=True) for f in files]
    old = signal.signal(signal.SIGALRM, _hang)
    try:
        for fd, f in zip((1, 2), files):
            os.dup2(f.fileno(), fd)
        signal.setitimer(signal.ITIMER_REAL, HANG_S)
        with contextlib.redirect_stdout(streams[0]), contextlib.redirect_stderr(streams[1]):
            try:
                code = main(list(args))
            except SystemExit as e:  # argparse's usage errors and fail(): exit codes, as the process would end
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except _Hang:
        pytest.fail(f"kernelscope {' '.join(args)} was still running after {HANG_S} s")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        for fd, saved in zip((1, 2), saved_fds):
            os.dup2(saved, fd)
            os.close(saved)
        for stream in streams:
            with contextlib.suppress(OSError, ValueError):
                stream.close()
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    texts = []
    for f in files:
        f.seek(0)
        texts.append(f.read().decode("utf-8", "replace"))
        f.close()
    return CliResult(code, *texts)


def shown(path: str | Path, *args: str) -> str:
    """What `kernelscope show PATH ARGS` prints (run_cli), which must succeed."""
    r = run_cli("show", str(path), *args)
    assert r.returncode == 0, r.stderr
    return r.stdout


def recorded_session_files(*folders: Path) -> list[Path]:
    """The kernelscope session files under FOLDERS, sorted (.json, then .json.gz): those that name the session
    format in their first bytes, read without loading them (collection stays quick); traces, ceilings, snapshots
    and results are other files. A session among them that does not load fails the test that loads it."""
    out = []
    for folder in folders:
        for path in sorted(folder.rglob("*.json")) + sorted(folder.rglob("*.json.gz")):
            with (gzip.open(path) if path.suffix == ".gz" else open(path, "rb")) as f:
                if b'"kernelscope-session"' in f.read(4096):
                    out.append(path)
    return out


def run_cli_process(*args: str, env: dict[str, str] | None = None, cwd: str | Path | None = None,
                    **kw) -> subprocess.CompletedProcess:
    """`python -m kernelscope ARGS` from this checkout in a child process, for what only a process shows."""
    full_env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), **(env or {}))
    return subprocess.run([sys.executable, "-m", "kernelscope", *args], capture_output=True, text=True,
                          cwd=cwd or ROOT, env=full_env, **kw)


def draw(renderable, width: int = 120) -> str:
    """A renderable drawn as kernelscope draws it, without colour, at WIDTH columns."""
    from kernelscope.render.console import make_console

    buf = io.StringIO()
    make_console(width=width, file=buf, color=False).print(renderable)
    return buf.getvalue()


def one_sentence_error(r) -> str:
    """Bad input: exit 2, no traceback, exactly one 'kernelscope: error: ...' sentence; returns it."""
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kernelscope: error: ") and lines[0].endswith("."), r.stderr
    return lines[0]


def error_sentence(stderr: str) -> str:
    """The one `kernelscope: error: ...` line of a command's stderr (notes may come before it), with no traceback
    and no internal error; a sentence that goes on after a full stop ends with one."""
    lines = [ln for ln in stderr.splitlines() if ln.startswith("kernelscope: error:")]
    assert len(lines) == 1 and "Traceback" not in stderr and "internal error" not in stderr, stderr
    assert lines[0].count(". ") == 0 or lines[0].endswith("."), stderr
    return lines[0]


@pytest.fixture
def session_file(tmp_path: Path) -> Path:
    """A copy of a recorded session (H100, tests/data/session_h100_mixed.json.gz) that a test may overwrite."""
    p = tmp_path / "run.json.gz"
    shutil.copy(DATA / "session_h100_mixed.json.gz", p)
    return p
