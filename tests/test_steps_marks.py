"""kernelscope.step() windows and kernelscope.mark(), on the CPU: the real torch profiler (CPU activities) under
the same schedule `run --steps` uses, the step counter, marks, and `run --steps/--memory` end to end."""
from __future__ import annotations

import json
import tempfile

import pytest

from conftest import one_sentence_error, run_cli
from kernelscope.collect.trace import marks, steps
from kernelscope.collect.trace.kineto import parse_trace
from kernelscope.model import Session
from kernelscope.model.memory import Mark, StepWindow

torch = pytest.importorskip("torch")


def _profile_steps(window: tuple[int, int], n_steps: int) -> tuple[list[str], steps.StepCounter]:
    """Run n_steps steps (each a record_function 'work{i}' around real CPU ops) under the windowed profiler;
    the user annotations of the trace it exported, and the counter."""
    from torch.profiler import ProfilerActivity

    got: dict = {}

    def ready(prof) -> None:
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            prof.export_chrome_trace(f.name)
            got["doc"] = json.load(open(f.name))

    c = steps.start_counter(window)
    prof = steps.windowed_profiler(torch, [ProfilerActivity.CPU], window, ready)
    c.on_step.append(lambda n: prof.step())
    prof.__enter__()
    c.begin()
    x = torch.ones(16)
    try:
        for i in range(n_steps):
            with torch.profiler.record_function(f"work{i}"):
                x = x * 2 + 1
            steps.step()
    finally:
        prof.__exit__(None, None, None)
        steps.stop_counter(c)
    if "doc" not in got:
        return [], c
    return [r.name for r in parse_trace(got["doc"]).regions], c


def test_window_records_only_its_steps():
    names, c = _profile_steps((5, 7), 12)
    assert sorted(n for n in names if n.startswith("work")) == ["work5", "work6", "work7"]
    assert sorted(n for n in names if n.startswith("ProfilerStep")) == ["ProfilerStep#5", "ProfilerStep#6",
                                                                         "ProfilerStep#7"]
    assert c.recorded() == (5, 7) and c.ended == 12


def test_window_from_step_zero_and_one_ending_with_the_run():
    names, c = _profile_steps((0, 1), 5)
    assert sorted(n for n in names if n.startswith("work")) == ["work0", "work1"]
    names, c = _profile_steps((3, 9), 5)  # the run ends in step 5, inside the window
    assert sorted(n for n in names if n.startswith("work")) == ["work3", "work4"]
    assert c.recorded() == (3, 5)


def test_window_outside_the_run_records_nothing_and_says_which_steps_ran():
    names, c = _profile_steps((50, 52), 10)
    assert names == [] and c.recorded() is None
    assert "it ran steps 0-10" in steps.steps_ran_sentence(50, 52, c.ended)


@pytest.mark.parametrize("text,want", [("50-52", (50, 52)), ("7", (7, 7)), (" 3 - 4 ", (3, 4))])
def test_parse_steps(text, want):
    assert steps.parse_steps(text) == want


@pytest.mark.parametrize("text", ["", "a-b", "5-3", "-1", "1-2-3"])
def test_parse_steps_refuses(text):
    with pytest.raises(steps.StepRangeError):
        steps.parse_steps(text)


def test_marks_record_time_step_values_and_say_why_memory_is_absent():
    marks.mark("outside", n=1)  # no trace pass records: nothing kept, nothing raised
    log = marks.start_mark_log()
    c = steps.start_counter((1, 1))
    try:
        marks.mark("before_window", n=0)
        steps.step()
        marks.mark("after_layer1", tokens=4096, shape=torch.Size([2, 3]), name="x", ok=True)
        steps.step()
        marks.mark("after_window")
    finally:
        steps.stop_counter(c)
        got = marks.stop_mark_log(log)
    assert [m.name for m in got] == ["after_layer1"]
    m = got[0]
    assert m.step == 1 and m.values == {"tokens": 4096, "shape": [2, 3], "name": "x", "ok": True}
    if not torch.cuda.is_available():
        assert m.allocated_bytes is None and m.memory_missing_reason == "CUDA is not available to torch"
    with pytest.raises(ValueError):
        marks.mark("bad", t=torch.ones(3))
    with pytest.raises(ValueError):
        marks.mark("")


def test_session_round_trip_of_marks_memory_and_steps(tmp_path):
    from kernelscope.model.memory import MemoryHistory

    s = Session(command=["x"])
    s.marks = [Mark("m", 10, 5, 2, 100, 200, None, {"shape": [1, 2]})]
    s.memory = MemoryHistory(0, t_ns=[1, 2], action=[0, 1], address=[16, 16], size=[512, 512], stack=[0, -1],
                             stacks=[["f (a.py:1)"]], end_allocated_bytes=0, end_reserved_bytes=2048)
    s.steps = StepWindow(50, 52, 200, 50, 52)
    back = Session.load(s.save(tmp_path / "s.json"))
    assert back.marks == s.marks and back.memory == s.memory and back.steps == s.steps
    doc = json.loads((tmp_path / "s.json").read_text())
    doc["memory"]["stack"] = [0, 7]  # an index past the stacks: the history is dropped and named
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    bad = Session.load(tmp_path / "bad.json")
    assert bad.memory is None and any("memory" in p for p in bad.skipped_on_load)
    assert bad.marks == s.marks


LOOP = "import kernelscope\nfor i in range(10):\n    kernelscope.mark('it', i=i)\n    kernelscope.step()\n"


def test_run_steps_outside_the_run_is_one_sentence(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    out = tmp_path / "s.json"
    r = run_cli("run", "-o", str(out), "--steps", "50-52", "--", "python", str(script))
    assert "it ran steps 0-10" in one_sentence_error(r)
    s = Session.load(out)
    assert s.steps == StepWindow(50, 52, 10, None, None) and s.marks == []


def test_run_steps_window_counts_steps_and_keeps_its_marks(tmp_path):
    script = tmp_path / "loop.py"
    script.write_text(LOOP)
    out = tmp_path / "s.json"
    r = run_cli("run", "-q", "-o", str(out), "--steps", "3-4", "--", "python", str(script))
    assert r.returncode == 0, r.stderr
    s = Session.load(out)
    assert s.steps == StepWindow(3, 4, 10, 3, 4)
    assert [(m.step, m.values) for m in s.marks] == [(3, {"i": 3}), (4, {"i": 4})]


def test_run_memory_without_cuda_is_one_sentence(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("CUDA is available here")
    script = tmp_path / "w.py"
    script.write_text("print('hi')\n")
    r = run_cli("run", "-q", "-o", str(tmp_path / "s.json"), "--memory", "--", "python", str(script))
    assert r.returncode == 0
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert lines == ["kernelscope: --memory records the PyTorch CUDA caching allocator, and CUDA is not available to "
                     "torch here."]


@pytest.mark.parametrize("args", [["--steps", "9-2"], ["--steps", "x"], ["--memory", "--", "ls"]])
def test_run_steps_memory_bad_input(args, tmp_path):
    if args[0] == "--memory":
        r = run_cli("run", "-o", str(tmp_path / "s.json"), "--counters", *args)
    else:
        r = run_cli("run", "-o", str(tmp_path / "s.json"), *args, "--", "python", "-c", "pass")
    one_sentence_error(r)


def test_counter_pass_window_uses_the_profiler_range(tmp_path):
    from kernelscope.collect.ncu.runner import NcuOptions, build_command

    argv = build_command("ncu", tmp_path / "r", ["python", "x.py"], NcuOptions(profile_from_start=False))
    assert argv[argv.index("--profile-from-start") + 1] == "off"
    assert "--profile-from-start" not in build_command("ncu", tmp_path / "r", ["python"], NcuOptions())
