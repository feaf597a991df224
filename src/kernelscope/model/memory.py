"""What a session holds beside its launches about memory and iterations: the caching allocator's history
(`run --memory`), marks (`kernelscope.mark`) and the window of steps the trace pass recorded (`run --steps`).

Plain data, no third-party imports. Times are on the session clock (ns since ``Session.time_origin_ns``, like
``Launch.start_ns``) where the session has one; ``wall_time_ns`` values are absolute (``time.time_ns()``).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

# The allocator's trace actions, as torch.cuda.memory._snapshot() names them; stored as indices into this table
# (the file keeps its own copy, so a torch that adds actions does not break old files).
MEMORY_ACTIONS = ("alloc", "free_requested", "free_completed", "segment_alloc", "segment_free", "segment_map",
                  "segment_unmap", "snapshot", "oom")

MarkValue = Any  # a number, a string, true/false, or a list of numbers (a shape)


@dataclass
class Mark:
    """kernelscope.mark(name, **values): a point in time with the allocator's bytes and the user's values."""

    name: str
    wall_time_ns: int
    t_ns: int | None = None  # session clock; None when the session has no trace to give it an origin
    step: int | None = None  # the step running when it was marked (kernelscope.step() counts), if steps are counted
    allocated_bytes: int | None = None  # torch.cuda.memory_allocated() at the mark
    reserved_bytes: int | None = None  # torch.cuda.memory_reserved() at the mark
    memory_missing_reason: str | None = None  # why the bytes are absent (no torch, no CUDA)
    values: dict[str, MarkValue] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "wall_time_ns": self.wall_time_ns, "t_ns": self.t_ns, "step": self.step,
                "allocated_bytes": self.allocated_bytes, "reserved_bytes": self.reserved_bytes,
                "memory_missing_reason": self.memory_missing_reason, "values": dict(self.values)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Mark":
        return cls(name=str(d["name"]), wall_time_ns=int(d["wall_time_ns"]), t_ns=d.get("t_ns"), step=d.get("step"),
                   allocated_bytes=d.get("allocated_bytes"), reserved_bytes=d.get("reserved_bytes"),
                   memory_missing_reason=d.get("memory_missing_reason"), values=dict(d.get("values") or {}))


@dataclass
class MemoryHistory:
    """The PyTorch caching allocator's trace of one device, column by column (one entry per allocator event).

    ``stack[i]`` indexes ``stacks`` (-1: no stack recorded); a stack is its Python frames, innermost first, each
    "function (file:line)". ``end_allocated_bytes``/``end_reserved_bytes`` are the allocator's state when the
    snapshot was taken (sums over its segments), so the bytes allocated before the first event follow from them.
    """

    device_index: int
    actions: list[str] = field(default_factory=lambda: list(MEMORY_ACTIONS))
    t_ns: list[int] = field(default_factory=list)
    action: list[int] = field(default_factory=list)
    address: list[int] = field(default_factory=list)
    size: list[int] = field(default_factory=list)
    stack: list[int] = field(default_factory=list)
    stacks: list[list[str]] = field(default_factory=list)
    end_allocated_bytes: int = 0
    end_reserved_bytes: int = 0
    max_entries: int | None = None  # the ring buffer's size: older events were dropped when it filled
    problems: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.t_ns)

    def in_time_order(self) -> tuple["MemoryHistory", int]:
        """This history with its events sorted by ``t_ns``, stably (events at one time keep their order), and how
        many events moved; the history itself and 0 when its times never go back. The allocator appends events
        as they happen, so times out of order come from a damaged or edited file; the readers that bucket or
        bisect by time, and the running sums event by event, need one order."""
        t = self.t_ns
        if all(a <= b for a, b in zip(t, t[1:])):
            return self, 0
        order = sorted(range(len(t)), key=t.__getitem__)
        moved = sum(1 for i, j in enumerate(order) if i != j)

        def pick(col: list[int]) -> list[int]:
            return [col[i] for i in order]
        return replace(self, t_ns=pick(t), action=pick(self.action), address=pick(self.address),
                       size=pick(self.size), stack=pick(self.stack), problems=list(self.problems)), moved

    def to_dict(self) -> dict[str, Any]:
        return {"device_index": self.device_index, "actions": list(self.actions), "t_ns": list(self.t_ns),
                "action": list(self.action), "address": list(self.address), "size": list(self.size),
                "stack": list(self.stack), "stacks": [list(s) for s in self.stacks],
                "end_allocated_bytes": self.end_allocated_bytes, "end_reserved_bytes": self.end_reserved_bytes,
                "max_entries": self.max_entries, "problems": list(self.problems)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "MemoryHistory":
        return cls(device_index=int(d["device_index"]), actions=[str(a) for a in d["actions"]],
                   t_ns=[int(v) for v in d["t_ns"]], action=[int(v) for v in d["action"]],
                   address=[int(v) for v in d["address"]], size=[int(v) for v in d["size"]],
                   stack=[int(v) for v in d["stack"]], stacks=[[str(f) for f in s] for s in d.get("stacks") or []],
                   end_allocated_bytes=int(d["end_allocated_bytes"]), end_reserved_bytes=int(d["end_reserved_bytes"]),
                   max_entries=d.get("max_entries"), problems=[str(p) for p in d.get("problems") or []])


@dataclass
class StepWindow:
    """The steps `run --steps FIRST-LAST` asked for and what the run did. kernelscope.step() ends a step: step 0
    runs from the start to the first call, step k from the k-th call to the (k+1)-th."""

    first: int
    last: int
    steps_run: int = 0  # steps that ended (calls to kernelscope.step()); the run started step steps_run last
    recorded_first: int | None = None  # the steps the trace pass recorded (None: none)
    recorded_last: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"first": self.first, "last": self.last, "steps_run": self.steps_run,
                "recorded_first": self.recorded_first, "recorded_last": self.recorded_last}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "StepWindow":
        return cls(first=int(d["first"]), last=int(d["last"]), steps_run=int(d.get("steps_run") or 0),
                   recorded_first=d.get("recorded_first"), recorded_last=d.get("recorded_last"))
