"""Program rules by what the program does, read from its operators (model/operators.py): the aten op behind each
kernel and host sync, its input shapes and the user's Python line. Each rule is one small function with the
evidence it found; they register with the other program rules (analyze/program_rules.py).

- sync-at-op: host syncs of every kind, each named with the operator and Python line that caused it.
- unfused-attention: attention computed as separate ops on an S x S score tensor (matmul, softmax, matmul).
- unfused-norm: LayerNorm / RMSNorm written out as elementwise and reduction ops.
- optimizer-per-tensor: an optimizer stepping tensor by tensor (foreach=False).
"""
from __future__ import annotations

import bisect
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from kernelscope.analyze import breakdown as bd
from kernelscope.analyze.program_rules import (MIN_GAIN_PCT, MIN_RECURRENCES, NotEvaluated, ProgramContext,
                                               Finding, ms, pct, program_rule)
from kernelscope.model.operators import Operator, Operators

# What an operator behind a host sync is, in the user's words: (innermost op, outer op or None) -> the call.
SYNC_CAUSES: dict[tuple[str, str | None], str] = {
    ("aten::_local_scalar_dense", "aten::item"): ".item()",
    ("aten::_local_scalar_dense", None): ".item() / a tensor in a Python condition",
    ("aten::nonzero", "aten::index"): "boolean-mask indexing x[mask] (nonzero)",
    ("aten::nonzero", "aten::masked_select"): "torch.masked_select (nonzero)",
    ("aten::nonzero", "aten::nonzero"): "torch.nonzero",
    ("aten::nonzero", None): "torch.nonzero",
    ("aten::copy_", "aten::to"): "a device-to-host copy: .cpu(), .tolist(), .numpy() or .to('cpu')",
    ("aten::copy_", "aten::_to_copy"): "a device-to-host copy: .cpu(), .tolist(), .numpy() or .to('cpu')",
    ("aten::copy_", None): "a device-to-host copy",
    ("aten::_local_scalar_dense", "aten::is_nonzero"): "a tensor used as a Python bool (if t:, while t:)",
    ("aten::_local_scalar_dense", "aten::equal"): "torch.equal",
    ("aten::_local_scalar_dense", "aten::allclose"): "torch.allclose",
    ("torch.cuda.synchronize", None): "torch.cuda.synchronize()",
    ("torch.cuda.streams.synchronize", None): "Stream.synchronize() / Event.synchronize()",
    ("torch.cuda.streams.wait", None): "Event.wait()",
    ("torch.cuda.streams.query", None): "Stream.query() / Event.query()",
}
UNIQUE_OPS = ("aten::_unique2", "aten::unique_dim", "aten::_unique", "aten::unique_consecutive")
SOFTMAX_OPS = ("aten::_softmax", "aten::softmax", "aten::_safe_softmax")
MATMUL_OPS = ("aten::bmm", "aten::mm", "aten::matmul", "aten::baddbmm")
PROJECTION_OPS = ("aten::addmm", "aten::mm", "aten::linear")  # the q/k/v and output projections stay with SDPA
NORM_STAT_OPS = ("aten::rsqrt", "aten::sqrt")
OPTIMIZER_REGION = "Optimizer.step#"
MIN_SCORE_DIM = 128  # a softmax over a last dim this long on a 4-D tensor: attention scores
MIN_PER_TENSOR_LAUNCHES = 20  # per optimizer step: below it a per-tensor loop costs little


def sync_cause(op: Operator) -> str:
    """The call behind a host sync, in the user's words (SYNC_CAUSES), or the operator's name."""
    if op.name in UNIQUE_OPS or (op.outer or "").startswith("aten::unique"):
        return "torch.unique"
    return SYNC_CAUSES.get((op.name, op.outer)) or SYNC_CAUSES.get((op.name, None)) or op.name


@dataclass(frozen=True)
class _Launch:
    start_ns: int
    end_ns: int
    op: int  # index into Operators.ops


def _window_launches(ctx: ProgramContext, ops: Operators) -> tuple[list[_Launch], bd.RankBreakdown]:
    """The one rank's kernel launches that start in its window, with their operator (launches without one out)."""
    b = ctx.breakdown.ranks[0]
    t = ctx.session.launch_table()
    out = []
    for start, dur, corr in zip(t.start_ns, t.duration_ns, t.correlation_id):
        if start is None or not (b.window_start_ns <= start < b.window_end_ns):
            continue
        k = ops.launch_op.get(corr) if corr is not None else None
        if k is not None:
            out.append(_Launch(start, start + dur, k))
    return out, b


def _needs(ctx: ProgramContext, rule: str, shapes: bool = False, stacks: bool = True) -> Operators | NotEvaluated:
    ops = ctx.session.operators
    if len(ctx.breakdown.ranks) != 1:
        return NotEvaluated(rule, "operators are kept for one-process sessions only")
    if ops is None:
        return NotEvaluated(rule, "the session has no operators (a trace without CPU ops)")
    if shapes and not ops.shapes:
        return NotEvaluated(rule, "the trace has no input shapes (record with record_shapes=True)")
    return ops


def _where(op: Operator) -> str:
    return f" at {op.python_line}" if op.python_line else ""


def _numel(dims: Any) -> int:
    return math.prod(dims) if isinstance(dims, tuple) and all(isinstance(d, int) for d in dims) else 0


@program_rule("sync-at-op", "host syncs named by operator and Python line",
              "host syncs and the operators and Python stacks around them (record_shapes, with_stack), GPU idle",
              replaces=("sync-in-loop",))
def sync_at_op(ctx: ProgramContext) -> list:
    ops = _needs(ctx, "sync-at-op")
    if isinstance(ops, NotEvaluated):
        return [ops]
    b = ctx.breakdown.ranks[0]
    syncs = [h for h in ctx.session.host_syncs if b.window_start_ns <= h.cpu_start_ns < b.window_end_ns
             and ops.of_sync(h.cpu_start_ns) is not None]
    sites_of = defaultdict(list)
    for h in syncs:
        op = ops.of_sync(h.cpu_start_ns)
        sites_of[(sync_cause(op), op.python_line)].append(h)
    # a site once a step (logging the loss, the step's own synchronize; a device-to-host copy is two calls) is
    # the loop's rhythm, not a cause
    syncs = [h for hs in sites_of.values() if len(hs) >= max(MIN_RECURRENCES, 3 * b.steps) for h in hs]
    if not syncs:
        return []
    busy = sorted((a.start_ns, a.end_ns) for a in ctx.windowed(b.rank))
    ends = [e for _, e in busy]
    by_site: dict[tuple[str, str], list[int]] = defaultdict(list)
    drained: set[int] = set()
    for h in syncs:
        op = ops.of_sync(h.cpu_start_ns)
        by_site[(sync_cause(op), op.python_line or "(no Python line)")].append(h.cpu_end_ns)
        k = bisect.bisect_left(ends, h.cpu_end_ns)  # the first activity ending after the call returned
        if k < len(busy) and busy[k][0] > h.cpu_end_ns and k > 0:
            drained.add(k)  # the GPU was idle when the sync returned: the gap up to busy[k] is the sync's
    idle = sum(busy[k][0] - max(busy[k - 1][1], b.window_start_ns) for k in drained)
    gain = pct(idle, b.wall_ns)
    if gain < MIN_GAIN_PCT:
        return []
    sites = sorted(by_site.items(), key=lambda kv: -len(kv[1]))
    per_step = f" ({len(syncs) / b.steps:.0f} per step)" if b.steps else ""
    what = "; ".join(f"{cause}{'' if line.startswith('(') else ' at ' + line} x{len(t):,}" for (cause, line), t in
                     sites[:3])
    return [Finding(
        "sync-at-op", bd.AFTER_SYNC, f"the host waits for the GPU inside the loop: {sites[0][0][0]}"
        + ("" if sites[0][0][1].startswith("(") else f" at {sites[0][0][1]}"),
        f"{len(syncs):,} host syncs{per_step}: {what}. Each drains the GPU's queue: the GPU then idles until the "
        f"host launches again",
        gain, "GPU idle from the return of each host sync to the next activity / wall time of the window",
        (("host syncs in the window", len(syncs)), ("calls and lines", what),
         ("GPU idle after them, ms", ms(idle)), ("wall time of the window, ms", ms(b.wall_ns))),
        "keep the values on the GPU and read them once after the loop: accumulate in tensors, compare with torch "
        "ops (torch.where instead of x[mask], a running sum instead of .item()), stack per-step values and copy "
        "them with one .cpu() / .tolist(); remove torch.cuda.synchronize() (time with CUDA events)",
        None, b.rank)]


def _score_shape(op: Operator) -> tuple[int, ...] | None:
    """The S x S scores a softmax op reads, when it is attention's: 4-D, the last dim at least MIN_SCORE_DIM."""
    if op.name not in SOFTMAX_OPS or not op.input_dims:
        return None
    d = op.input_dims[0]
    if isinstance(d, tuple) and len(d) == 4 and all(isinstance(x, int) for x in d) and d[-1] >= MIN_SCORE_DIM:
        return d
    return None


def _touches_scores(op: Operator, numel: int) -> bool:
    """Whether an op reads the score tensor (numel elements) or, for a matmul, writes it ([N,S,D] x [N,D,S])."""
    dims = [d for d in op.input_dims if isinstance(d, tuple)]
    if any(_numel(d) == numel for d in dims):
        return True
    if op.name in MATMUL_OPS and len(dims) >= 2 and len(dims[0]) >= 2 and len(dims[1]) >= 2:
        a, c = dims[0], dims[1]
        return _numel(a[:-2]) * a[-2] * c[-1] == numel
    return False


@program_rule("unfused-attention", "attention as separate ops on an S x S score tensor",
              "operators with input shapes (record_shapes) and their kernels' times")
def unfused_attention(ctx: ProgramContext) -> list:
    ops = _needs(ctx, "unfused-attention", shapes=True)
    if isinstance(ops, NotEvaluated):
        return [ops]
    scores = {k: s for k, op in enumerate(ops.ops) if (s := _score_shape(op)) is not None}
    if not scores:
        return []
    numels = {_numel(s) for s in scores.values()}
    chain = {k for k, op in enumerate(ops.ops) if any(_touches_scores(op, n) for n in numels)}
    # with the scores, what the attention function does around them (the mask it builds, the copies that make q, k
    # and v contiguous for the matmuls): the ops of the softmax's own Python function, projections left out
    frames = {ops.ops[k].python_frame for k in scores} - {None}
    if frames and ops.stacks:
        chain |= {k for k, op in enumerate(ops.ops) if op.python_frame in frames and op.name not in PROJECTION_OPS}
    launches, b = _window_launches(ctx, ops)
    chain_ns = sum(x.end_ns - x.start_ns for x in launches if x.op in chain)
    matmul_ns = sum(x.end_ns - x.start_ns for x in launches if x.op in chain and ops.ops[x.op].name in MATMUL_OPS)
    causal = any(ops.ops[k].name in ("aten::masked_fill_", "aten::masked_fill", "aten::where", "aten::add")
                 for k in chain)
    fused_ns = matmul_ns * (0.5 if causal else 1.0)
    gain = pct(chain_ns - fused_ns, b.wall_ns)
    if gain < MIN_GAIN_PCT:
        return []
    soft = ops.ops[next(iter(scores))]
    shape = "x".join(map(str, next(iter(scores.values()))))
    return [Finding(
        "unfused-attention", bd.KERNELS, f"attention{_where(soft)} computed as separate ops on a {shape} score tensor",
        f"attention{_where(soft)} is computed as matmul, softmax and matmul on a {shape} score tensor that every "
        f"op writes to and reads from memory: {pct(chain_ns, b.wall_ns):.1f}% of the wall time",
        gain, "(kernel time of the ops on the score tensor - its matmuls' time" + (" x 0.5, causal" if causal else "")
        + ") / wall time: a fused attention kernel does the matmuls' work and never writes the scores",
        (("score tensor (B, H, S, S)", shape), ("ops on it", ", ".join(sorted({ops.ops[k].name for k in chain}))),
         ("their kernel time, ms", ms(chain_ns)), ("matmul kernel time, ms", ms(matmul_ns)),
         ("causal mask applied as an op", causal), ("wall time of the window, ms", ms(b.wall_ns))),
        "use torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=...) (flash / memory-efficient "
        "kernels); for Hugging Face models load with attn_implementation=\"sdpa\" (or \"flash_attention_2\")",
        None, b.rank)]


@program_rule("unfused-norm", "LayerNorm / RMSNorm written out as elementwise ops",
              "operators with input shapes and Python lines (record_shapes, with_stack) and their kernels' times")
def unfused_norm(ctx: ProgramContext) -> list:
    ops = _needs(ctx, "unfused-norm", shapes=True)
    if isinstance(ops, NotEvaluated):
        return [ops]
    # a norm written out: rsqrt / sqrt of a [..., 1] statistic, at a Python line that also takes a mean
    lines = {op.python_frame for op in ops.ops if op.name in NORM_STAT_OPS and op.input_dims
             and isinstance(op.input_dims[0], tuple) and op.input_dims[0][-1:] == (1,)}
    lines &= {op.python_frame for op in ops.ops if op.name == "aten::mean"}
    lines.discard(None)
    if not lines:
        return []
    chain = {k for k, op in enumerate(ops.ops) if op.python_frame in lines and op.name not in MATMUL_OPS
             and op.name not in ("aten::addmm", "aten::mm", "aten::linear")}
    launches, b = _window_launches(ctx, ops)
    mine = [x for x in launches if x.op in chain]
    stats = [x for x in mine if ops.ops[x.op].name in NORM_STAT_OPS]
    if not mine or not stats:
        return []
    chain_ns = sum(x.end_ns - x.start_ns for x in mine)
    # a fused norm reads the input and writes the output once: about one full-size elementwise kernel
    full = max(_numel(ops.ops[x.op].input_dims[0]) if ops.ops[x.op].input_dims else 0 for x in mine)
    one_pass = [x.end_ns - x.start_ns for x in mine
                if ops.ops[x.op].input_dims and _numel(ops.ops[x.op].input_dims[0]) == full]
    fused_ns = len(stats) * (sorted(one_pass)[len(one_pass) // 2] if one_pass else 0)
    gain = pct(chain_ns - fused_ns, b.wall_ns)
    if gain < MIN_GAIN_PCT:
        return []
    line = next(op for op in ops.ops if op.python_frame in lines)
    return [Finding(
        "unfused-norm", bd.KERNELS, f"a norm written out as elementwise and reduction ops{_where(line)}",
        f"a LayerNorm / RMSNorm{_where(line)} runs as {len(mine) // max(1, len(stats))} kernels per call "
        f"({len(stats):,} calls), each a pass over the activations: {pct(chain_ns, b.wall_ns):.1f}% of the wall time",
        gain, "(kernel time of the norm's ops - calls x median time of one full-size pass) / wall time: a fused "
        "norm reads and writes the tensor once",
        (("ops", ", ".join(sorted({ops.ops[k].name for k in chain}))), ("calls", len(stats)),
         ("their kernel time, ms", ms(chain_ns)), ("one-pass estimate, ms", ms(fused_ns)),
         ("wall time of the window, ms", ms(b.wall_ns))),
        "use torch.nn.functional.layer_norm / torch.nn.LayerNorm, or torch.nn.functional.rms_norm / "
        "torch.nn.RMSNorm (fused kernels), or torch.compile the function", None, b.rank)]


@program_rule("optimizer-per-tensor", "an optimizer stepping tensor by tensor",
              "optimizer step regions (record_function), the launches inside them and their operators")
def optimizer_per_tensor(ctx: ProgramContext) -> list:
    ops = _needs(ctx, "optimizer-per-tensor")
    if isinstance(ops, NotEvaluated):
        return [ops]
    b = ctx.breakdown.ranks[0]
    steps = sorted((r.cpu_start_ns, r.cpu_start_ns + r.cpu_duration_ns, r.name) for r in ctx.session.regions
                   if r.name.startswith(OPTIMIZER_REGION) and b.window_start_ns <= r.cpu_start_ns < b.window_end_ns)
    if not steps:
        return []
    t = ctx.session.launch_table()
    inside = {sid for sid, x in enumerate(t.shapes) if any(n.startswith(OPTIMIZER_REGION) for n in x.regions)}
    names: dict[str, int] = defaultdict(int)
    for sid, start, corr in zip(t.shape, t.start_ns, t.correlation_id):
        if sid in inside and start is not None and b.window_start_ns <= start < b.window_end_ns:
            op = ops.of_launch(corr)
            name = op.name if op is not None else "(no operator)"
            if "_foreach_" not in name and "_fused_" not in name:
                names[name] += 1
    per_step = sum(names.values()) / len(steps)
    if per_step < MIN_PER_TENSOR_LAUNCHES:
        return []
    spans = [(s0, s1) for s0, s1, _ in steps]
    host_ns = sum(s1 - s0 for s0, s1 in spans)
    gpu_share = _gpu_share(ctx, spans)
    # foreach / fused do the same arithmetic in a few launches: what goes is the host's time the GPU sat idle
    gain = pct(host_ns * (1 - gpu_share), b.wall_ns)
    if gain < MIN_GAIN_PCT:
        return []
    name = steps[0][2][len(OPTIMIZER_REGION):].split(".")[0]
    top = ", ".join(sorted(names, key=lambda n: -names[n])[:5])
    return [Finding(
        "optimizer-per-tensor", bd.LAUNCHING, f"{name} steps the parameters one tensor at a time",
        f"each {name}.step launches {per_step:.0f} kernels, ops on one parameter tensor at a time ({top}); the "
        f"steps take {pct(host_ns, b.wall_ns):.1f}% of the wall time, the GPU busy {100 * gpu_share:.0f}% of it",
        gain, "host time of the optimizer steps x (1 - the GPU's busy share of them) / wall time: foreach / fused "
        "kernels do the same arithmetic in a few launches",
        (("optimizer", name), ("steps in the window", len(steps)), ("per-tensor launches per step", round(per_step)),
         ("host time of the steps, ms", ms(host_ns)), ("GPU busy share of it", round(gpu_share, 3)),
         ("wall time of the window, ms", ms(b.wall_ns))),
        f"torch.optim.{name}(..., foreach=True) or fused=True (one kernel over every parameter); check that "
        "foreach was not turned off and that the parameters share one device and dtype", None, b.rank)]


def _gpu_share(ctx: ProgramContext, spans: list[tuple[int, int]]) -> float:
    """The share of the spans' time the GPU was busy (kernels, copies, memsets of the window)."""
    busy = sorted((a.start_ns, a.end_ns) for a in ctx.windowed(ctx.breakdown.ranks[0].rank))
    starts = [s for s, _ in busy]
    whole = sum(e - s for s, e in spans)
    got = 0
    for s, e in spans:
        k = max(0, bisect.bisect_left(starts, s) - 1)
        while k < len(busy) and busy[k][0] < e:
            a0, a1 = busy[k]
            if a1 > s:
                got += min(a1, e) - max(a0, s)
            k += 1
    return min(1.0, got / whole) if whole else 0.0
