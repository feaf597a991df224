"""The plan of one recorded ``w4a16_matmul`` call of the Triton kernel (shapes and launch parameters), and the
names the recorded session uses for its kernel, regions and environment keys: shared by the workload that records
a launch, the phases and the walkthrough that explain it."""
from __future__ import annotations

from dataclasses import asdict, dataclass

from .format import check_shape, group_rows
from .launch_config import LaunchConfig

KERNEL_NAME = "_w4a16_kernel"
GEMM_REGION = "w4a16_gemm"  # the timed calls
COPY_REGION = "copy_bandwidth"  # device-to-device copies: the measured bandwidth ceiling
PLAN_KEY = "w4a16_plan"  # Session.environment: the GemmPlan of the recorded launches
COMPILED_KEY = "w4a16_compiled"  # Session.environment: what the Triton compiler produced
FLUSH_REGION = "l2_flush"  # the region that overwrites a buffer larger than L2 between calls


@dataclass(frozen=True)
class GemmPlan:
    """Shapes and launch parameters of one recorded ``w4a16_matmul`` call of the Triton kernel.

    The defaults are the launch the walkthrough explains, for m = 16, k = n = 8192: split_k = 8 gives
    ceil(n / 128) * 8 programs (512 for n = 8192), a few per SM, so that enough loads are in flight to stream
    the weights at memory speed. The flags after ``group_m`` say which form of the kernel ran; a session records
    them so that the phases describe the kernel it recorded, and the shipped kernel is the form with all of them
    at their defaults (:meth:`launch_config`).
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

    def launch_config(self) -> LaunchConfig:
        """The :class:`LaunchConfig` that reproduces this launch; ValueError (one sentence) for a plan of a kernel
        form that is not shipped (recorded by an earlier version)."""
        shipped = dict(block_k=128, group_m=8, swap_ab=1, prefetch=0, dequant_asm=1, fused_split_sum=1,
                       pair_layout=1)
        other = [f"{k}={getattr(self, k)}" for k, v in shipped.items() if getattr(self, k) != v]
        if other:
            raise ValueError(f"this plan ran a form of the kernel that is not shipped ({', '.join(other)}); "
                             "record it again with the plan's shape.")
        return LaunchConfig.triton(self.block_m, self.block_n, self.split_k, self.num_warps, self.num_stages,
                                   tma=bool(self.tma))

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
