"""`.ci/run` runs the README's test command exactly as written in a fresh venv without torch (issue 36): the
command a newcomer runs first must pass where the test extra installs neither torch nor triton."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_test_command() -> str:
    block = re.search(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert block, "the README opens with a bash block of its two commands"
    lines = [line.strip() for line in block.group(1).splitlines() if "pytest" in line]
    assert len(lines) == 1, lines
    return lines[0]


def test_ci_runs_the_readme_test_command_in_a_torchless_venv():
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    command = _readme_test_command()
    venv = next(i for i, line in enumerate(lines) if re.match(r"python3? -m venv ", line))
    target = lines[venv].split()[-1].strip('"')
    activate = next(i for i, line in enumerate(lines) if line.replace('"', "") == f". {target}/bin/activate")
    run = next(i for i, line in enumerate(lines) if i > activate and line == command)
    torch_install = next(i for i, line in enumerate(lines) if re.search(r"install\b.*\btorch", line))
    assert venv < activate < run < torch_install, "the torch-less run must come before torch is installed"
    assert "--system-site-packages" not in lines[venv]  # it would see the main environment's torch


def test_ci_runs_the_readme_command_again_with_torch():
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    torch_install = next(i for i, line in enumerate(lines) if re.search(r"install\b.*\btorch", line))
    assert _readme_test_command() in lines[torch_install + 1:]


def test_ci_runs_the_readme_slow_step_once_with_torch_and_collects_it_without():
    """The slow tests (pyproject's addopts leave them out of the default run) are a step of their own: run where
    torch is, collected in the torch-less venv (a slow module that imports torch unguarded fails there)."""
    slow = "python -m pytest -m slow"
    assert f"`{slow}`" in (ROOT / "README.md").read_text()
    lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    torch_install = next(i for i, line in enumerate(lines) if re.search(r"install\b.*\btorch", line))
    assert lines[torch_install + 1:].count(slow) == 1
    collect = next(i for i, line in enumerate(lines) if line.startswith(f"{slow} --collect-only"))
    activate = next(i for i, line in enumerate(lines) if line.replace('"', "").endswith("/bin/activate"))
    assert activate < collect < torch_install
