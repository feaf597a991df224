"""Hostile inputs (issue 37, items 2, 6, 7): every reader takes regular files only and reads a bounded amount.

A FIFO, /dev/zero, /dev/urandom or a directory given to any command that reads a file, and a gzip bomb, each
get one sentence and exit 2 within seconds, in a process whose address space is capped (RLIMIT_AS), so an
unbounded read would fail with MemoryError or be killed instead of passing. Element counts that size what the
analyses build (`sm_count: 1e9`) are bounded at load and the field is named.
"""
from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import DATA, HANG_S, ROOT, run_cli
from kernelscope.model.files import DEFAULT_INPUT_LIMIT_MB, INPUT_LIMIT_ENV, InputFileError, read_input

SESSION = DATA / "session_h100_mixed.json.gz"
MiB = 1 << 20

# Runs commands in one process under an address-space cap; prints each exit code and stderr as JSON.
_CAPPED = r"""
import contextlib, io, json, resource, signal, sys
cap = int(sys.argv[1])
from kernelscope.cli import main
with contextlib.redirect_stdout(io.StringIO()):  # the libraries a session view loads, loaded before the cap
    main(["show", sys.argv[3], "--width", "100"])
resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
out = []
for argv in json.loads(sys.argv[2]):
    err = io.StringIO()
    signal.alarm(int(sys.argv[4]))  # a read that blocks (a FIFO) is stuck: the alarm kills the process, the test fails
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
    signal.alarm(0)
    out.append({"argv": argv, "code": code, "err": err.getvalue()})
def peak_mib():
    # VmHWM is this program's own peak: ru_maxrss also counts the parent it was forked from (Linux keeps the larger
    # across exec), so a test process grown by earlier tests would be charged to the reader
    try:
        with open("/proc/self/status") as f:
            return next(int(ln.split()[1]) for ln in f if ln.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration, ValueError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"runs": out, "max_rss_mib": peak_mib()}))
"""


def _capped(argvs: list[list[str]], cap_mib: int, env: dict[str, str]) -> dict:
    r = subprocess.run([sys.executable, "-c", _CAPPED, str(cap_mib * MiB), json.dumps(argvs), str(SESSION),
                        str(HANG_S)], capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **env})
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.splitlines()[-1])


def _one_sentence(run: dict) -> str:
    err = run["err"]
    assert "Traceback" not in err and "internal error" not in err and "MemoryError" not in err, run
    lines = [ln for ln in err.splitlines() if ln.startswith("kernelscope: error:")]
    assert run["code"] == 2 and len(lines) == 1, run
    return lines[0]


def gzip_bomb(path: Path, decompressed_mib: int, head: bytes = b'{"format":"kernelscope-session","x":"') -> Path:
    """A gzip file of a few hundred KiB that inflates to ``decompressed_mib`` MiB: gzip members, concatenated
    (gzip readers read them as one stream), each of one MiB-run of the same byte."""
    member = gzip.compress(b"a" * (16 * MiB), compresslevel=9, mtime=0)
    with open(path, "wb") as f:
        f.write(gzip.compress(head, mtime=0))
        for _ in range(decompressed_mib // 16 + 1):
            f.write(member)
    return path


def _commands(bad: str, tmp: Path, session: Path) -> list[list[str]]:
    return [["show", bad], ["show", bad, "--json"], ["export", bad, "-o", str(tmp / "t.json")],
            ["report", bad, "-o", str(tmp / "r.html")], ["diff", bad, bad], ["diff", str(session), bad],
            ["merge", bad, str(session), "-o", str(tmp / "m.json")], ["import", bad, "-o", str(tmp / "i.json")],
            ["plot", bad, "--output-dir", str(tmp / "plots")], ["show", str(session), "--ceilings", bad],
            ["report", str(session), "--ceilings", bad, "-o", str(tmp / "r2.html")]]


@pytest.fixture(scope="module")
def hostile_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("hostile_inputs")
    os.mkfifo(d / "fifo")
    (d / "directory").mkdir()
    gzip_bomb(d / "bomb.json.gz", 256)
    shutil.copy(SESSION, d / "s.json.gz")
    return d


@pytest.mark.slow
@pytest.mark.parametrize("bad", ["fifo", "/dev/zero", "/dev/urandom", "directory", "bomb.json.gz"])
def test_every_reader_refuses_under_a_memory_cap(hostile_dir, bad):
    path = bad if bad.startswith("/") else str(hostile_dir / bad)
    result = _capped(_commands(path, hostile_dir, hostile_dir / "s.json.gz"), 768, {INPUT_LIMIT_ENV: "64"})
    for run in result["runs"]:
        line = _one_sentence(run)
        if bad in ("fifo", "/dev/zero", "/dev/urandom"):
            assert "not a regular file" in line, run
        if bad == "bomb.json.gz" and run["argv"][0] != "import":
            assert "more than 64 MiB once decompressed" in line and INPUT_LIMIT_ENV in line, run
    assert result["max_rss_mib"] < 400, result["max_rss_mib"]  # 64 MiB of input, never the 256 MiB of the bomb
    assert not (hostile_dir / "t.json").exists() and not (hostile_dir / "i.json").exists()


@pytest.mark.slow
def test_the_default_limit_bounds_a_bomb_larger_than_it(tmp_path):
    """Without the variable: a 1.1 GiB bomb stops at 1 GiB read, in one sentence, under a 1.6 GiB cap."""
    bomb = gzip_bomb(tmp_path / "bomb.json.gz", DEFAULT_INPUT_LIMIT_MB + 64)
    assert bomb.stat().st_size < 2 * MiB
    env = {k: v for k, v in os.environ.items() if k != INPUT_LIMIT_ENV}
    result = _capped([["show", str(bomb)]], 1600, {**env, INPUT_LIMIT_ENV: ""})
    line = _one_sentence(result["runs"][0])
    assert f"more than {DEFAULT_INPUT_LIMIT_MB} MiB once decompressed" in line
    assert result["max_rss_mib"] < DEFAULT_INPUT_LIMIT_MB + 300, result["max_rss_mib"]


def test_read_input_is_bounded_and_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv(INPUT_LIMIT_ENV, "1")
    plain = tmp_path / "big.json"
    plain.write_bytes(b"[" + b"0," * MiB + b"0]")
    with pytest.raises(InputFileError, match=f"more than 1 MiB, the input limit; set {INPUT_LIMIT_ENV}"):
        read_input(plain)
    small = tmp_path / "small.json.gz"
    small.write_bytes(gzip.compress(b'{"a": 1}'))
    assert json.loads(read_input(small)) == {"a": 1}
    monkeypatch.setenv(INPUT_LIMIT_ENV, "lots")
    with pytest.raises(InputFileError, match="must be a positive number of MiB"):
        read_input(small)
    monkeypatch.setenv(INPUT_LIMIT_ENV, "0.5")
    truncated = tmp_path / "cut.json.gz"
    truncated.write_bytes(gzip.compress(b'{"a": 1}' * 100)[:-12])
    with pytest.raises(InputFileError) as e:
        read_input(truncated)
    assert e.value.damaged


def test_a_bad_limit_variable_is_one_sentence(monkeypatch):
    monkeypatch.setenv(INPUT_LIMIT_ENV, "-3")
    code, _, err = run_cli("show", str(SESSION))
    assert code == 2 and "must be a positive number of MiB" in _one_sentence({"code": code, "err": err})


def _session_doc(name: str = "session_h100_instrumented.json.gz") -> dict:
    return json.loads(gzip.decompress((DATA / name).read_bytes()))


@pytest.mark.slow
@pytest.mark.parametrize("value", ["1e9", "1000000000", "1e400"])
def test_sm_count_is_bounded_at_load_and_named(tmp_path, value):
    d = _session_doc()
    d["device"]["attributes"]["sm_count"]["value"] = "SM_COUNT"
    p = tmp_path / "sm.json"
    p.write_text(json.dumps(d).replace('"SM_COUNT"', value))
    result = _capped([["show", str(p), "--width", "120"]], 768, {})
    run = result["runs"][0]
    assert run["code"] == 0, run
    assert "device.attributes.sm_count" in run["err"] and "Traceback" not in run["err"], run
    from kernelscope.model import Session

    assert Session.load(p).device.value("sm_count") is None  # left out, said: never a billion-entry tuple


def test_a_grid_of_2_to_the_62_blocks_does_not_walk_the_grid():
    """measured_layout counts the blocks without records; it listed every one of them (range(grid))."""
    import dataclasses

    from kernelscope.analyze.sm_layout import measured_layout
    from kernelscope.model import Session

    s = Session.load(DATA / "session_h100_instrumented.json.gz")
    x = next(x for x in s.launches if x.block_records is not None)
    huge = (2**31 - 1, 2**31 - 1, 1)
    x = dataclasses.replace(x, grid=huge, block_records=dataclasses.replace(x.block_records, grid=huge))
    m = measured_layout(x, 132)
    check = next(c for c in m.checks if c.name == "every block recorded")
    assert not check.ok and "more" in check.detail and f"{(2**31 - 1) ** 2:,}" in check.detail


# -- imported traces: values a session file cannot hold (items 6 and 7) -----------------------------------------
def _trace_with(tmp: Path, name: str, edit) -> Path:
    doc = json.loads(gzip.decompress((DATA / "ranks" / "job2_rank0.pt.trace.json.gz").read_bytes()))
    text = edit(doc)
    p = tmp / name
    p.write_text(text if isinstance(text, str) else json.dumps(doc))
    return p


def test_a_rank_of_1e400_is_not_an_overflow(tmp_path):
    def edit(doc):
        doc["distributedInfo"]["rank"] = "RANK"
        return json.dumps(doc).replace('"RANK"', "1e400")
    trace = _trace_with(tmp_path, "t.json", edit)
    out = tmp_path / "t.session.json"
    code, _, err = run_cli("import", str(trace), "-o", str(out))
    assert "internal error" not in err and "Traceback" not in err and code in (0, 2), err
    if code == 0:
        code, _, err = run_cli("show", str(out), "--json")
        assert code == 0, err


@pytest.mark.parametrize("case", ["base time 1e30", "NaN in pg_config", "nesting deeper than 32"])
def test_what_import_writes_loads(tmp_path, case):
    def edit(doc):
        if case == "base time 1e30":
            doc["baseTimeNanoseconds"] = "BIG"
            return json.dumps(doc).replace('"BIG"', "1e30")
        if case == "NaN in pg_config":
            doc["distributedInfo"]["pg_config"] = [{"pg_name": "0", "size": float("nan")}]
            return json.dumps(doc)
        deep: object = 1
        for _ in range(40):
            deep = {"d": deep}
        doc["distributedInfo"]["pg_config"] = [{"pg_name": "0", "deep": deep}]
        return json.dumps(doc)
    trace = _trace_with(tmp_path, "t.json", edit)
    out = tmp_path / "t.session.json"
    code, _, err = run_cli("import", str(trace), "-o", str(out))
    assert "internal error" not in err and "Traceback" not in err, err
    if code == 2:  # refused: one sentence naming the field, and nothing written
        assert not out.exists() and "would not load" in _one_sentence({"code": code, "err": err})
        return
    assert code == 0, err
    code, _, err = run_cli("show", str(out), "--json")
    assert code == 0 and "error" not in err, err


@pytest.mark.parametrize("name", ["session_h100_samples.json.gz", "session_h100_counters.json.gz"])
def test_a_launch_without_a_start_time_beside_gpu_samples(tmp_path, name):
    """Found by the long fuzz run: a launch with no start (the schema allows it: seen only by the counter pass)
    in a session with GPU samples was an internal error (sorting None with ints) in show and report."""
    d = json.loads(gzip.decompress((DATA / name).read_bytes()))  # a recorded schema-1 file: one object a launch
    del d["launches"][6]["start_ns"]
    p = tmp_path / "s.json"
    p.write_text(json.dumps(d))
    for argv in (["show", str(p), "--width", "120"], ["report", str(p), "-o", str(tmp_path / "r.html")]):
        code, _, err = run_cli(*argv)
        assert code == 0 and "internal error" not in err, err


def test_a_world_size_of_10_to_the_18_is_counted_not_listed(tmp_path):
    """join_ranks listed every rank without a trace (range(world_size)): a trace saying world size 10**18 never
    finished importing."""
    def edit(doc):
        doc["distributedInfo"]["world_size"] = 10**18
        return json.dumps(doc)
    trace = _trace_with(tmp_path, "t.json", edit)
    code, _, err = run_cli("import", str(trace), "-o", str(tmp_path / "s.json"))
    assert "internal error" not in err and code in (0, 2), err
    assert "999,999,999,999,999,999 of 1,000,000,000,000,000,000 ranks have no trace" in err
    assert "and 999,999,999,999,999,983 more" in err


@pytest.mark.parametrize("regex", ["a{99999999999}", "(" * 1000 + ")" * 1000])
@pytest.mark.parametrize("command", ["show", "report", "diff"])
def test_a_regex_re_refuses_without_re_error_is_one_sentence(tmp_path, command, regex):
    """re.compile raises OverflowError for a repetition past its limit and RecursionError for thousands of nested
    groups, not re.error: --kernel printed 'internal error' for them."""
    argv = {"show": ["show", str(SESSION)], "report": ["report", str(SESSION), "-o", str(tmp_path / "r.html")],
            "diff": ["diff", str(SESSION), str(SESSION)]}[command]
    code, _, err = run_cli(*argv, "--kernel", regex)
    assert code == 2 and "internal error" not in err and "is not a valid regular expression" in err, err
    assert not (tmp_path / "r.html").exists()


@pytest.mark.parametrize("pct", ["nan", "inf", "1e400", "-1"])
def test_fail_if_slower_takes_a_finite_percentage(pct):
    """`diff --fail-if-slower nan` exited 0 whatever the times (NaN compares false with everything): a CI gate
    that never fails."""
    code, _, err = run_cli("diff", str(SESSION), str(SESSION), "--fail-if-slower", pct)
    assert code == 2 and "finite, non-negative percentage" in err, err


@pytest.mark.parametrize("name", ["newdir/", "afile/.", "afile/..", ".", "..", "a/b/"])
def test_an_output_name_that_names_a_directory_is_refused_before_path_drops_the_slash(tmp_path, monkeypatch, name):
    """Path() drops a trailing "/" and "/.": `report -o newdir/` wrote a file "newdir" and `export -o afile/. -f`
    overwrote afile, where open() refuses both."""
    from kernelscope.model.files import OutputFileError, check_output
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("keep")
    with pytest.raises(OutputFileError, match=f"^the output {re.escape(name)} names a directory"):
        check_output(name, force=True)
    assert check_output("newfile", force=True) == Path("newfile")


@pytest.mark.parametrize("name", ["newdir/", "afile/."])
@pytest.mark.parametrize("command", ["report", "export", "merge", "import", "run"])
def test_minus_o_naming_a_directory_is_one_sentence_and_writes_nothing(tmp_path, monkeypatch, command, name):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "afile").write_text("keep")
    argv = {"report": ["report", str(SESSION)], "export": ["export", str(SESSION)],
            "merge": ["merge", str(SESSION), str(SESSION)],
            "import": ["import", str(DATA / "trace_h100_mixed.json.gz")],
            "run": ["run", "--", sys.executable, "-c", "pass"]}[command]
    if command == "run":  # run's options come before the command it runs
        argv = ["run", "-o", name, "-f", *argv[1:]]
        code, _, err = run_cli(*argv)
        assert code == 2 and f"{name} names a directory" in err, err
        assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"] and (tmp_path / "afile").read_text() == "keep"
        return
    code, _, err = run_cli(*argv, "-o", name, "-f")
    assert code == 2 and err.startswith("kernelscope: error: the ") and f"{name} names a directory" in err, err
    assert len(err.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["afile"] and (tmp_path / "afile").read_text() == "keep"
