"""Fuzz suite: every reader, fed mutated copies of real recorded files, answers with a result or one sentence.

Sessions go through `show`, `show --json`, `show --timeline`, `export` and `diff`; benchmark results
through `plot`; Nsight Compute reports through `import`; Kineto and Proton traces through the parsers
the trace pass uses. For each mutated input: no traceback, no hang (conftest.run_cli fails a stuck command),
exit 0 or exit 2 with one `kernelscope: error:` sentence, and a file cut short is never taken as whole.

The budget is fixed in CI; `KERNELSCOPE_FUZZ_EXAMPLES=2000` (examples per reader) runs a long search, and
`KERNELSCOPE_FUZZ_REPORT=FILE` writes the counts (benchmarks/results/RESULTS.md cites such a run).
"""
from __future__ import annotations

import gzip
import json
import lzma
import os
import sys
import unicodedata
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from conftest import DATA, run_cli
from fuzz_inputs import KERNEL_REGEXES, SPECIAL_FILES, Mutated, mutated_bytes, mutated_json, special_file

pytestmark = pytest.mark.slow

EXAMPLES = int(os.environ.get("KERNELSCOPE_FUZZ_EXAMPLES", "20"))
LONG_RUN = "KERNELSCOPE_FUZZ_EXAMPLES" in os.environ
# CI: the same examples every run (conftest's Hypothesis profile "ci"). A long run (profile "search"): random
# examples, no shrinking (inputs are large; the mutation's description already says what broke), every distinct
# failure reported.
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=list(HealthCheck), report_multiple_bugs=True,
                phases=[Phase.explicit, Phase.generate] if LONG_RUN else list(Phase))
TALLY: Counter = Counter()

SESSIONS = ["session_h100_mixed", "session_h100_counters", "session_h100_instrumented", "session_h100_proton",
            "session_h100_raises", "ranks/session_h200x2_run_torchrun"]  # the last: ranks, world size, collectives


def _doc(name: str) -> dict:
    return json.loads(gzip.decompress((DATA / name).read_bytes()))


# Characters no string from a file may put on stderr raw: terminal controls, bidi overrides, zero-width marks.
RAW_ON_STDERR = ("\x1b", "\x07", "\r", "\x08", "\x00", "\x9b", "\u202e", "\u200b", "\u200d", "\u200f", "\ufeff",
                 "\u2066", "\u2028")
def _invisible(c: str) -> bool:
    """A character no string from a file may put on stderr raw, by Unicode category: controls (but newline and
    tab), format characters (bidi, zero-width, ...), surrogates, line and paragraph separators."""
    return c not in "\n\t" and unicodedata.category(c) in ("Cc", "Cf", "Cs", "Zl", "Zp")


INPUT_LIMIT_MB = "64"  # the fuzz suite's input limit (KERNELSCOPE_MAX_INPUT_MB): a 256 MiB gzip bomb passes it


@pytest.fixture(scope="module", autouse=True)
def _input_limit():
    old = os.environ.get("KERNELSCOPE_MAX_INPUT_MB")
    os.environ["KERNELSCOPE_MAX_INPUT_MB"] = INPUT_LIMIT_MB
    yield
    if old is None:
        del os.environ["KERNELSCOPE_MAX_INPUT_MB"]
    else:
        os.environ["KERNELSCOPE_MAX_INPUT_MB"] = old


def check_answer(argv: list[str], m: Mutated, code: int, err: str) -> None:
    TALLY[f"{argv[0]}: exit {code}"] += 1
    where = f"kernelscope {' '.join(argv)} on a mutated input ({m.what})"
    assert "Traceback" not in err and "internal error" not in err, f"{where}: {err[-2000:]}"
    raw = [repr(c) for c in RAW_ON_STDERR if c in err] + [repr(c) for c in set(err) if _invisible(c)]
    assert not raw, f"{where}: raw {raw} on stderr: {err[-2000:]!r}"
    assert code in (0, 2), f"{where} exited {code}: {err[-2000:]}"
    errors = [ln for ln in err.splitlines() if ln.startswith("kernelscope: error:")]
    if code == 2:
        assert len(errors) == 1, f"{where}: expected one error sentence, got {err[-2000:]}"
    if m.truncated:
        assert code == 2, f"{where}: a file cut short was read as whole"


def write(tmp: Path, m: Mutated, name: str = "input") -> Path:
    p = tmp / f"{name}{TALLY['files']}{m.suffix}"
    TALLY["files"] += 1
    p.write_bytes(m.data)
    return p


@pytest.fixture(scope="module")
def tmp(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


@pytest.mark.parametrize("fixture", SESSIONS)
def test_session_readers_survive_mutated_sessions(fixture, tmp):
    doc = _doc(f"{fixture}.json.gz")
    original = DATA / f"{fixture}.json.gz"

    @FUZZ
    @given(mutated_json(doc, ".json.gz"))
    def run(m: Mutated) -> None:
        TALLY["session inputs"] += 1
        p = write(tmp, m)
        for argv in (["show", str(p), "--width", "120"], ["show", str(p), "--json"],
                     ["show", str(p), "--timeline", "--width", "100"],
                     ["export", str(p), "--chrome", str(tmp / f"trace{TALLY['files']}.json")],
                     ["diff", str(p), str(original), "--width", "120"]):
            code, _, err = run_cli(*argv)
            check_answer(argv, m, code, err)
        p.unlink()

    run()


def test_kernel_patterns_are_matched_or_refused_in_one_sentence(tmp):
    session = DATA / f"{SESSIONS[0]}.json.gz"

    @FUZZ
    @given(KERNEL_REGEXES)
    def run(regex: str) -> None:
        for argv in (["show", str(session), "--width", "120"], ["diff", str(session), str(session), "--width", "120"],
                     ["report", str(session), "-o", str(tmp / "r.html"), "-f"]):
            code, _, err = run_cli(*argv, "--kernel", regex)
            TALLY[f"{argv[0]} --kernel: exit {code}"] += 1
            assert "Traceback" not in err and "internal error" not in err and code in (0, 2), err[-2000:]
            assert not [c for c in RAW_ON_STDERR if c in err], repr(err[-2000:])
            # refused by argparse (kernelscope show: error: argument --kernel: ...) or after the match
            assert code == 0 or len([ln for ln in err.splitlines() if ": error:" in ln]) == 1, err[-2000:]

    run()


def test_plot_survives_mutated_benchmark_results(tmp):
    pytest.importorskip("matplotlib")
    doc = json.loads((DATA / "bench_attention_h100.json").read_text())

    @settings(FUZZ, max_examples=max(3, EXAMPLES // 5))  # plotting is slow; fewer examples
    @given(mutated_json(doc, ".json"))
    def run(m: Mutated) -> None:
        TALLY["results inputs"] += 1
        p = write(tmp, m)
        argv = ["plot", str(p), "--output-dir", str(tmp / f"plots{TALLY['files']}")]
        code, _, err = run_cli(*argv)
        check_answer(argv, m, code, err)

    run()


@pytest.mark.parametrize("fixture", ["ncu_h100_region", "ncu_h100_handmade_default"])
def test_import_survives_mutated_ncu_reports(fixture, tmp):
    pytest.importorskip("ncu_report")
    data = lzma.decompress((DATA / f"{fixture}.ncu-rep.xz").read_bytes())

    @settings(FUZZ, max_examples=max(5, EXAMPLES // 2))  # each read starts a child process (a crash stays there)
    @given(mutated_bytes(data, ".ncu-rep", header_bytes=20_000))
    def run(m: Mutated) -> None:
        TALLY["ncu-rep inputs"] += 1
        p = write(tmp, m)
        argv = ["import", str(p), "-o", str(tmp / f"imported{TALLY['files']}.json")]
        code, _, err = run_cli(*argv)
        check_answer(argv, m, code, err)
        assert "would not load" not in err, err  # damage is the report's, said as such, never the session file's

    run()


def _reader_commands(bad: str, tmp: Path) -> list[list[str]]:
    good = str(DATA / "session_h100_mixed.json.gz")
    n = TALLY["files"]
    return [["show", bad], ["show", bad, "--json"], ["export", bad, "-o", str(tmp / f"t{n}.json")],
            ["report", bad, "-o", str(tmp / f"r{n}.html")], ["diff", bad, good], ["diff", good, bad],
            ["merge", good, bad, "-o", str(tmp / f"m{n}.json")], ["import", bad, "-o", str(tmp / f"i{n}.json")],
            ["plot", bad, "--output-dir", str(tmp / f"p{n}")], ["show", good, "--ceilings", bad, "--json"]]


def test_readers_refuse_files_that_are_not_files(tmp):
    """A FIFO, a device, a directory, a dangling link, a gzip bomb past the limit: every command that reads a file
    answers with one sentence and exit 2 without blocking (a blocking open stays stuck past run_cli's HANG_S:
    the test fails)."""
    where = tmp / "special"
    where.mkdir(exist_ok=True)

    @settings(FUZZ, max_examples=max(10, EXAMPLES))
    @given(st.sampled_from(SPECIAL_FILES), st.integers(0, 9))
    def run(kind: str, which: int) -> None:
        TALLY["special inputs"] += 1
        bad = special_file(kind, where)
        argv = _reader_commands(str(bad), tmp)[which]
        code, _, err = run_cli(*argv)
        m = Mutated(b"", "", kind)
        check_answer(argv, m, code, err)
        assert code == 2, f"kernelscope {' '.join(argv)} on {kind}: exit {code}: {err[-1000:]}"

    run()


def _session_from_parts(launches, activities, regions) -> None:
    """What a reader returns must be a session the schema accepts whole."""
    from kernelscope.model import Session

    s = Session(launches=launches, activities=activities, regions=regions)
    skipped = Session.from_dict(json.loads(json.dumps(s.to_dict()))).skipped_on_load
    assert not skipped, skipped[:3]


def test_kineto_parser_survives_mutated_traces():
    from kernelscope.collect.trace.kineto import TraceFormatError, parse_trace

    doc = _doc("trace_h100_mixed.json.gz")

    @FUZZ
    @given(mutated_json(doc, ".json"))
    def run(m: Mutated) -> None:
        TALLY["kineto inputs"] += 1
        try:
            parsed = parse_trace(json.loads(m.data))  # as the trace pass reads the profiler's file
        except (ValueError, RecursionError):  # TraceFormatError is a ValueError; the trace pass reports it
            TALLY["kineto: refused"] += 1
            return
        assert not m.truncated, f"a trace cut short was read as whole ({m.what})"
        TALLY["kineto: read"] += 1
        _session_from_parts(parsed.launches, parsed.activities, parsed.regions)

    run()
    assert issubclass(TraceFormatError, ValueError)


def test_streaming_kineto_reader_survives_mutated_traces(tmp):
    """The streaming reader (import, the trace pass) on mutated traces, plain and gzip: a reason (ValueError) or a
    result; a result of a file cut short names the cut; where the whole document still parses, it is the same."""
    from kernelscope.collect.trace.kineto import parse_trace
    from kernelscope.collect.trace.kineto_stream import read_trace

    doc = _doc("trace_h100_mixed.json.gz")
    text = json.dumps(doc, indent=1).encode()

    @FUZZ
    @given(st.one_of(mutated_json(doc, ".json.gz"), mutated_bytes(text, ".json", text=True)))
    def run(m: Mutated) -> None:
        TALLY["kineto stream inputs"] += 1
        p = write(tmp, m, "trace")
        try:
            streamed = read_trace(p)
        except ValueError:  # one sentence for the user; TraceFormatError is a ValueError
            TALLY["kineto stream: refused"] += 1
            return
        TALLY["kineto stream: read"] += 1
        if m.truncated:
            assert streamed.damage and streamed.damage in streamed.parsed.problems, m.what
        if streamed.damage is None:
            try:
                whole = parse_trace(json.loads(gzip.decompress(m.data) if m.data[:2] == b"\x1f\x8b" else m.data))
            except (ValueError, RecursionError):
                whole = None
            if whole is not None:
                assert [x.to_dict() for x in streamed.parsed.launches] == [x.to_dict() for x in whole.launches]
                assert streamed.parsed.problems == whole.problems, m.what
        _session_from_parts(streamed.parsed.launches, streamed.parsed.activities, streamed.parsed.regions)

    run()


def test_import_survives_mutated_traces(tmp):
    """`kernelscope import` of a mutated trace: exit 0 or one sentence and exit 2; a file cut short that is
    imported says where it was cut, in one note."""
    doc = _doc("trace_h100_mixed.json.gz")

    @settings(FUZZ, max_examples=max(5, EXAMPLES // 2))
    @given(mutated_json(doc, ".json.gz"))
    def run(m: Mutated) -> None:
        TALLY["trace import inputs"] += 1
        p = write(tmp, m, "trace")
        argv = ["import", str(p), "-o", str(tmp / f"imported{TALLY['files']}.json")]
        code, _, err = run_cli(*argv)
        assert "Traceback" not in err and "internal error" not in err, f"{m.what}: {err[-2000:]}"
        assert code in (0, 2), f"{m.what} exited {code}: {err[-2000:]}"
        if code == 2:
            assert len([ln for ln in err.splitlines() if ln.startswith("kernelscope: error:")]) == 1, err
        elif m.truncated:
            assert len([ln for ln in err.splitlines() if "damaged" in ln or "cut short" in ln]) == 1, err

    run()


def test_proton_reader_survives_mutated_traces():
    from kernelscope.collect.instrument.proton_trace import ProtonTraceError, read_proton_trace
    from kernelscope.model import Launch

    text = gzip.decompress((DATA / "proton_h100_phases.chrome_trace.gz").read_bytes()).decode()
    doc = json.loads(text)

    @FUZZ
    @given(st.one_of(mutated_json(doc, ".json"), mutated_bytes(text.encode(), ".json", text=True)))
    def run(m: Mutated) -> None:
        TALLY["proton inputs"] += 1
        try:
            kernels = read_proton_trace(m.data.decode("utf-8", errors="replace"))
        except (ProtonTraceError, RecursionError):
            TALLY["proton: refused"] += 1
            return
        TALLY["proton: read"] += 1
        if m.truncated:  # Proton's reader keeps the events before a cut, and must say so
            assert all(any("truncated" in p for p in s.problems) for s in kernels.values()), m.what
        launches = [Launch(kernel=k, grid=(1, 1, 1), block=(32, 1, 1), start_ns=0, duration_ns=1, scopes=s)
                    for k, s in kernels.items()]
        _session_from_parts(launches, [], [])

    run()


@pytest.mark.skipif(LONG_RUN or os.environ.get("KERNELSCOPE_HYPOTHESIS_PROFILE", "ci") != "ci",
                    reason="a search draws random examples")
def test_ci_draws_the_same_examples_every_run():
    @settings(FUZZ, max_examples=5)
    @given(st.binary(min_size=1))
    def draw(data: bytes) -> None:
        drawn.append(data)

    runs = []
    for _ in range(2):
        drawn: list[bytes] = []
        draw()
        runs.append(drawn)
    assert FUZZ.derandomize and runs[0] == runs[1]


def teardown_module() -> None:
    report = os.environ.get("KERNELSCOPE_FUZZ_REPORT")
    if report:
        Path(report).write_text(json.dumps(dict(sorted(TALLY.items())), indent=1) + "\n")
    print(f"\nfuzz tally: {dict(sorted(TALLY.items()))}", file=sys.stderr)
