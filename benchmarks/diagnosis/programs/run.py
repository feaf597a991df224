"""Run one program of the suite by name, with the program's own flags:

    python benchmarks/diagnosis/programs/run.py NAME [--variant defect|fixed|control] [--steps N] [--warmup N] [--tiny]
    torchrun --nproc-per-node 2 benchmarks/diagnosis/programs/run.py straggler_ddp --variant defect

The programs live in one module per planted defect (``config.MODULE``), each a function returning the names it
defines; ``load(NAME)`` gives them as one module object (build, main, SIZES, CPU_SKIP, docstring).
"""
from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:  # the program modules import harness (and one another) by bare name
    sys.path.insert(0, str(HERE))

import config  # noqa: E402

_LOADED: dict[str, types.ModuleType] = {}


def load(name: str) -> types.ModuleType:
    """The program NAME's names as a module object, built once per process."""
    if name not in _LOADED:
        program = getattr(importlib.import_module(config.BY_NAME[name].module), name)
        mod = types.ModuleType(name, program.__doc__)
        mod.__dict__.update(program())
        _LOADED[name] = mod
    return _LOADED[name]


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in config.BY_NAME:
        print(f"give a program name first, one of: {', '.join(config.BY_NAME)}", file=sys.stderr)
        return 2
    load(argv[0]).main(argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
