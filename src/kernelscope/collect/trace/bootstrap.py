"""Child-process entry point for `kernelscope run`: runs a Python workload the way
``python`` would (script, ``-m module`` or ``-c code``) inside the trace pass,
then writes the session whatever happened.

Usage (internal): python -c CHILD_CODE --output FILE [--command JSON] -- (SCRIPT | -m MODULE | -c CODE) [ARGS...]

Kernelscope's own modules are imported with the working directory off ``sys.path`` (CHILD_CODE removes the
entry ``python -c`` puts first): a folder someone else controls must not supply them. The workload then gets
the path python itself would give it, and the session is written with kernelscope's path again.
"""
from __future__ import annotations

import json
import os
import runpy
import sys
import traceback

CHILD_CODE = (
    "import sys\n"
    "if sys.path[:1] == ['']:\n"
    "    del sys.path[0]\n"
    "from kernelscope.collect.trace.bootstrap import main\n"
    "sys.exit(main())\n"
)


def _run_workload(argv: list[str]) -> None:
    if argv[0] == "-m":
        sys.argv = [argv[1], *argv[2:]]
        sys.path.insert(0, os.getcwd())
        runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
    elif argv[0] == "-c":
        sys.argv = ["-c", *argv[2:]]
        sys.path.insert(0, "")
        exec(compile(argv[1], "<string>", "exec"), {"__name__": "__main__"})
    else:
        sys.argv = list(argv)
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
        runpy.run_path(argv[0], run_name="__main__")


def _print_workload_traceback() -> None:
    """Print the workload's traceback as python would, without kernelscope's own frames."""
    etype, err, tb = sys.exc_info()
    while tb is not None and (tb.tb_frame.f_code.co_filename == __file__
                              or tb.tb_frame.f_code.co_filename.endswith(("runpy.py", "<frozen runpy>"))
                              or tb.tb_frame.f_globals.get("__name__") == "kernelscope.collect.trace.api"):
        tb = tb.tb_next
    traceback.print_exception(etype, err, tb)


def main() -> int:
    args = sys.argv[1:]
    sep = args.index("--")
    opts, workload = args[:sep], args[sep + 1:]
    output = opts[opts.index("--output") + 1]
    command = json.loads(opts[opts.index("--command") + 1]) if "--command" in opts else workload
    keep_trace = opts[opts.index("--keep-trace") + 1] if "--keep-trace" in opts else None
    window = None
    if "--steps" in opts:
        from kernelscope.collect.trace.steps import parse_steps

        window = parse_steps(opts[opts.index("--steps") + 1])
    from kernelscope.collect.trace.api import profile

    own_path = list(sys.path)
    workload_path = own_path
    code = 0
    try:
        with profile(output, command=command, keep_trace=keep_trace, steps=window, memory="--memory" in opts):
            try:
                _run_workload(workload)
            finally:  # what the session writer imports late must not come from the workload's folder
                workload_path, sys.path[:] = list(sys.path), own_path
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
    except KeyboardInterrupt:
        code = 130
    except BaseException:
        _print_workload_traceback()
        code = 1
    sys.path[:] = workload_path  # the workload's own exit handlers run after this returns
    sys.stdout.flush()
    return code
