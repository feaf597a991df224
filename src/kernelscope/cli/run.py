"""`kernelscope run`: profile a workload and write a session file.

Parsed by hand rather than argparse: everything after ``--`` or ``-m MODULE``
belongs to the workload, dashes included.
"""
from __future__ import annotations

import datetime as _dt
import sys
from pathlib import Path

from kernelscope.cli.common import existing_files, fail, kernel_regex, output_path
from kernelscope.model import CollectorStatus
from kernelscope.model import collectors as collector
from kernelscope.model.escape import visible

RAW_ARGS = True  # main() takes the raw argument list

RUN_USAGE = """usage: kernelscope run [options] -- python SCRIPT [ARGS...]
       kernelscope run [options] -m MODULE [ARGS...]
       kernelscope run --counters [options] -- PROGRAM [ARGS...]

Run a Python workload under the trace pass (PyTorch profiler / CUPTI) and write
a session file; with --counters, re-run it under Nsight Compute (ncu) and merge
the hardware counters into the same session (any program: a CUDA binary gets
the counter pass only). The workload's output and exit code pass through; if it
fails or is interrupted, the partial session is still written.

options:
  -o, --output FILE       session file (default: kernelscope-YYYYmmdd-HHMMSS.json)
  -f, --force-overwrite   overwrite FILE (and its .ncu-rep) if it exists
  --keep-trace FILE       also keep the raw PyTorch profiler trace (Chrome JSON)
  --sample-interval MS    sample GPU state (NVML/GPM) every MS milliseconds (default 100; 0: off)
  --steps FIRST-LAST      record only these steps (kernelscope.step() ends each; counted from 0); with
                          --counters, ncu profiles only kernels launched in them (cudaProfilerStart/Stop)
  --operators LEVEL       what the trace records of the aten ops behind the kernels: stacks (default: input
                          shapes and the Python stacks that name the user's line), shapes, or off (each level
                          costs the host less per op)
  --memory                record the PyTorch caching allocator's history: memory over time, the peak and
                          what was live at it (needs torch with CUDA)
  -m MODULE               run a module, like python -m
  -q, --quiet             do not print the summary line after the run

counter pass (ncu):
  --counters              collect hardware counters with ncu after the trace pass
  --top N                 profile the N kernels with the most trace-pass time (default 5)
  --kernel REGEX          profile kernels whose function name matches REGEX instead
  --region NAME           only kernels inside this kernelscope.region / NVTX range
  --launch-skip N         skip the first N launches of each launch configuration (default 0)
  --launch-count N        profile N launches of each launch configuration (default 1)
  --clock-control MODE    none (default: clocks as found) or base (ncu locks base clocks)
  --source                also per-source-line counters (ncu SourceCounters + WarpStateStats, source imported
                          into the report): warp samples, stall reasons and memory traffic per line, for
                          show --source (CUDA C++ needs -lineinfo; Triton kernels carry line information)
  --ncu PATH              the ncu executable (default: found on PATH)
  --ncu-timeout S         stop ncu after S seconds
  --ranks LIST            under torchrun: the ranks ncu profiles, e.g. 0,1 (default: all); each chosen rank
                          runs under its own ncu (FILE.rank<R>.ncu-rep); NCCL kernels are never profiled
                          (they would deadlock under ncu's kernel replay)"""

_VALUE_OPTS = {"-o": "output", "--output": "output", "--keep-trace": "keep_trace", "-m": "module",
               "--sample-interval": "sample_interval", "--top": "top", "--kernel": "kernel", "--region": "region",
               "--launch-skip": "launch_skip", "--launch-count": "launch_count", "--clock-control": "clock_control",
               "--ncu": "ncu", "--ncu-timeout": "ncu_timeout", "--steps": "steps", "--ranks": "ranks",
               "--operators": "operators"}
_FLAGS = {"-f": "force", "--force-overwrite": "force", "-q": "quiet", "--quiet": "quiet", "--counters": "counters",
          "--memory": "memory", "--source": "source"}


def _parse_run(argv: list[str]) -> dict:
    opts: dict = {key: None for key in _VALUE_OPTS.values()}
    opts.update({key: False for key in _FLAGS.values()}, command=[])
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            print(RUN_USAGE)
            raise SystemExit(0)
        if a == "--":
            opts["command"] = argv[i + 1:]
            break
        if "=" in a and a.split("=", 1)[0] in _VALUE_OPTS and a.startswith("--"):
            name, value = a.split("=", 1)
            opts[_VALUE_OPTS[name]] = value
        elif a in _VALUE_OPTS:
            if i + 1 >= len(argv):
                fail(f"{a} needs a value")
            opts[_VALUE_OPTS[a]] = argv[i + 1]
            if a == "-m":
                opts["command"] = argv[i + 2:]
                break
            i += 1
        elif a in _FLAGS:
            opts[_FLAGS[a]] = True
        elif a.startswith("-"):
            fail(f"unknown run option {a!r} (put the workload after '--')")
        else:
            opts["command"] = argv[i:]
            break
        i += 1
    return opts


def _int_opt(opts: dict, key: str, default: int, lo: int = 0) -> int:
    text = opts.get(key)
    if text is None:
        return default
    try:
        v = int(text)
    except ValueError:
        v = lo - 1
    if v < lo:
        fail(f"--{key.replace('_', '-')} takes a whole number of at least {lo}, not {text!r}")
    return v


def _counter_request(o: dict):
    from kernelscope.collect.ncu.counter_pass import CounterRequest

    counter_opts = ("top", "kernel", "region", "launch_skip", "launch_count", "clock_control", "ncu", "ncu_timeout",
                    "ranks")
    if not o["counters"]:
        used = [k for k in counter_opts if o[k] is not None] + (["source"] if o["source"] else [])
        if used:
            fail(f"--{used[0].replace('_', '-')} needs --counters")
        return None
    if o["clock_control"] not in (None, "none", "base"):
        fail(f"--clock-control takes none or base, not {o['clock_control']!r}")
    if o["kernel"] is not None:
        import argparse

        try:
            kernel_regex(o["kernel"])
        except argparse.ArgumentTypeError as e:
            fail(f"--kernel {e}")
    timeout = None
    if o["ncu_timeout"] is not None:
        try:
            timeout = float(o["ncu_timeout"])
        except ValueError:
            timeout = -1.0
        if not timeout > 0:
            fail(f"--ncu-timeout takes a positive number of seconds, not {o['ncu_timeout']!r}")
    return CounterRequest(top=_int_opt(o, "top", 5, 1), kernel_regex=o["kernel"], region=o["region"],
                          launch_skip=_int_opt(o, "launch_skip", 0), launch_count=_int_opt(o, "launch_count", 1, 1),
                          clock_control=o["clock_control"] or "none", ncu=o["ncu"], timeout_s=timeout,
                          steps=o["steps"], ranks=_ranks_opt(o["ranks"]), source=bool(o["source"]))


def _check_ncu(request) -> None:
    """Before the workload runs, once the options are known good: without ncu the counter pass could only fail
    after a whole run of the workload."""
    from kernelscope.collect.ncu.runner import NcuRunError, find_ncu

    try:
        find_ncu(request.ncu)
    except NcuRunError as e:
        fail(f"{e} (or leave out --counters for the trace pass alone)")


def _ranks_opt(text: str | None) -> list[int] | None:
    """--ranks 0,1 (or all): the ranks the counter pass profiles under torchrun."""
    if text is None or text.strip() == "all":
        return None
    try:
        ranks = [int(t) for t in text.split(",")]
    except ValueError:
        ranks = [-1]
    if not ranks or min(ranks) < 0:
        fail(f"--ranks takes ranks separated by commas (e.g. 0,1) or all, not {text!r}")
    return sorted(set(ranks))


def main(argv: list[str]) -> int:
    from kernelscope.collect.trace.runner import RunError, is_python_command, run, run_without_trace

    o = _parse_run(argv)
    if o["steps"] is not None:
        from kernelscope.collect.trace.steps import StepRangeError, parse_steps

        try:
            first, last = parse_steps(o["steps"])
        except StepRangeError as e:
            fail(str(e))
        o["steps"] = f"{first}-{last}"
    request = _counter_request(o)
    inputs = existing_files(o["command"])  # the script being profiled is never overwritten by its session
    out = output_path(o["output"] if o["output"] is not None
                      else _dt.datetime.now().strftime("kernelscope-%Y%m%d-%H%M%S.json"), o["force"], inputs,
                      "session file")
    if o["keep_trace"]:  # a file this command writes, like the session: same checks (no device, no input, -f)
        output_path(o["keep_trace"], o["force"], [*inputs, out], "kept trace")
    from kernelscope.collect.trace.torchrun import is_torchrun

    torchrun = is_torchrun(o["command"])
    if request is not None:
        _check_reports(out, o["force"], inputs, request, torchrun)
        _check_ncu(request)
    if o["sample_interval"] is not None:
        _set_sample_interval(o["sample_interval"])
    if o["operators"] is not None:
        _set_operators(o["operators"])
    python_workload = o["module"] is not None or (o["command"] and is_python_command(o["command"][0]))
    python_workload = python_workload or torchrun
    if (o["steps"] or o["memory"]) and not python_workload:
        fail(f"{'--steps' if o['steps'] else '--memory'} needs a Python workload: steps and the caching allocator are "
             "seen from inside Python (kernelscope.step(), torch)")
    try:
        if request is not None and not python_workload:
            result = run_without_trace(o["command"], out, force=o["force"])
        else:
            result = run(o["command"], out, module=o["module"], keep_trace=o["keep_trace"], steps=o["steps"],
                         memory=o["memory"], force=o["force"])
    except RunError as e:
        fail(str(e))
    exit_code = result.exit_code
    window_missed = _say_steps_and_memory(result.session, o)
    if window_missed and request is not None:
        result.session.collectors[collector.COUNTERS] = CollectorStatus(
            "not-run", "the step window held no step of the run, so the workload was not re-run under ncu")
        result.session.save(out)
        request = None
    exit_code = exit_code or (2 if window_missed else 0)
    if request is not None:
        counters_failed = _counters(result, o, request)
        exit_code = exit_code or counters_failed  # the workload's own failure code comes first
    if not o["quiet"] and not window_missed:  # a missed window said all there is in its one sentence
        s = result.session
        trace = s.collectors.get(collector.TRACE)
        what = f"{len(s.launches)} kernel launches" if s.launches else (
            f"no trace: {trace.reason}" if trace and trace.reason else "no kernels")
        counters = s.collectors.get(collector.COUNTERS)
        if counters is not None and counters.status == "ok":
            what += f", counters for {counters.details.get('kernels_profiled')} launches"
        print(visible(f"kernelscope: session written to {out} ({what}; {s.outcome}, exit code {exit_code}). "
                      f"View it with: kernelscope show {out}"), file=sys.stderr)
        _note_clocks(s)
    return exit_code


def _check_reports(out: Path, force: bool, inputs: list[str], request, torchrun: bool) -> None:
    """The Nsight Compute report(s) the counter pass will write: none may be clobbered without -f."""
    if request.ranks is not None and not torchrun:
        fail("--ranks chooses ranks of a torchrun job: give the torchrun command after '--'")
    if not torchrun:
        from kernelscope.collect.ncu.counter_pass import report_path_for

        output_path(report_path_for(out), force, inputs, "Nsight Compute report")
        return
    # one report per rank, FILE.rank<R>.ncu-rep: the ranks are known only after the trace pass
    from kernelscope.collect.ncu.rank_counters import rank_report_path

    first = rank_report_path(out, 0)
    for old in sorted(first.parent.glob(first.name.replace(".rank0.", ".rank*."))):
        output_path(old, force, inputs, "Nsight Compute report")


def _say_steps_and_memory(session, o: dict) -> bool:
    """One sentence each when the window held no step or --memory could not record; True for the former."""
    missed = False
    steps = session.collectors.get(collector.STEPS)
    if o["steps"] and steps is not None and steps.status == "not-run":
        print(f"kernelscope: error: {visible(steps.reason)}.", file=sys.stderr)
        missed = True
    memory = session.collectors.get(collector.MEMORY)
    if o["memory"] and memory is not None and memory.status == "not-run" and not missed:
        print(f"kernelscope: {visible(memory.reason)}.", file=sys.stderr)
    return missed


def _note_clocks(session) -> None:
    """Say so when kernels ran while the clocks were held back: their times are not like the others."""
    from kernelscope.analyze.gpu_stats import CLOCK_LOW_FRACTION, summarize_gpu_stats

    stats = summarize_gpu_stats(session) if session.samples else None
    if stats is not None and stats.flagged_samples:
        print(f"kernelscope: note: {stats.flagged_samples} of {stats.busy_samples} GPU samples taken while kernels ran "
              f"were throttled or had the SM clock below {CLOCK_LOW_FRACTION:.0%} of its maximum; "
              "`kernelscope show` marks them in the GPU stats panel.", file=sys.stderr)


def _counters(result, o: dict, request) -> int:
    """Run the counter pass; return a non-zero exit code when it failed."""
    from kernelscope.collect.ncu.counter_pass import run_counter_pass
    from kernelscope.model import CollectorStatus

    s = result.session
    if result.exit_code != 0 and s.launches:
        s.collectors[collector.COUNTERS] = CollectorStatus(
            "not-run", f"the workload failed in the trace pass (exit code {result.exit_code}), so it was not re-run")
        s.save(result.output)
        return 0
    command = ([sys.executable, "-m", o["module"], *o["command"]] if o["module"] else list(o["command"]))
    if not o["quiet"]:
        print("kernelscope: counter pass: running the workload under ncu ...", file=sys.stderr)

    def progress(line: str) -> None:
        if line.startswith("==PROF== Profiling") and not o["quiet"]:
            print("  " + visible(line.rstrip()), file=sys.stderr)  # ncu echoes kernel names

    from kernelscope.collect.trace.torchrun import is_torchrun

    if is_torchrun(command):  # each chosen rank runs under its own ncu (its output passes through torchrun's)
        from kernelscope.collect.ncu.rank_counters import run_rank_counter_pass

        ok = run_rank_counter_pass(s, command, result.output, request)
    else:
        ok = run_counter_pass(s, command, result.output, request, on_line=progress)
    s.save(result.output)
    if not ok:
        print(f"kernelscope: error: counter pass failed: {visible(s.collectors[collector.COUNTERS].reason)}.",
              file=sys.stderr)
        return 1
    return 0


def _set_operators(level: str) -> None:
    """The child (collect/bootstrap) inherits the environment; the trace recorder reads the level there."""
    import os

    from kernelscope.collect.trace.recorder import OPERATOR_LEVELS, OPERATORS_ENV

    if level not in OPERATOR_LEVELS:
        fail(f"--operators takes {', '.join(OPERATOR_LEVELS)}, not {visible(level)[:40]!r}")
    os.environ[OPERATORS_ENV] = level


def _set_sample_interval(text: str) -> None:
    """The child (collect/bootstrap) inherits the environment; the sampler reads the interval there."""
    import os

    from kernelscope.collect.nvml.sampler import INTERVAL_ENV

    try:
        ms = float(text)
    except ValueError:
        ms = -1.0
    if not 0 <= ms <= 60_000 or ms != ms:
        fail(f"--sample-interval takes milliseconds from 0 (off) to 60000, not {text!r}")
    os.environ[INTERVAL_ENV] = str(ms)
