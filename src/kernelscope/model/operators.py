"""The program's operators behind the kernels: which aten operator launched each kernel, with what input shapes
and dtypes, from which Python line of the user's code, and which operator and line each host sync came from.

What the operators of one configuration share (name, enclosing operator, shapes, dtypes, module, Python line) is
stored once in ``ops``; a launch points at its operator by correlation id, a host sync by its start time, so the
launch table and the host syncs keep no per-row copy of it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Dims = tuple[Any, ...]  # a tensor's dims as the trace wrote them; a tensor list is a tuple of such tuples


@dataclass(frozen=True)
class Operator:
    """One operator configuration: the innermost aten op that made the launch or the sync (``name``), the
    outermost op enclosing it on its thread (``outer``, e.g. aten::linear around aten::addmm), its inputs'
    dims and dtypes as the trace recorded them (empty when the trace has no shapes), the nn.Module it ran in
    and the user's Python frame ("file.py(line): function", the first frame outside torch and library code;
    the line is the one the trace gives: the function's first line), and how many times it ran."""

    name: str
    outer: str | None = None
    input_dims: tuple[Dims, ...] = ()
    input_types: tuple[str, ...] = ()
    module: str | None = None
    python_frame: str | None = None
    calls: int = 0
    concrete_inputs: tuple[str, ...] = ()  # the non-tensor arguments as the trace wrote them (convolutions only)

    @property
    def python_line(self) -> str | None:
        """The user's frame as file:line function, e.g. "model.py:88 forward"."""
        f = self.python_frame
        if not f:
            return None
        head, sep, func = f.partition("): ")
        path, _, line = head.rpartition("(")
        return f"{path}:{line} {func}".strip() if sep and path and line.isdigit() else f

    @property
    def shapes_text(self) -> str:
        """The inputs as "f16[4,2048,1024], f16[3072,1024]" (tensor inputs only)."""
        parts = []
        for dims, dtype in zip(self.input_dims, self.input_types or ("",) * len(self.input_dims)):
            if isinstance(dims, tuple) and dims and all(isinstance(d, int) for d in dims):
                parts.append(f"{short_dtype(dtype)}[{','.join(map(str, dims))}]")
            elif isinstance(dims, tuple) and dims and all(isinstance(d, tuple) for d in dims):
                parts.append(f"{short_dtype(dtype)}[{len(dims)} tensors]")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"name": self.name, "calls": self.calls}
        if self.outer is not None:
            d["outer"] = self.outer
        if self.input_dims:
            d["input_dims"] = _as_lists(self.input_dims)
            d["input_types"] = list(self.input_types)
        if self.module is not None:
            d["module"] = self.module
        if self.python_frame is not None:
            d["python_frame"] = self.python_frame
        if self.concrete_inputs:
            d["concrete_inputs"] = list(self.concrete_inputs)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Operator":
        return cls(name=str(d["name"]), outer=d.get("outer"), input_dims=_as_tuples(d.get("input_dims") or []),
                   input_types=tuple(str(t) for t in d.get("input_types") or []), module=d.get("module"),
                   python_frame=d.get("python_frame"), calls=int(d.get("calls", 0)),
                   concrete_inputs=tuple(str(c) for c in d.get("concrete_inputs") or []))


_DTYPES = {"float": "f32", "c10::Half": "f16", "c10::BFloat16": "bf16", "double": "f64", "long int": "i64",
           "int": "i32", "bool": "bool", "unsigned char": "u8", "signed char": "i8", "short int": "i16",
           "c10::Float8_e4m3fn": "f8e4m3", "c10::Float8_e5m2": "f8e5m2", "TensorList": "list"}


def short_dtype(t: str) -> str:
    """The trace's C++ dtype name in the short form ("c10::Half" -> "f16"); unknown names as they are."""
    return _DTYPES.get(t, t)


def dtype_bytes(t: str) -> int | None:
    """Bytes per element of a dtype as the trace names it, or None when unknown (a scalar, a list)."""
    return {"f32": 4, "f16": 2, "bf16": 2, "f64": 8, "i64": 8, "i32": 4, "bool": 1, "u8": 1, "i8": 1, "i16": 2,
            "f8e4m3": 1, "f8e5m2": 1}.get(short_dtype(t))


def _as_lists(v: Any) -> Any:
    return [_as_lists(x) for x in v] if isinstance(v, (tuple, list)) else v


def _as_tuples(v: Any) -> Any:
    return tuple(_as_tuples(x) for x in v) if isinstance(v, (tuple, list)) else v


@dataclass
class Operators:
    """The operators of a session: configurations once, launches and host syncs pointing at them.

    ``shapes`` / ``stacks``: whether the trace recorded input shapes (record_shapes) and Python stacks
    (with_stack); each False makes the matching facts absent, never guessed."""

    ops: list[Operator] = field(default_factory=list)
    launch_op: dict[int, int] = field(default_factory=dict)  # launch correlation id -> index into ops
    sync_op: dict[int, int] = field(default_factory=dict)  # host sync cpu_start_ns -> index into ops
    shapes: bool = False
    stacks: bool = False

    def of_launch(self, correlation_id: int | None) -> Operator | None:
        k = self.launch_op.get(correlation_id) if correlation_id is not None else None
        return None if k is None else self.ops[k]

    def of_sync(self, cpu_start_ns: int) -> Operator | None:
        k = self.sync_op.get(cpu_start_ns)
        return None if k is None else self.ops[k]

    def missing(self) -> list[str]:
        """What the trace did not record, one phrase each (empty when shapes and stacks are there)."""
        out = []
        if not self.shapes:
            out.append("input shapes (record_shapes=True)")
        if not self.stacks:
            out.append("Python stacks (with_stack=True)")
        return out

    def to_dict(self) -> dict[str, Any]:
        lc = sorted(self.launch_op.items())
        sc = sorted(self.sync_op.items())
        return {"ops": [o.to_dict() for o in self.ops], "launch_correlation": [c for c, _ in lc],
                "launch_op": [k for _, k in lc], "sync_start_ns": [t for t, _ in sc], "sync_op": [k for _, k in sc],
                "shapes": self.shapes, "stacks": self.stacks}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Operators":
        return cls(ops=[Operator.from_dict(o) for o in d.get("ops") or []],
                   launch_op=dict(zip(d.get("launch_correlation") or [], d.get("launch_op") or [])),
                   sync_op=dict(zip(d.get("sync_start_ns") or [], d.get("sync_op") or [])),
                   shapes=bool(d.get("shapes")), stacks=bool(d.get("stacks")))
