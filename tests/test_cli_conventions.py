"""Every subcommand follows the conventions the README writes down (section "Conventions")."""
from __future__ import annotations

import argparse
import importlib.util

import pytest

from conftest import DATA, HANG_S
from kernelscope.cli import COMMANDS, _module, build_parser
from conftest import run_cli

SESSION = str(DATA / "session_h100_mixed.json.gz")
DRAWING = {"show", "diff", "occupancy", "learn", "top", "calibrate", "demo", "profile", "bench"}
WRITING = {"run", "import", "export", "bench", "profile", "demo", "learn", "plot"}


def _options(name: str) -> dict[str, argparse.Action]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    parser = sub.choices[name]
    found = {}
    stack = [parser]
    while stack:  # a command with subcommands (bench attention, profile attention): look at all of them
        p = stack.pop()
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                stack.extend(a.choices.values())
            for s in a.option_strings:
                found[s] = a
    return found


@pytest.mark.parametrize("name", COMMANDS)
def test_help_works_and_exits_0(name):
    code, out, err = run_cli(name, "--help")
    assert code == 0 and "usage" in (out + err).lower(), (name, err)


@pytest.mark.parametrize("name", sorted(DRAWING - {"bench", "profile"}))
def test_drawing_commands_take_width_and_no_color(name):
    opts = _options(name)
    assert "--width" in opts and "--no-color" in opts, name


@pytest.mark.parametrize("name", sorted(WRITING - {"run"}))  # run parses its own argv: checked below
def test_writing_commands_take_output_and_force(name):
    opts = _options(name)
    if name == "plot":
        assert "--output-dir" in opts and "-f" in opts
    else:
        assert ("-o" in opts or "--output" in opts) and "-f" in opts, name


@pytest.mark.parametrize(
    "argv",
    [
        ["show", SESSION, "--width", "0"],
        ["show", SESSION, "--width", "39"],
        ["show", SESSION, "--panels", "-1"],
        ["show", SESSION, "--top", "-2"],
        ["diff", SESSION, SESSION, "--width", "10"],
        ["occupancy", "--arch", "sm_90", "--block", "-128", "--regs", "32"],
        ["occupancy", "--arch", "sm_90", "--block", "128", "--regs", "32", "--width", "5"],
        ["calibrate", "--repeats", "0"],
        ["learn", "marlin", "--m", "-1"],
        ["top", "--iters", "0"],
        ["run", "--counters", "--top", "-1", "--", "python", "x.py"],
        ["export", SESSION],
    ],
)
def test_bad_values_are_refused_with_exit_2(argv):
    code, out, err = run_cli(*argv)
    assert code == 2 and "Traceback" not in err and "error" in err, (argv, err)
    assert out == ""


def test_count_options_refuse_zero_and_negatives_everywhere():
    from kernelscope.cli.common import non_negative, positive

    for name in COMMANDS:
        if getattr(_module(name), "RAW_ARGS", False):
            continue
        for flag, action in _options(name).items():
            if action.type is int and flag not in ("--device", "--seed", "--groupsize", "--block", "--timeline"):
                pytest.fail(f"kernelscope {name} {flag} takes any integer; counts use positive or non_negative")
    assert positive("3") == 3 and non_negative("0") == 0


@pytest.mark.parametrize("gpu", [True, False])
@pytest.mark.parametrize("lacking", ["torch", "triton"])
def test_commands_that_need_torch_say_so_first(monkeypatch, gpu, lacking):
    """Without torch: learn (CPU) asks for it, with the CPU build where there is no GPU. bench, profile and tune
    ask for torch or triton on a GPU machine and say there is no GPU elsewhere (issue 36: not "install triton"
    on a laptop)."""
    from kernelscope.collect import driver

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == lacking else real(n, *a))
    monkeypatch.setattr(driver, "driver_gpu", lambda: (True, "") if gpu else (False, "no driver here"))
    commands = [["bench", "attention"], ["bench", "w4a16"], ["profile", "attention"],
                ["tune", "w4a16", "--shapes", "4096x4096"]]
    for argv in commands + ([["learn", "marlin"]] if lacking == "torch" else []):
        code, out, err = run_cli(*argv)
        assert code == 2 and "Traceback" not in err, (argv, err)
        if gpu or argv[0] == "learn":
            needs = err.split(" needs ", 1)[1].split(",", 1)[0]  # "torch", or "torch and triton" without torch here
            assert lacking in needs and f"pip install {lacking}" in err, (argv, err)
            assert ("download.pytorch.org/whl/cpu" in err) == ("torch" in needs and not gpu), (argv, err)
        else:
            assert "no CUDA GPU here: no driver here" in err and "install" not in err, (argv, err)


def test_roofline_png_without_matplotlib_says_so_before_drawing(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "matplotlib" else real(n, *a))
    code, out, err = run_cli("show", SESSION, "--roofline-png", str(tmp_path / "r.png"))
    assert code == 2 and out == "" and "pip install 'kernelscope[plot]'" in err


def test_show_json_timeline_includes_the_timeline():
    import json

    code, out, err = run_cli("show", SESSION, "--json", "--timeline", "5")
    assert code == 0, err
    tl = json.loads(out)["timeline"]
    assert len(tl["rows"]) == 5 and tl["rows_total"] > 5 and tl["rows"][0]["start_ns"] is not None


def test_leaving_past_the_profiler_teardown_keeps_the_output_and_the_exit_code(tmp_path):
    """bench w4a16, demo and learn (after the torch profiler ran in-process) leave with os._exit once all is
    written: what was printed but not yet flushed still arrives, the exit code is the command's, and the
    interpreter's teardown (atexit handlers here) does not run."""
    import subprocess
    import sys

    from conftest import ROOT

    code = ("import atexit, sys\n"
            "from kernelscope.cli.common import exit_past_profiler_teardown\n"
            "atexit.register(lambda: print('teardown ran'))\n"
            "sys.stdout.write('table, unflushed')\n"
            "sys.stderr.write('results written')\n"
            "exit_past_profiler_teardown(3)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_S,
                       env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    assert r.returncode == 3
    assert r.stdout == "table, unflushed" and r.stderr == "results written"
