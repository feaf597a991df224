"""Program rules: causes a whole program's wall time shows, each a small function over the breakdown
(analyze/breakdown.py), the GPU activities and the collectives.

Each rule (analyze/rule.Rule, scope "program", registered with ``program_rule``) returns a list of
analyze/rule.Finding (its gain a share of the window's wall time, with the formula) and NotEvaluated with the data it
lacked; an empty list when it looked and found nothing. Every rule names what it reads (``inputs``) and the rules
whose fix must come first (``needs``).
Name patterns, not if-chains: the tables below say which kernel names are FP32 FMA matmuls and which are
elementwise kernels, and the per-architecture rate ratio a tensor-core matmul gains over FMA.
"""
from __future__ import annotations

import bisect
import functools
import re
import statistics
from dataclasses import dataclass, field, replace
from operator import itemgetter
from typing import Any, Callable

from kernelscope.analyze import breakdown as bd
from kernelscope.analyze.breakdown import Breakdown, Gap, GpuActivity
from kernelscope.analyze.intervals import intersect, total, union
from kernelscope.analyze.ranks import RanksReport
from kernelscope.analyze.replay import RemoveSyncs, ShrinkLaunchOverhead, build_graph, replay, replayed_gain
from kernelscope.analyze.rule import PROGRAM, REGISTRY, Finding, NotEvaluated, Rule, register
from kernelscope.analyze.thresholds import HOST_STALL_GAP_NS
from kernelscope.model import Session
from kernelscope.model.names import short_kernel_name

# A finding's gain under this share of wall time is not worth a line in the verdict.
MIN_GAIN_PCT = 3.0
# Host syncs, host stalls: a cause must recur to be a property of the loop, not a one-off (a final print).
MIN_RECURRENCES = 3
# An elementwise chain: at least this many elementwise kernels in a row over tensors of one size.
MIN_CHAIN = 3

# Library kernels that do a matmul or convolution in FP32 on the FMA pipes (no tensor cores), by name: cuBLAS's
# and CUTLASS's SIMT GEMMs, cuDNN's FP32 implicit GEMMs. Their TF32 twins carry "tf32" in the name.
FMA_MATMUL_NAMES = re.compile(
    r"sgemm|simt|gemm_f32f32_f32f32|implicit_gemm_f32f32_f32f32|_f32f32_f32f32_f32|"
    r"fprop.*f32f32_f32f32|dgrad.*f32f32_f32f32|wgrad.*f32f32_f32f32|gemv2?T?_kernel.*float|"
    r"gemmSN_(NN|TN|NT)_kernel.*float|cutlass.*sgemm|_ffma_",
    re.IGNORECASE)
TENSOR_MATMUL_NAMES = re.compile(r"tf32|bf16|f16|h884|h1688|h16816|hmma|wgmma|gmma|nvjet|s1688|s16816",
                                 re.IGNORECASE)
# PyTorch's eager elementwise and reduction kernels (one op each), by name.
ELEMENTWISE_NAMES = re.compile(r"elementwise_kernel|vectorized_elementwise|unrolled_elementwise|"
                               r"reduce_kernel|CatArrayBatchedCopy|index_elementwise")

# Dense TF32 tensor-core rate over FP32 FMA rate, per SM architecture (the vendors' datasheets: A100 156/19.5,
# H100 SXM 494.7/66.9). It bounds what turning on TF32 can give an FMA matmul; it is not a measurement.
TF32_OVER_FP32_RATE: dict[tuple[int, int], float] = {(8, 0): 8.0, (9, 0): 7.4}
TF32_SOURCE = "datasheet dense TF32 / FP32 rate ratio of sm_{}{}"


@functools.lru_cache(maxsize=4096)
def is_fma_matmul(name: str) -> bool:
    """An FP32 SIMT matmul or convolution by its kernel name (FMA_MATMUL_NAMES, not TENSOR_MATMUL_NAMES); names
    repeat a million times, so each is looked at once."""
    return bool(FMA_MATMUL_NAMES.search(name)) and not TENSOR_MATMUL_NAMES.search(name)


@functools.lru_cache(maxsize=4096)
def is_elementwise(name: str) -> bool:
    return bool(ELEMENTWISE_NAMES.search(name))


@dataclass
class ProgramContext:
    session: Session
    breakdown: Breakdown
    gaps: dict[int, list[Gap]]
    ranks: RanksReport | None
    arch: tuple[int, int] | None  # compute capability
    _cache: dict[Any, Any] = field(default_factory=dict)

    @property
    def activities(self) -> dict[int, list[GpuActivity]]:
        """Every GPU activity per rank (built on first use: most sessions' rules decide from names and totals)."""
        got = self._cache.get("activities")
        if got is None:
            got = self._cache["activities"] = bd.activities_by_rank(self.session)
        return got

    def windowed(self, rank: int) -> list[GpuActivity]:
        """The rank's activities that start in its window (computed once, shared by the rules)."""
        got = self._cache.get(("windowed", rank))
        if got is None:
            b = self.breakdown.rank(rank)
            acts = self.activities.get(rank, [])
            if b is None:
                got = []
            else:  # by start: the window is one slice
                starts = list(map(itemgetter(0), acts))
                got = acts[bisect.bisect_left(starts, b.window_start_ns):bisect.bisect_left(starts, b.window_end_ns)]
            self._cache[("windowed", rank)] = got
        return got

    def kernel_time_ns(self, match: Callable[[str], bool]) -> int:
        """Trace-pass time of the kernels whose names ``match`` (all ranks, the whole run): an upper bound that
        lets a rule skip the per-launch pass when it cannot reach MIN_GAIN_PCT."""
        table = self.session.launch_table()
        _, traced = table.durations_by_shape()
        return sum(sum(traced[sid]) for sid, x in enumerate(table.shapes) if match(x.kernel))


Outcome = "Finding | NotEvaluated | None"


PROGRAM_RULES: list[Rule] = REGISTRY[PROGRAM]  # the program rules, in registration order


def program_rule(rule: str, title: str, inputs: str, *, needs: tuple[str, ...] = (), gain_formula: str = "",
                 replaces: tuple[str, ...] = ()) -> Callable[[Callable[[ProgramContext], list]], Rule]:
    """Register a program rule function in the one registry (analyze/rule.py says what each argument declares)."""
    def wrap(fn: Callable[[ProgramContext], list]) -> Rule:
        return register(Rule(rule, title, PROGRAM, inputs, gain_formula, fn, needs, replaces=replaces))
    return wrap


def pct(ns: float, wall: int) -> float:
    return 100.0 * ns / wall if wall > 0 else 0.0


def ms(ns: float) -> float:
    return round(ns / 1e6, 3)


def _recurring(b: bd.RankBreakdown, category: str) -> tuple[int, int, float] | None:
    """(idle ns, gaps, gain % of wall) of one idle category when it recurs and is worth a finding, else None."""
    ns, n = b.ns(category), b.count(category)
    gain = pct(ns, b.wall_ns)
    return (ns, n, gain) if n >= MIN_RECURRENCES and gain >= MIN_GAIN_PCT else None


def _one_rank(ctx: ProgramContext) -> bool:
    return len(ctx.breakdown.ranks) == 1


@program_rule("tensor-cores-unused", "FP32 matmuls on the FMA pipes, not the tensor cores",
              "kernel names and times of the trace pass, the device's compute capability")
def tensor_cores_unused(ctx: ProgramContext) -> list:
    if ctx.arch is None:
        return [NotEvaluated("tensor-cores-unused", "the session has no device compute capability")]
    ratio = TF32_OVER_FP32_RATE.get(ctx.arch)
    out: list = []
    if not ctx.kernel_time_ns(is_fma_matmul):
        return out
    for b in ctx.breakdown.ranks:
        acts = [a for a in ctx.windowed(b.rank) if a.category == bd.KERNELS and is_fma_matmul(a.name)]
        if not acts:
            continue
        if ratio is None:
            return [NotEvaluated("tensor-cores-unused", f"FP32 FMA matmuls ran, but no TF32 / FP32 rate ratio is known "
                                 f"for sm_{ctx.arch[0]}{ctx.arch[1]} to estimate the gain")]
        fma_ns = total(union([(a.start_ns, a.end_ns) for a in acts]))
        names: dict[str, int] = {}
        for a in acts:
            names[a.name] = names.get(a.name, 0) + a.end_ns - a.start_ns
        top = max(names, key=names.__getitem__)
        gain = pct(fma_ns * (1 - 1 / ratio), b.wall_ns)
        if gain < MIN_GAIN_PCT:
            continue
        out.append(Finding(
            "tensor-cores-unused", bd.KERNELS, "FP32 matmuls run on the FMA pipes, not the tensor cores",
            f"{len(acts):,} launches of {len(names)} FP32 SIMT matmul/convolution kernel(s) take "
            f"{pct(fma_ns, b.wall_ns):.1f}% of the wall time; TF32 or bf16 would run them on the tensor cores",
            gain, f"FMA matmul time x (1 - 1 / {ratio}) / wall time ({TF32_SOURCE.format(*ctx.arch)})",
            (("FP32 FMA matmul kernels (trace pass names)", len(names)), ("their launches in the window", len(acts)),
             ("their time, ms", ms(fma_ns)), ("wall time of the window, ms", ms(b.wall_ns)),
             ("largest", short_kernel_name(top)), ("TF32 / FP32 rate ratio (datasheet)", ratio)),
            "allow TF32: torch.set_float32_matmul_precision('high') (or torch.backends.cuda.matmul.allow_tf32 = True "
            "and torch.backends.cudnn.allow_tf32 = True), or run the model under torch.autocast('cuda', "
            "dtype=torch.bfloat16)", short_kernel_name(top), b.rank, tuple(sorted(names, key=lambda n: -names[n]))))
    return out


@program_rule("sync-in-loop", "host syncs in the loop",
              "the trace pass's synchronize and blocking-copy calls and the GPU idle gaps after them (one rank)")
def sync_in_loop(ctx: ProgramContext) -> list:
    if not _one_rank(ctx):
        return [NotEvaluated("sync-in-loop", "a multi-rank session keeps no per-rank synchronize calls")]
    b = ctx.breakdown.ranks[0]
    got = _recurring(b, bd.AFTER_SYNC)
    if got is None:
        return []
    ns, n, gain = got
    calls = ", ".join(f"{name} ({k:,})" for name, k in b.sync_calls)
    per_step = f"; {n / b.steps:.1f} per step" if b.steps else ""
    return [Finding(
        "sync-in-loop", bd.AFTER_SYNC, "the host waits for the GPU inside the loop",
        f"{n:,} times the host blocked until the GPU finished{per_step}, and the GPU idled until the host launched "
        f"again: {gain:.1f}% of the wall time",
        gain, "GPU idle from the end of its work to the next launch, after each blocking call / wall time",
        (("blocking calls followed by GPU idle", n), ("calls", calls), ("GPU idle after them, ms", ms(ns)),
         ("median idle after one, µs", round(ns / n / 1e3, 1)), ("wall time of the window, ms", ms(b.wall_ns)),
         ("Python stack of the calls", "not recorded by the trace pass")),
        "remove the sync from the loop: keep values on the GPU (accumulate losses or counters in a tensor, compare "
        "with torch ops) and read them once after the loop; .item(), .cpu(), .tolist(), print(tensor), "
        "torch.cuda.synchronize() and data-dependent shapes (nonzero, masked indexing) each block the host",
        None, b.rank)]


@program_rule("launch-bound", "launch-bound: the GPU waits for the host to launch",
              "GPU idle gaps up to thresholds.HOST_STALL_GAP_NS between activities of the trace pass",
              # a CUDA graph cannot hold a loop that syncs with the host, nor an optimizer's per-tensor host loop
              needs=("sync-in-loop", "sync-at-op", "optimizer-per-tensor"))
def launch_bound(ctx: ProgramContext) -> list:
    out: list = []
    if graph_replays_share(ctx) >= 0.5:
        return out  # a CUDA graph's kernels are launched by the GPU: the host's launch overhead is not theirs
    for b in ctx.breakdown.ranks:
        got = _recurring(b, bd.LAUNCHING)
        if got is None:
            continue
        ns, n, gain = got
        kernels = [a for a in ctx.windowed(b.rank) if a.category == bd.KERNELS]
        median = statistics.median([a.end_ns - a.start_ns for a in kernels]) if kernels else 0
        syncs = b.count(bd.AFTER_SYNC) >= MIN_RECURRENCES
        fix = ("capture the loop in a CUDA graph (torch.cuda.graphs, or torch.compile(mode='reduce-overhead')), or "
               "launch fewer, larger kernels (batch the small ops; torch.compile fuses them)")
        if syncs:
            fix = "first remove the host syncs from the loop (a graph cannot hold them), then " + fix
        out.append(Finding(
            "launch-bound", bd.LAUNCHING, "launch-bound: the GPU waits for the host to launch each kernel",
            f"{n:,} gaps of host overhead between kernels of median {median / 1e3:.1f} µs: the GPU idles "
            f"{gain:.1f}% of the wall time while the host dispatches and launches the next op",
            gain, "GPU idle in gaps up to the host-stall threshold with no host sync (per-op overhead) / wall time",
            (("host-overhead gaps", n), ("their total, ms", ms(ns)),
             ("median kernel duration, µs", round(median / 1e3, 2)), ("kernels in the window", len(kernels)),
             ("gap threshold, µs", HOST_STALL_GAP_NS / 1e3), ("wall time of the window, ms", ms(b.wall_ns))),
            fix, None, b.rank))
    return out


def graph_replays_share(ctx: ProgramContext) -> float:
    """The share of the session's kernel launches that CUDA-graph replays made (their operator is the replay
    call; 0 when the session has no operators)."""
    ops = ctx.session.operators
    if ops is None:
        return 0.0
    graph = {k for k, op in enumerate(ops.ops) if op.name.endswith("graphs.replay") or op.name == "cudaGraphLaunch"}
    corr = ctx.session.launch_table().correlation_id
    return sum(1 for c in corr if ops.launch_op.get(c) in graph) / len(corr) if graph and corr else 0.0


def _chains(acts: list[GpuActivity]) -> list[list[GpuActivity]]:
    """Runs of consecutive elementwise and reduction kernels, no more than thresholds.HOST_STALL_GAP_NS apart; any
    other kernel or copy, or a longer gap, ends a run."""
    runs: list[list[GpuActivity]] = []
    cur: list[GpuActivity] = []
    for a in acts:
        if a.category not in (bd.KERNELS, bd.COPIES, bd.MEMSETS):
            continue
        ok = a.category == bd.KERNELS and is_elementwise(a.name)
        if ok and cur and a.start_ns - cur[-1].end_ns > HOST_STALL_GAP_NS:
            runs.append(cur)
            cur = []
        if ok:
            cur.append(a)
        else:
            runs.append(cur)
            cur = []
    runs.append(cur)
    return [r for r in runs if len(r) >= MIN_CHAIN]


@program_rule("unfused-elementwise", "unfused elementwise chains",
              "kernel names, grids and times of the trace pass",
              needs=("unfused-norm", "unfused-attention"))  # the specific fused op replaces the generic chain
def unfused_elementwise(ctx: ProgramContext) -> list:
    out: list = []
    walls = [b.wall_ns for b in ctx.breakdown.ranks]
    if not walls or pct(ctx.kernel_time_ns(is_elementwise), min(walls)) < MIN_GAIN_PCT:
        return out  # the chains' kernel time bounds the gain
    for b in ctx.breakdown.ranks:
        chains = _chains(ctx.windowed(b.rank))
        if not chains:
            continue
        # kernel time only: the gaps between a chain's launches are launch overhead (launch-bound's share)
        saved = sum(sum(a.end_ns - a.start_ns for a in c) - max(a.end_ns - a.start_ns for a in c) for c in chains)
        chain_ns = sum(sum(a.end_ns - a.start_ns for a in c) for c in chains)
        gain = pct(saved, b.wall_ns)
        if gain < MIN_GAIN_PCT:
            continue
        lengths = [len(c) for c in chains]
        names: dict[str, int] = {}
        for c in chains:
            for a in c:
                k = short_kernel_name(a.name)
                names[k] = names.get(k, 0) + 1
        out.append(Finding(
            "unfused-elementwise", bd.KERNELS, "chains of elementwise kernels that one fused kernel would do",
            f"{len(chains):,} chains of {min(lengths)}-{max(lengths)} elementwise and reduction kernels in a row, "
            f"each reading and writing whole tensors: {pct(chain_ns, b.wall_ns):.1f}% of the wall time",
            gain, "(kernel time of the chain - its longest kernel) summed over chains / wall time: a fused kernel "
            "makes one pass over the data, about as long as the chain's longest kernel",
            (("chains", len(chains)), ("kernels per chain (median)", statistics.median(lengths)),
             ("time in chains, ms", ms(chain_ns)), ("wall time of the window, ms", ms(b.wall_ns)),
             ("kernels in them", ", ".join(sorted(names, key=lambda k: -names[k])[:4]))),
            "fuse the chain into one kernel: torch.compile the function that computes it, or write one Triton "
            "kernel; in-place ops (add_, mul_) do not fuse", None, b.rank))
    return out


@program_rule("pageable-copies", "copies from pageable host memory",
              "copy names (Pageable), times and the kernels they do not overlap, from the trace pass")
def pageable_copies(ctx: ProgramContext) -> list:
    out: list = []
    if not any("pageable" in a.name.lower() for a in ctx.session.activities):
        return out
    for b in ctx.breakdown.ranks:
        acts = ctx.windowed(b.rank)
        pageable = [a for a in acts if a.category == bd.COPIES and "pageable" in a.name.lower()]
        if not pageable:
            continue
        kernels = union([(a.start_ns, a.end_ns) for a in acts if a.category in (bd.KERNELS, bd.COMMUNICATION)])
        copies = union([(a.start_ns, a.end_ns) for a in pageable])
        exposed = total(copies) - total(intersect(copies, kernels))
        cap = b.wall_ns - b.ns(bd.KERNELS) - b.ns(bd.COMMUNICATION)
        gain = pct(min(exposed, cap), b.wall_ns)
        if gain < MIN_GAIN_PCT:
            continue
        nbytes = sum(a.bytes or 0 for a in pageable)
        dur = total(copies)
        rate = nbytes / (dur * 1e-9) / 1e9 if dur and nbytes else None
        h2d = sum(1 for a in pageable if "htod" in a.name.lower())
        out.append(Finding(
            "pageable-copies", bd.COPIES, "copies from pageable host memory serialise with compute",
            f"{len(pageable):,} copies to or from pageable memory ({h2d:,} host to device) take "
            f"{pct(dur, b.wall_ns):.1f}% of the wall time with no kernel running beside them",
            gain, "pageable copy time not overlapped with kernels / wall time (a pinned, asynchronous copy on a side "
            "stream overlaps compute), at most the wall time no kernel covers",
            (("pageable copies", len(pageable)), ("their time, ms", ms(dur)), ("not overlapped with kernels, ms",
             ms(exposed)), ("bytes", nbytes), ("achieved rate, GB/s", None if rate is None else round(rate, 2)),
             ("wall time of the window, ms", ms(b.wall_ns))),
            "pin the host buffers (tensor.pin_memory(), DataLoader(pin_memory=True)) and copy with "
            ".to('cuda', non_blocking=True) on a side stream, a batch ahead of the compute that needs it",
            None, b.rank))
    return out


@program_rule("host-input-stall", "the GPU starves while the host does other work",
              "GPU idle gaps longer than thresholds.HOST_STALL_GAP_NS with no blocking call before them")
def host_input_stall(ctx: ProgramContext) -> list:
    out: list = []
    for b in ctx.breakdown.ranks:
        got = _recurring(b, bd.HOST_ELSEWHERE)
        if got is None:
            continue
        ns, n, gain = got
        gaps = sorted(g.end_ns - g.start_ns for g in ctx.gaps.get(b.rank, []) if g.category == bd.HOST_ELSEWHERE)
        per_step = f", {n / b.steps:.1f} per step" if b.steps else ""
        out.append(Finding(
            "host-input-stall", bd.HOST_ELSEWHERE, "the GPU starves while the host works on something else",
            f"{n:,} gaps{per_step} (median {statistics.median(gaps) / 1e6:.2f} ms) in which the host neither launched "
            f"nor waited for the GPU: {gain:.1f}% of the wall time",
            gain, "GPU idle in gaps longer than the host-wait threshold with no blocking call / wall time",
            (("gaps", n), ("their total, ms", ms(ns)), ("median gap, ms", round(statistics.median(gaps) / 1e6, 3)),
             ("longest gap, ms", ms(gaps[-1])), ("wall time of the window, ms", ms(b.wall_ns))),
            "prepare the next inputs while the GPU computes: DataLoader(num_workers > 0, pin_memory=True, "
            "prefetch_factor), a background thread, or do the preprocessing on the GPU", None, b.rank))
    return out


@program_rule("straggler-rank", "a straggler rank the others wait for",
              "NCCL kernels of every rank matched by collective (analyze/collectives)")
def straggler_rank(ctx: ProgramContext) -> list:
    if len(ctx.breakdown.ranks) < 2:
        return []
    if ctx.ranks is None or ctx.ranks.collectives.missing_reason:
        why = ctx.ranks.collectives.missing_reason if ctx.ranks else "no ranks analysis"
        return [NotEvaluated("straggler-rank", why or "no collectives")]
    st = ctx.ranks.collectives.run_straggler
    if st is None:
        return []
    others = [b for b in ctx.breakdown.ranks if b.rank != st.rank]
    waits = [pct(b.ns(bd.WAITING), b.wall_ns) for b in others]
    n = len(ctx.breakdown.ranks)
    # balancing spreads the straggler's extra work over all n ranks: the step shortens by the wait x (n - 1) / n
    gain = statistics.mean(waits) * (n - 1) / n if waits else 0.0
    if gain < MIN_GAIN_PCT:
        return []
    computes = {r.info.rank: r.compute_ns for r in ctx.ranks.summary.ranks}
    slow = ctx.breakdown.rank(st.rank)
    mine = [("its kernel time in the window, % of wall", round(pct(slow.ns(bd.KERNELS), slow.wall_ns), 1))] \
        if slow else []
    return [Finding(
        "straggler-rank", bd.WAITING, f"rank {st.rank} is the straggler: the other ranks wait for it",
        f"rank {st.rank} arrived last at {st.collectives:,} collectives; the other ranks spend "
        f"{statistics.mean(waits):.1f}% of their wall time waiting for it inside NCCL kernels",
        gain, "mean over the other ranks of (their wait at collectives for the last rank / their wall time) x (n - 1) "
        "/ n: balanced, the straggler's extra work is spread over all n ranks",
        tuple([("straggler rank", st.rank), ("collectives it arrived last at", st.collectives),
               ("wait it caused, ms", ms(st.caused_wait_ns))] + mine +
              [(f"rank {b.rank} waits, % of wall", round(w, 1)) for b, w in zip(others, waits)] +
              [(f"rank {r} kernel time over the whole run, ms", ms(ns)) for r, ns in sorted(computes.items())]),
        f"balance the work: give rank {st.rank} the same batch, sequence lengths and extra work as the others (or "
        "move its extra work off the step), then check its GPU and clocks; the other ranks wait because it arrives "
        "late, not because NCCL is slow", None, st.rank)]


@program_rule("exposed-communication", "communication not overlapped with compute",
              "NCCL kernels and computing kernels of every rank (trace pass), their waits at collectives")
def exposed_communication(ctx: ProgramContext) -> list:
    if len(ctx.breakdown.ranks) < 2:
        return []
    shares = []
    for b in ctx.breakdown.ranks:
        exposed, compute = b.ns(bd.COMMUNICATION), b.ns(bd.KERNELS)
        shares.append((b, exposed, compute, pct(min(exposed, compute), b.wall_ns)))
    gain = statistics.mean(x[3] for x in shares)
    if gain < MIN_GAIN_PCT:
        return []
    return [Finding(
        "exposed-communication", bd.COMMUNICATION, "communication runs while no computation does",
        f"NCCL kernels run alone, neither overlapped with compute nor waiting for another rank, for "
        f"{statistics.mean(pct(x[1], x[0].wall_ns) for x in shares):.1f}% of the wall time (mean over ranks)",
        gain, "mean over ranks of min(communication time with no kernel beside it, kernel time) / wall time: "
        "overlap can hide communication behind as much computation as there is",
        tuple((f"rank {b.rank}: exposed communication, ms / kernel time, ms", f"{ms(e)} / {ms(c)}")
              for b, e, c, _ in shares),
        "overlap communication with computation: let DDP all-reduce gradient buckets during backward (the default; "
        "check that find_unused_parameters, no_sync or a manual all_reduce after backward do not serialise it), "
        "launch collectives with async_op=True and wait where the result is needed, or prefetch with FSDP",
        None, None)]


# Rules whose gain is the replay of their fix (analyze/replay.py), not their share of idle time.
REPLAYED_FIXES: dict[str, Callable[[], tuple]] = {"sync-in-loop": lambda: (RemoveSyncs(),),
                                                  "launch-bound": lambda: (ShrinkLaunchOverhead(),)}
# The replay's budget: building the graph and three replays cost ~50 µs per GPU op (the recorded programs, 2 shared
# cores), so a session with more ops keeps its share-of-idle gains and `show` of a long run stays fast. The recorded
# program suite's largest session has 30,000.
REPLAY_MAX_OPS = 50_000


def replayed_gains(ctx: ProgramContext, found: list[Finding]) -> list[Finding]:
    """``found`` with the gain of each REPLAYED_FIXES rule's finding replaced by the replayed gain of its fix, its
    evidence naming the replay (what it changed, the window measured and replayed, the edges that bound the fixed
    window, what the graph could not model) and keeping the share-of-idle estimate. One-rank sessions only: a merged
    multi-rank session keeps no synchronize calls to replay. Where no graph can be built, ``found`` unchanged; over
    REPLAY_MAX_OPS, the findings keep their estimate and their evidence says why."""
    if not _one_rank(ctx) or not any(f.rule in REPLAYED_FIXES for f in found):
        return found
    ops = ctx.session.launch_count() + len(ctx.session.activities)
    if ops > REPLAY_MAX_OPS:
        why = (("replayed fix", f"not replayed: {ops:,} GPU ops, over the replay's budget of {REPLAY_MAX_OPS:,} "
                "(program_rules.REPLAY_MAX_OPS); the share-of-idle estimate stands"),)
        return [replace(f, evidence=f.evidence + why) if f.rule in REPLAYED_FIXES else f for f in found]
    try:
        graph = build_graph(ctx.session, ctx.breakdown)
    except ValueError:
        return found
    base = replay(graph)
    out = []
    for f in found:
        if f.rule in REPLAYED_FIXES:
            g = replayed_gain(graph, REPLAYED_FIXES[f.rule](), base)
            bound = ", ".join(f"{kind} {pct(ns, g.fixed.wall_ns):.0f}%" for kind, ns in g.fixed.bound_by[:3])
            f = replace(f, gain_pct=g.gain_pct, gain_formula=f"{g.formula} (analyze/replay.py)", evidence=f.evidence + (
                ("replayed fix", "; ".join(g.fixed.edits)),
                ("window wall time, ms: measured / replayed / replayed with the fix",
                 f"{ms(g.baseline.measured_wall_ns)} / {ms(g.baseline.wall_ns)} / {ms(g.fixed.wall_ns)}"),
                ("critical path with the fix (share of its wall time)", bound),
                ("not in the replay graph", "; ".join(what for what, _ in graph.not_modelled)),
                ("share-of-idle estimate before the replay, % of wall", round(f.gain_pct, 1))))
        out.append(f)
    return out


def run_program_rules(ctx: ProgramContext) -> tuple[list[Finding], list[NotEvaluated]]:
    found: list[Finding] = []
    skipped: list[NotEvaluated] = []
    for r in PROGRAM_RULES:
        for out in r.check(ctx):
            (found if isinstance(out, Finding) else skipped).append(out)
    return replayed_gains(ctx, found), skipped

