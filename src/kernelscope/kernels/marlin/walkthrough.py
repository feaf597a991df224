"""One recorded launch of the W4A16 kernel, phase by phase, with the numbers of that run.

:func:`build_walkthrough` takes a Session that holds the kernel's launches and
the plan it was launched with (shapes and tile sizes) and returns plain data:
the launch as CUPTI recorded it, the bytes and FLOPs of each phase computed
from the shapes, and the measured durations with the rates they imply. Every
derived figure names its formula; what was not measured says why.
"""
from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass

from kernelscope.model import Launch, Metric, Session
from kernelscope.model.names import short_kernel_name
from kernelscope.model.packing import Walkthrough

from .format import check_shape, group_rows
from .phases import FLUSH_REGION, gemm_phases  # noqa: F401  (FLUSH_REGION is part of this module's API)

KERNEL_NAME = "_w4a16_kernel"
GEMM_REGION = "w4a16_gemm"  # the timed calls
COPY_REGION = "copy_bandwidth"  # device-to-device copies: the measured bandwidth ceiling
PLAN_KEY = "w4a16_plan"  # Session.environment: the GemmPlan of the recorded launches
COMPILED_KEY = "w4a16_compiled"  # Session.environment: what the Triton compiler produced


@dataclass(frozen=True)
class GemmPlan:
    """Shapes and launch parameters of one ``w4a16_matmul`` call.

    The defaults are the H100 tuning's launch for m = 16, k = n = 8192
    (benchmarks/w4a16/NOTES.md, round 12): split_k = 8 gives ceil(n / 128) * 8
    programs (512 for n = 8192), a few per SM, so that enough loads are in
    flight to stream the weights at memory speed.
    """

    m: int
    k: int
    n: int
    groupsize: int = 128
    block_m: int = 16
    block_n: int = 128
    block_k: int = 128
    split_k: int = 8
    num_warps: int = 4
    num_stages: int = 3
    group_m: int = 8
    swap_ab: int = 1  # 1: C^T = W^T A^T, n on the MMA's M side
    prefetch: int = 0  # weight slices loaded into registers ahead of the unpack
    dequant_asm: int = 1  # 1: PTX unpack, two weights per instruction; 0: Triton shifts and masks
    fused_split_sum: int = 1  # 1: the last program of a tile adds the split-k partials; 0: torch kernels after
    pair_layout: int = 1  # 1: a word holds k pairs of four 32-deep slices (one f16x2 MMA register each); 0: 8 k rows
    tma: int = 1  # 1: tiles copied by the tensor memory accelerator; 0: per-thread loads

    def __post_init__(self) -> None:
        if self.m < 1:
            raise ValueError(f"m must be at least 1, got {self.m}.")
        check_shape(self.k, self.n, self.groupsize, "GemmPlan")
        if self.k % (self.split_k * self.block_k):
            raise ValueError(f"k={self.k} must be a multiple of split_k * block_k = {self.split_k * self.block_k}.")

    @property
    def m_tiles(self) -> int:
        return -(-self.m // self.block_m)

    @property
    def n_tiles(self) -> int:
        return -(-self.n // self.block_n)

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.m_tiles * self.n_tiles, self.split_k, 1)

    @property
    def threads(self) -> int:
        return 32 * self.num_warps

    @property
    def k_split(self) -> int:
        return self.k // self.split_k

    @property
    def iterations(self) -> int:
        return self.k_split // self.block_k

    @property
    def groups(self) -> int:
        return self.k // group_rows(self.k, self.groupsize)

    def launch_kwargs(self) -> dict[str, int]:
        """Keyword arguments of ``w4a16_matmul`` that reproduce this launch."""
        return {"split_k": self.split_k, "block_m": self.block_m, "block_n": self.block_n,
                "block_k": self.block_k, "group_m": self.group_m, "num_warps": self.num_warps,
                "num_stages": self.num_stages, "swap_ab": bool(self.swap_ab), "prefetch": self.prefetch,
                "dequant_asm": bool(self.dequant_asm), "tma": bool(self.tma)}

    def program_tile(self, pid: int) -> tuple[int, int]:
        """(pid_m, pid_n) of program ``pid``: the kernel's grouped ordering, for the address example."""
        per_group = self.group_m * self.n_tiles
        first_m = (pid // per_group) * self.group_m
        group_m = min(self.m_tiles - first_m, self.group_m)
        return first_m + (pid % per_group) % group_m, (pid % per_group) // group_m

    def to_dict(self) -> dict[str, int]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "GemmPlan":
        # a plan recorded before these fields existed ran the first kernel version: none of them
        d = {"swap_ab": 0, "prefetch": 0, "dequant_asm": 0, "fused_split_sum": 0, "pair_layout": 0, "tma": 0, **d}
        return cls(**{k: int(v) for k, v in d.items() if k in cls.__dataclass_fields__})


@dataclass(frozen=True)
class RecordedCalls:
    """The kernel's launches in the timed region, and the kernels each call launched after it."""

    launches: tuple[Launch, ...]
    epilogues: tuple[tuple[Launch, ...], ...]  # per call: the split-k sum and cast kernels


def plan_of(session: Session) -> GemmPlan | None:
    d = session.environment.get(PLAN_KEY)
    return GemmPlan.from_dict(d) if isinstance(d, dict) else None


def find_calls(session: Session, plan: GemmPlan) -> RecordedCalls:
    """The launches of the plan's kernel (those in the timed region when there is one)."""
    ordered = sorted((x for x in session.launches if x.start_ns is not None), key=lambda x: x.start_ns or 0)
    mine = [x for x in ordered if short_kernel_name(x.kernel) == KERNEL_NAME]
    if not mine:
        raise ValueError(f"the session has no {KERNEL_NAME} launch; record one with kernelscope learn marlin on a GPU.")
    if any(GEMM_REGION in x.regions for x in mine):
        ordered = [x for x in ordered if GEMM_REGION in x.regions]
        mine = [x for x in ordered if short_kernel_name(x.kernel) == KERNEL_NAME]
    block = (plan.threads, 1, 1)
    match = [x for x in mine if x.grid == plan.grid and x.block == block]
    if not match:
        seen = ", ".join(sorted({f"grid {x.grid} block {x.block}" for x in mine}))
        raise ValueError(f"no {KERNEL_NAME} launch in the session has the grid {plan.grid} and block {block} of "
                         f"m={plan.m}, k={plan.k}, n={plan.n} with this tiling (it has {seen}).")
    epilogues = []
    for x in match:
        after = ordered[ordered.index(x) + 1:]
        tail = []
        for y in after:
            if short_kernel_name(y.kernel) == KERNEL_NAME:
                break
            tail.append(y)
        epilogues.append(tuple(tail) if plan.split_k > 1 and not plan.fused_split_sum else ())
    return RecordedCalls(tuple(match), tuple(epilogues))


def copy_bandwidth(session: Session) -> Metric:
    """Median device-to-device copy bandwidth over the session's memcpy records (CUPTI)."""
    raw = "Memcpy DtoD bytes / duration"
    copies = [a for a in session.activities if a.kind == "memcpy" and "DtoD" in a.name and a.bytes and a.duration_ns]
    if not copies:
        return Metric.missing(raw, "needs kernelscope calibrate, not yet available: no device-to-device copy "
                              "was recorded in this session", "derived", "byte/s")
    rates = [2 * a.bytes / (a.duration_ns * 1e-9) for a in copies]
    return Metric(statistics.median(rates), "byte/s", "derived", raw,
                  formula=f"median over {len(copies)} DtoD copies of {max(a.bytes for a in copies):,} B of "
                          "2 x bytes / duration (CUPTI memcpy records; each byte read once and written once)")


def build_walkthrough(session: Session, plan: GemmPlan) -> Walkthrough:
    """Phases of the recorded launch; raises ValueError (one sentence) if the session lacks it."""
    calls = find_calls(session, plan)
    device = session.device.name if session.device else "an unrecorded GPU"
    problem = (f"C[{plan.m}, {plan.n}] = A[{plan.m}, {plan.k}] @ W[{plan.k}, {plan.n}], fp16 activations, "
               f"int4 weights (groupsize {plan.groupsize}), fp32 accumulation")
    phases = gemm_phases(session, plan, calls.launches, calls.epilogues, copy_bandwidth(session),
                         session.environment.get(COMPILED_KEY))
    needs_gpu = (
        "the launch's grid, block, registers and shared memory (CUPTI, through the PyTorch profiler)",
        "the kernel and epilogue durations (CUPTI) and the device-to-device copy bandwidth (CUPTI memcpy records)",
        "the SM count and L2 size (CUDA driver) and the MMA instruction (the Triton compiler's PTX)",
    )
    return Walkthrough(kernel=KERNEL_NAME, device=device, recorded=session.created_utc, problem=problem,
                       phases=phases, needs_gpu=needs_gpu)
