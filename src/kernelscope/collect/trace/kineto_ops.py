"""The operators of a Kineto trace: each kernel launch and host sync linked to the aten op whose CPU span holds the
runtime call on the same thread (the innermost, and the outermost around it), that op's input dims and dtypes
(``record_shapes=True``), the nn.Module and the user's Python frame (``with_stack=True``: the python_function
events on that thread whose spans hold the call).

Events are kept as they arrive in compact columns (an op configuration is interned once); ``operators`` links
them in one sweep per thread over the spans sorted by start.
"""
from __future__ import annotations

from array import array
from collections import defaultdict
from typing import Any, Iterable

from kernelscope.model.operators import Operator, Operators

_MALFORMED = (KeyError, TypeError, ValueError, AttributeError, OverflowError, IndexError)
# frames that are not the user's: torch itself, the interpreter's built-ins, the standard library's plumbing
# (the profiler writes a library's path from its package on, so only known packages can be told apart: triton's
# launcher, kernelscope's own step marks and the interpreter's runpy are not the user's line)
_NOT_USER_PREFIXES = ("torch/", "<", "nn.Module:", "nn.Optimizer", "contextlib.py", "functools.py", "threading.py",
                      "enum.py", "dataclasses.py", "typing.py", "abc.py", "copy.py", "runpy.py", "triton/",
                      "kernelscope/")
_CPU, _PY = 0, 1
GRAPH_LAUNCH_CALLS = frozenset({"cudaGraphLaunch", "cuGraphLaunch"})  # a CUDA graph's kernels come from these
_INT64 = (-(2 ** 63), 2 ** 63 - 1)


def _tuples(v: Any) -> Any:
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v


def _ns(us: Any) -> int:
    return int(round(float(us) * 1000.0))


def is_user_frame(name: str) -> bool:
    """Whether a python_function name ("path(line): func") is the user's code: not torch, not a library in
    site-packages, not a built-in or the standard library's plumbing."""
    return not name.startswith(_NOT_USER_PREFIXES) and "site-packages" not in name and "/torch/" not in name \
        and "/lib/python3" not in name and "(" in name


def _torch_call(frame: str) -> str:
    """A torch frame "torch/cuda/__init__.py(1061): synchronize" as the call "torch.cuda.synchronize"."""
    head, _, func = frame.partition("): ")
    path = head.rpartition("(")[0].removesuffix(".py").removesuffix("/__init__")
    return f"{path.replace('/', '.')}.{func}" if path and func else frame


class OperatorEvents:
    """cpu_op and python_function events collected one at a time (``add``), linked at the end."""

    def __init__(self) -> None:
        self.configs: dict[tuple[Any, ...], int] = {}
        self.config_list: list[tuple[str, tuple[Any, ...], tuple[str, ...], tuple[str, ...]]] = []
        self.frames: dict[str, int] = {}
        self.frame_list: list[str] = []
        # per thread, three int64 per span: start ns, end ns, id x 2 + kind (24 bytes a span, no object per event)
        self.spans: dict[tuple[Any, Any], Any] = defaultdict(lambda: array("q"))
        self.shapes = False
        self.stacks = False
        self.graph_launches: set[int] = set()  # correlation ids of cudaGraphLaunch calls

    def runtime_call(self, e: dict[str, Any]) -> None:
        """A runtime call: a graph launch's correlation id is kept, so its kernels are known as a graph's even
        where no op or Python frame encloses the call."""
        if e.get("name") in GRAPH_LAUNCH_CALLS:
            corr = (e.get("args") or {}).get("correlation") if isinstance(e.get("args"), dict) else None
            if type(corr) is int:
                self.graph_launches.add(corr)

    def add(self, e: dict[str, Any]) -> None:
        """One cpu_op or python_function event; a malformed one is passed over (its launches get no operator)."""
        try:
            start = _ns(e["ts"])
            end = start + _ns(e.get("dur", 0))
            if not (_INT64[0] <= start <= end <= _INT64[1]):  # a time past int64, a negative duration: left out
                return
            thread = (e.get("pid"), e.get("tid"))
            name = e.get("name")
            if not isinstance(name, str):
                return
            if e.get("cat") == "cpu_op":
                args = e.get("args") or {}
                dims = args.get("Input Dims")
                if dims is not None:
                    self.shapes = True
                # the non-tensor arguments only where a formula needs them: a convolution's stride and padding
                concrete = tuple(str(c) for c in args.get("Concrete Inputs") or []) if "conv" in name else ()
                key = (name, _tuples(dims or []), tuple(str(t) for t in args.get("Input type") or []), concrete)
                k = self.configs.get(key)
                if k is None:
                    k = self.configs[key] = len(self.config_list)
                    self.config_list.append(key)
                self.spans[thread].extend((start, end, 2 * k + _CPU))
            else:
                self.stacks = True
                if name.startswith("<"):  # a built-in: never the user's frame, a module or a torch call
                    return
                k = self.frames.get(name)
                if k is None:
                    k = self.frames[name] = len(self.frame_list)
                    self.frame_list.append(name)
                self.spans[thread].extend((start, end, 2 * k + _PY))
        except _MALFORMED:
            return

    def operators(self, launches: Iterable[tuple[int, tuple[Any, Any, int]]],
                  syncs: Iterable[tuple[int, tuple[Any, Any, int]]]) -> Operators | None:
        """The Operators of the launches (correlation id -> (pid, tid, call time ns)) and host syncs (start ns on
        the session clock -> (pid, tid, call time ns)); None when the trace has no cpu_op and no python_function
        event."""
        if not self.spans and not self.graph_launches:
            return None
        queries, sync_start = _queries(launches, syncs)
        out = Operators(shapes=self.shapes, stacks=self.stacks)
        index: dict[tuple[Any, ...], int] = {}
        seen_spans: list[set[tuple[Any, int]]] = []
        empty = array("q")
        for thread, (q_ts, q_key) in queries.items():
            flat = self.spans.get(thread) or empty
            starts, ends, codes = flat[0::3], flat[1::3], flat[2::3]
            order = sorted(range(len(starts)), key=ends.__getitem__, reverse=True)  # the outer first at one start
            order.sort(key=starts.__getitem__)
            stack: list[tuple[int, int, int, int, int]] = []  # (start, end, kind, id, span number)
            i = 0
            for j in sorted(range(len(q_ts)), key=q_ts.__getitem__):
                ts, key = q_ts[j], q_key[j]
                while i < len(order) and starts[order[i]] <= ts:
                    n = order[i]
                    while stack and stack[-1][1] < starts[n]:
                        stack.pop()
                    stack.append((starts[n], ends[n], codes[n] & 1, codes[n] >> 1, n))
                    i += 1
                while stack and stack[-1][1] < ts:
                    stack.pop()
                op, span = self._operator(stack)
                if op is None and key >= 0 and key in self.graph_launches:
                    op = ("cudaGraphLaunch", None, (), (), None, None, ())
                if op is None:
                    continue
                k = index.get(op)
                if k is None:
                    k = index[op] = len(out.ops)
                    out.ops.append(Operator(*op[:6], concrete_inputs=op[6]))
                    seen_spans.append(set())
                if span is not None:
                    seen_spans[k].add((thread, span))
                if key >= 0:
                    out.launch_op[key] = k
                else:
                    out.sync_op[sync_start[-1 - key]] = k
        out.ops = [Operator(o.name, o.outer, o.input_dims, o.input_types, o.module, o.python_frame,
                            max(1, len(seen_spans[k])), o.concrete_inputs) for k, o in enumerate(out.ops)]
        return out

    def _operator(self, stack: list[tuple[int, int, int, int, int]]) -> tuple[tuple[Any, ...] | None, int | None]:
        """The operator facts of the innermost op on ``stack`` (open spans, outermost first) and its span number."""
        inner = outer = None
        module = user = torch_frame = None
        for start, end, kind, k, n in reversed(stack):
            if kind == _CPU:
                if inner is None:
                    inner = (k, n)
                outer = k
            else:
                name = self.frame_list[k]
                if module is None and name.startswith("nn.Module: "):
                    module = name[len("nn.Module: "):]
                if user is None and is_user_frame(name):
                    user = name
                if inner is None and torch_frame is None and name.startswith("torch/"):
                    torch_frame = name
        if inner is not None:
            name, dims, types, concrete = self.config_list[inner[0]]
            outer_name = self.config_list[outer][0] if outer is not None and outer != inner[0] else None
            return (name, outer_name, dims, types, module, user, concrete), inner[1]
        if torch_frame is not None:  # a call with no aten op around it: torch.cuda.synchronize, a graph replay
            return (_torch_call(torch_frame), None, (), (), module, user, ()), None
        if user is not None:
            return ("python", None, (), (), module, user, ()), None
        return None, None


def _queries(launches: Iterable[tuple[int, tuple[Any, Any, int]]], syncs: Iterable[tuple[int, tuple[Any, Any, int]]]
             ) -> tuple[dict[tuple[Any, Any], tuple[Any, Any]], dict[int, int]]:
    """Per thread: call times and what each call is (a launch's correlation id, or -1 - the sync's number) as int64
    columns, and each sync's start by its number."""
    queries: dict[tuple[Any, Any], tuple[Any, Any]] = defaultdict(lambda: (array("q"), array("q")))
    sync_start: dict[int, int] = {}
    for corr, (pid, tid, ts) in launches:
        if not (type(corr) is int and 0 <= corr <= _INT64[1] and type(ts) is int and _INT64[0] <= ts <= _INT64[1]):
            continue  # an id or time the columns cannot hold: that launch gets no operator
        q = queries[(pid, tid)]
        q[0].append(ts)
        q[1].append(corr)
    for n, (start, (pid, tid, ts)) in enumerate(syncs):
        if not _INT64[0] <= ts <= _INT64[1]:
            continue
        q = queries[(pid, tid)]
        q[0].append(ts)
        q[1].append(-1 - n)
        sync_start[n] = start
    return queries, sync_start


def link_operators(ops: OperatorEvents, launch_sites: Iterable[tuple[int, tuple[Any, Any, int]]],
                   kernels: set[Any], calls: Iterable[dict[str, Any]], sync_starts: set[int],
                   origin_ns: int) -> Operators | None:
    """``ops.operators`` for the launch sites of the ``kernels`` (their correlation ids) and for the runtime
    ``calls`` that are host syncs (their start on the session clock among ``sync_starts``, as host_syncs.py
    places them)."""
    syncs = []
    for e in calls:
        try:
            ts = _ns(e["ts"])
        except _MALFORMED:
            continue
        if ts - origin_ns in sync_starts:
            syncs.append((ts - origin_ns, (e.get("pid"), e.get("tid"), ts)))
    return ops.operators(((c, site) for c, site in launch_sites if c in kernels), syncs)
