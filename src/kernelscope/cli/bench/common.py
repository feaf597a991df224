"""What every `kernelscope bench` benchmark shares: its options, list arguments, output file, GPU check,
progress bar, and the printed summary (optional first lines, titled tables, the note about rows measured
while the GPU was throttled, marked !)."""
from __future__ import annotations

import argparse
import datetime as _dt
from pathlib import Path
from typing import Any, Iterable

from kernelscope.cli.common import MAX_WIDTH, MIN_WIDTH, columns, fail, non_negative, output_path, positive


def add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", metavar="FILE", help="results file (default bench-<name>-YYYYmmdd-HHMMSS.json)")
    p.add_argument("-f", "--force-overwrite", action="store_true", help="overwrite FILE if it exists")
    p.add_argument("--warmup", type=non_negative, default=10, help="untimed calls before timing (default 10)")
    p.add_argument("--repeats", type=positive, default=30, help="timed calls per point (default 30)")
    p.add_argument("--no-l2-flush", action="store_true", help="do not overwrite L2 between timed calls")
    p.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    p.add_argument("--width", type=columns, metavar="COLS",
                   help=f"render the summary at this terminal width ({MIN_WIDTH} to {MAX_WIDTH})")
    p.add_argument("--no-color", action="store_true", help="plain text output")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")


def int_list(text: str, what: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        fail(f"{what} must be comma-separated integers, got {text!r}")
    if not values or min(values) < 1:
        fail(f"{what} must list positive integers, got {text!r}")
    return values


def names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def chosen_impls(text: str, known) -> list[str]:
    """--impl as a list of known implementation names; one sentence and exit 2 otherwise."""
    impls = names(text)
    unknown = [i for i in impls if i not in known]
    if unknown or not impls:
        fail(f"unknown implementation {', '.join(unknown) or '(none given)'}; choose from {', '.join(known)}")
    return impls


def check_timing_args(args: argparse.Namespace) -> None:
    if args.warmup < 0 or args.repeats < 1:
        fail("--warmup must be >= 0 and --repeats >= 1")


def results_path(args: argparse.Namespace, name: str) -> Path:
    return output_path(args.output if args.output is not None
                       else _dt.datetime.now().strftime(f"bench-{name}-%Y%m%d-%H%M%S.json"), args.force_overwrite,
                       what="results file")


class ResultsWriter:
    """Saves the results after each row: the first write honours -f (never onto a file that exists, also one
    created while the benchmark ran), later writes replace the file this command wrote."""

    def __init__(self, out: Path, force: bool) -> None:
        self.out, self._force = out, force

    def __call__(self, results) -> None:
        from kernelscope.model.files import OutputFileError

        try:
            results.save(self.out, force=self._force)
        except OutputFileError as e:
            fail(str(e))
        self._force = True


def require_cuda() -> None:
    from kernelscope.collect.driver import gpu_available

    ok, why = gpu_available()
    if not ok:
        fail(f"kernelscope bench times kernels on an NVIDIA GPU, and there is no CUDA GPU here: {why}")


class progress:
    """A Rich progress bar on stderr (transient); a no-op callback when disabled."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.enabled = not args.no_progress
        self._bar: Any = None
        self._task: Any = None

    def __enter__(self):
        if not self.enabled:
            return None
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                             console=Console(stderr=True), transient=True)
        self._bar.__enter__()
        self._task = self._bar.add_task("starting", total=None)
        return self.update

    def update(self, done: int, total: int, label: str) -> None:
        self._bar.update(self._task, completed=done, total=total, description=label)

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)


def print_tables(results, tables: Iterable[tuple[str, Any]], width: int | None, color: bool | None,
                 file: Any = None, preface: Iterable[str] = ()) -> None:
    from kernelscope.bench.results import clock_flag_note
    from kernelscope.render.show import make_console

    console = make_console(width=width, file=file, color=color)
    for line in preface:
        console.print(line)
    for title, table in tables:
        console.print(title)
        console.print(table)
    note = clock_flag_note(results)
    if note:
        console.print(note)
