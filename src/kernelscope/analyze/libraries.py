"""Library kernels, by name: cuBLAS and cuBLASLt (nvjet), cuDNN, CUTLASS, NCCL and FlashAttention.

A library picks its kernel's grid, block size, registers and shared memory for the problem it is handed, so advice
about them is not the user's to take. What the user controls is the call: the precision, the shapes, the memory
layout, another op or algorithm. LIBRARIES says, per library, which kernel names are its own (first match wins:
cuDNN's attention kernels count as attention, cuDNN's CUTLASS kernels as cuDNN's) and what its user controls;
``library_of`` looks a kernel name up. Rules read it (RuleContext.library) to word their fix, and the ranking
leaves out the launch-configuration and register rules for these kernels (LAUNCH_CONFIG_RULES).
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass

# What a matmul's user controls (cuBLAS, cuBLASLt, CUTLASS GEMMs).
_MATMUL_CONTROLS = ("the precision (bf16 or fp16 under torch.autocast; TF32 for FP32 matmuls: "
                    "torch.set_float32_matmul_precision('high')), the shapes (batch small matmuls into one torch.bmm "
                    "or a larger batch; sizes in multiples of 16) and the layout (contiguous operands, no transposed "
                    "copies), or another op (torch.compile fuses the code around it)")


@dataclass(frozen=True)
class Library:
    name: str  # as its vendor spells it
    pattern: re.Pattern[str]  # kernel names that are its own
    controls: str  # what its user controls, as a fix: precision, shapes, layout, another op or algorithm
    communication: bool = False  # NCCL: judged by the communication rules only


LIBRARIES: tuple[Library, ...] = (
    Library("NCCL", re.compile(r"^nccl|ncclDevKernel|ncclKernel", re.IGNORECASE),
            "the collective's size and timing (bucket sizes, overlap with compute), not the kernel", True),
    Library("FlashAttention", re.compile(r"flash_fwd|flash_bwd|flash_fprop|flash_bprop|fmha|_sdpa_|"
                                         r"pytorch_flash|efficient_attention", re.IGNORECASE),
            "the precision (bf16 or fp16), the head dimension and sequence length (multiples of 64), enough batch x "
            "heads to fill the GPU, or another backend (torch.nn.attention.sdpa_kernel)"),
    Library("cuDNN", re.compile(r"cudnn|xmma_fprop|xmma_dgrad|xmma_wgrad|implicit_gemm|nchwToNhwc|nhwcToNchw|"
                                r"bn_fw_|bn_bw_|convolve_common_engine|fusion::compute_dot", re.IGNORECASE),
            "the precision (bf16 or fp16 under torch.autocast; TF32: torch.backends.cudnn.allow_tf32), the memory "
            "format (torch.channels_last), the shapes (channels in multiples of 8, a larger batch), or another "
            "algorithm (torch.backends.cudnn.benchmark = True)"),
    Library("CUTLASS", re.compile(r"cutlass", re.IGNORECASE), _MATMUL_CONTROLS),
    Library("cuBLAS", re.compile(r"cublas|nvjet|^void (sgemm|dgemm|hgemm|gemv|gemmSN|gemmk1|scal_kernel|dot_kernel|"
                                 r"splitKreduce)|sgemm_|xmma_gemm|internal::gemvx", re.IGNORECASE),
            _MATMUL_CONTROLS),
)

# Rules whose advice is the kernel's launch configuration or registers: not the user's to take for a library kernel.
LAUNCH_CONFIG_RULES = ("occupancy-limit", "register-spills")
# NVIDIA's rules of the same kind.
NCU_LAUNCH_CONFIG_RULES = ("LaunchConfiguration", "TheoreticalOccupancy", "AchievedOccupancy", "Occupancy")
# Rules that say what a kernel's warps wait on: for a library kernel that is the library's design, which no fix of the
# user's targets, so the finding is shown as what it is, without a gain.
LIBRARY_DESIGN_RULES = ("dominant-stall",)


@functools.lru_cache(maxsize=4096)
def library_of(kernel: str) -> Library | None:
    """The library a kernel belongs to by its name (LIBRARIES, first match), None for the user's own kernels."""
    return next((lib for lib in LIBRARIES if lib.pattern.search(kernel)), None)


def by_design(lib: Library) -> str:
    """What a design finding (LIBRARY_DESIGN_RULES) of a library kernel adds: why it has no gain."""
    return (f"A {lib.name} kernel: what its warps wait on is the library's design, not estimated as a gain; what you "
            f"control is {lib.controls}.")


def not_yours(lib: Library) -> str:
    """Why a launch-configuration rule does not judge a library's kernel."""
    return (f"a {lib.name} kernel: its grid, block size, registers and shared memory are the library's choice; what "
            f"you control is {lib.controls}")
