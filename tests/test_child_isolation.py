"""Child Python processes that kernelscope starts for its own code import nothing from the working directory
or PYTHONPATH: a report opened inside a folder someone else controls must not run that folder's code."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ncu_fixtures import report_file


def _imported_names(command: list[str]) -> set[str]:
    """Top-level names of the modules a command's Python imports (from -X importtime)."""
    r = subprocess.run([command[0], "-X", "importtime", *command[1:]], capture_output=True)
    stderr = r.stderr.decode(errors="replace")
    assert r.returncode == 0, stderr[-2000:]
    return _importtime_names(stderr)


def _plant(folder: Path, names: set[str], marks: Path, where: str) -> None:
    """A module of each name (and a kernelscope/ package) that leaves a file in ``marks`` when imported."""
    folder.mkdir()
    for name in names:
        (folder / f"{name}.py").write_text(f"open({str(marks / (name + '-' + where))!r}, 'w').close()\n")
    (folder / "kernelscope").mkdir()
    (folder / "kernelscope" / "__init__.py").write_text(
        f"open({str(marks / ('kernelscope-package-' + where))!r}, 'w').close()\n")


def test_import_runs_no_module_from_the_working_directory_or_pythonpath(tmp_path, monkeypatch, capsys):
    """Every name the report reader's child imports (measured with -X importtime, plus ncu_report,
    sitecustomize and usercustomize) is planted in the working directory and on PYTHONPATH."""
    from kernelscope.cli import main
    from kernelscope.collect.ncu.report_reader import locate_reader, reader_command

    report = report_file("ncu_h100_region", tmp_path)
    names = _imported_names(reader_command(report, locate_reader()))
    assert {"pickle", "dataclasses", "kernelscope", "ncu_report"} <= names  # the list is the real one
    names |= {"ncu_report", "_ncu_report", "sitecustomize", "usercustomize"}
    names -= {"sys", "builtins"}
    marks = tmp_path / "marks"
    marks.mkdir()
    _plant(tmp_path / "cwd", names, marks, "cwd")
    _plant(tmp_path / "pythonpath", names, marks, "pythonpath")
    monkeypatch.chdir(tmp_path / "cwd")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "pythonpath"))
    out = tmp_path / "s.json"
    assert main(["import", str(report), "-o", str(out)]) == 0, capsys.readouterr().err
    assert sorted(p.name for p in marks.iterdir()) == []
    assert out.is_file()


def test_ncu_report_is_loaded_from_the_place_found_never_from_sys_path(tmp_path, monkeypatch):
    """A folder on sys.path with an ncu_report.py is not where the reader comes from."""
    pytest.importorskip("ncu_report")
    from kernelscope.collect.ncu import report_reader

    planted = tmp_path / "planted"
    planted.mkdir()
    (planted / "ncu_report.py").write_text("raise SystemExit('planted ncu_report imported')\n")
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from kernelscope.collect.ncu.report_reader import load_module; print(load_module().__file__)")
    r = subprocess.run([sys.executable, "-c", code, str(planted)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.strip()).parent == report_reader.locate_reader().path


def _kernelscope(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The kernelscope command as installed (its own process does not start with the working directory on
    sys.path, as `python -m kernelscope` would)."""
    from conftest import ROOT

    code = "import sys; del sys.path[0]; from kernelscope.cli import main; sys.exit(main())"
    full_env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), **(env or {}))
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=cwd, env=full_env)


def _importtime_names(stderr: str) -> set[str]:
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip().split(".")[0]
            if name.isidentifier():
                names.add(name)
    return names


@pytest.mark.slow
def test_run_imports_kernelscope_and_its_tools_not_from_the_working_directory(tmp_path):
    """`kernelscope run -- python /elsewhere/script.py` from a folder holding a module of every name the run
    imports (as measured with PYTHONPROFILEIMPORTTIME): python itself would not put that folder on the path
    of such a script, so nothing of it runs. About 10 s (two trace passes on the CPU)."""
    pytest.importorskip("torch")

    script_dir = tmp_path / "elsewhere"
    script_dir.mkdir()
    script = script_dir / "script.py"
    script.write_text("print('workload ran')\n")
    plain = tmp_path / "plain"
    plain.mkdir()
    first = _kernelscope("run", "-o", str(tmp_path / "a.json"), "--", sys.executable, str(script), cwd=plain,
                         env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert first.returncode == 0, first.stderr[-2000:]
    names = _importtime_names(first.stderr) - {"sys", "builtins", "script"}
    assert {"kernelscope", "json", "traceback", "torch"} <= names
    marks = tmp_path / "marks"
    marks.mkdir()
    _plant(tmp_path / "cwd", names, marks, "cwd")
    r = _kernelscope("run", "-o", str(tmp_path / "b.json"), "--", sys.executable, str(script), cwd=tmp_path / "cwd")
    assert r.returncode == 0, r.stderr[-2000:]
    assert "workload ran" in r.stdout and (tmp_path / "b.json").is_file()
    assert sorted(p.name for p in marks.iterdir()) == []


def test_kernelscope_modules_started_by_profile_and_learn_run_isolated(tmp_path, monkeypatch):
    """The command lines `profile` (autotuning, counter pass) and `learn` (counter pass) start for
    kernelscope's own workloads import kernelscope from its installation, not from a planted folder."""
    from kernelscope.collect.child_python import isolated_code, isolated_module

    marks = tmp_path / "marks"
    marks.mkdir()
    names = {"json", "runpy", "pickle", "dataclasses", "sitecustomize", "usercustomize", "enum", "re"}
    _plant(tmp_path / "cwd", names, marks, "cwd")
    _plant(tmp_path / "pythonpath", names, marks, "pythonpath")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "pythonpath"))
    code = "import json, kernelscope.model, sys; print(json.dumps(sys.argv[1:]))"
    r = subprocess.run(isolated_code(code, "a", "b"), capture_output=True, text=True, cwd=tmp_path / "cwd")
    assert r.returncode == 0 and r.stdout.strip() == '["a", "b"]', r.stderr
    r = subprocess.run(isolated_module("json.tool", "--compact"), input='{"x": 1}', capture_output=True, text=True,
                       cwd=tmp_path / "cwd")
    assert r.returncode == 0 and r.stdout.strip() == '{"x":1}', r.stderr
    assert sorted(p.name for p in marks.iterdir()) == []
