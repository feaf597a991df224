"""The description of one W4A16 launch: :class:`LaunchConfig` (the kernel and its parameters) and
:class:`LaunchDecision` (a launch and where it came from). Where a launch is decided: :mod:`launch`."""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any

KERNELS = ("triton", "gluon")
TRITON_FIELDS = ("block_m", "block_n", "split_k", "num_warps", "tma")
GLUON_FIELDS = ("programs", "sync_mma", "cluster_size", "pdl")
BLOCK_SIZES = (16, 32, 64, 128, 256)


@dataclass(frozen=True)
class LaunchConfig:
    """One launch of the W4A16 GEMM: the kernel and its parameters. The other kernel's fields are None.

    Both kernels: ``num_stages`` (blocks of k in flight in shared memory) and ``max_registers`` (per thread, capped
    at launch; None: the compiler's choice).
    Triton kernel (:mod:`gemm`): ``block_m`` tokens x ``block_n`` columns a tile, k split ``split_k`` ways (the
    partials are added inside the launch), ``num_warps`` a program, ``tma``: tiles copied by the tensor memory
    accelerator (sm_90 and later).
    Gluon kernel (:mod:`gluon_kernel`, sm_90, m <= 64): ``programs`` (the stream-K grid; None: one a column tile),
    ``sync_mma`` (mma.sync instead of the warpgroup MMA), ``cluster_size`` (a column tile's programs one
    thread-block cluster, summing through distributed shared memory; 1: through L2), ``pdl`` (a programmatic
    dependent launch).
    """

    kernel: str = "triton"
    num_stages: int = 3
    max_registers: int | None = None
    block_m: int | None = None
    block_n: int | None = None
    split_k: int | None = None
    num_warps: int | None = None
    tma: bool | None = None
    programs: int | None = None
    sync_mma: bool | None = None
    cluster_size: int | None = None
    pdl: bool | None = None

    def __post_init__(self) -> None:
        if self.kernel not in KERNELS:
            raise ValueError(f"LaunchConfig: kernel must be 'triton' or 'gluon', got {self.kernel!r}.")
        own, other = (TRITON_FIELDS, GLUON_FIELDS) if self.kernel == "triton" else (GLUON_FIELDS, TRITON_FIELDS)
        stray = [f for f in other if getattr(self, f) is not None]
        if stray:
            raise ValueError(f"LaunchConfig: {', '.join(stray)} are not parameters of the {self.kernel} kernel.")
        missing = [f for f in own if f != "programs" and getattr(self, f) is None]
        if missing:
            raise ValueError(f"LaunchConfig: the {self.kernel} kernel needs {', '.join(missing)} "
                             f"(use LaunchConfig.{self.kernel}()).")
        if self.num_stages < 1 or (self.max_registers is not None and self.max_registers < 1):
            raise ValueError(f"LaunchConfig: num_stages and max_registers must be positive, got {self.num_stages} "
                             f"and {self.max_registers}.")
        if self.kernel == "triton":
            if self.block_m not in BLOCK_SIZES or self.block_n not in BLOCK_SIZES:
                raise ValueError(f"LaunchConfig: block_m and block_n must be one of {BLOCK_SIZES}, got "
                                 f"{self.block_m} and {self.block_n}.")
            if self.split_k < 1 or self.num_warps < 1:
                raise ValueError(f"LaunchConfig: split_k and num_warps must be positive, got {self.split_k} and "
                                 f"{self.num_warps}.")

    @classmethod
    def triton(cls, block_m: int = 16, block_n: int = 128, split_k: int = 1, num_warps: int = 4,
               num_stages: int = 3, max_registers: int | None = None, tma: bool = False) -> "LaunchConfig":
        """A launch of the Triton kernel."""
        return cls("triton", num_stages, max_registers, block_m=block_m, block_n=block_n, split_k=split_k,
                   num_warps=num_warps, tma=bool(tma))

    @classmethod
    def gluon(cls, programs: int | None = None, num_stages: int = 4, max_registers: int | None = None,
              sync_mma: bool = False, cluster_size: int = 1, pdl: bool = False) -> "LaunchConfig":
        """A launch of the Gluon decode kernel."""
        return cls("gluon", num_stages, max_registers, programs=programs, sync_mma=bool(sync_mma),
                   cluster_size=cluster_size, pdl=bool(pdl))

    def to_dict(self) -> dict[str, Any]:
        """Every field, the other kernel's as None: the one key set of the table, the cache and the benchmark."""
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "LaunchConfig":
        """The inverse of :meth:`to_dict`; unknown keys are an error (one sentence, ValueError)."""
        names = {f.name for f in fields(cls)}
        unknown = sorted(set(d) - names)
        if unknown:
            raise ValueError(f"LaunchConfig: unknown fields {', '.join(unknown)}.")
        return cls(**d)

    def with_pdl(self) -> "LaunchConfig":
        """This launch as a programmatic dependent launch (the Gluon kernel's only; ValueError otherwise)."""
        if self.kernel != "gluon":
            raise ValueError("LaunchConfig: only the Gluon kernel has programmatic dependent launches.")
        return replace(self, pdl=True)


@dataclass(frozen=True)
class LaunchDecision:
    config: LaunchConfig
    source: str  # "rule (...)", "table tuned_h100.json (...)", "tuning cache ...", "tuned here ..."
