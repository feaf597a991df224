"""The whole-program defect suite in one table. Two halves: "check", written before the verdict rules changed,
not tuned on them; "holdout" (holdout_*), written later without reading the rules, kept unseen by them while they
are tuned on the check half. Only the holdout half on one GPU, from the repository root:
``measure.py --programs "$(cd benchmarks/diagnosis/programs && python -c \
"import config; print(config.names('holdout'))")"``.

Each program is one function in its defect's module (``MODULE``), run by name with ``run.py NAME`` taking
--variant defect|fixed (controls: control only), --steps N, --warmup N and --tiny. ``expected_rule``: the verdict
rule id that should come first on the defect variant and be absent (or under 5%) on the fixed one; controls have
none and should get no finding above 20%. ``ranks``: 1 for a plain process, or the torchrun world sizes the program
runs at.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

RULE_IDS = ("tensor-cores-unused", "unfused-elementwise", "pageable-copies", "host-input-stall", "sync-in-loop",
            "launch-bound", "straggler-rank")
CONTROL = "control"
# the module holding each category's programs
MODULE = {"tensor-cores-unused": "tensor_cores", "unfused-elementwise": "unfused", "pageable-copies": "pageable",
          "host-input-stall": "host_stall", "sync-in-loop": "sync_in_loop", "launch-bound": "launch_bound",
          "straggler-rank": "straggler", CONTROL: "controls"}


@dataclass(frozen=True)
class Program:
    name: str
    category: str  # one of RULE_IDS, or CONTROL
    expected_rule: str | None  # None for controls
    ranks: int | tuple[int, ...]  # 1, or the torchrun --nproc-per-node values
    note: str
    half: str = "check"
    # why the measurements leave this program out of the first-finding and gain scores (a flaw of the program the
    # GPU run showed, e.g. a fix that is not faster); None: scored
    excluded: str | None = None

    @property
    def variants(self) -> tuple[str, ...]:
        return (CONTROL,) if self.category == CONTROL else ("defect", "fixed")

    @property
    def module(self) -> str:
        return MODULE[self.category]

    @property
    def file(self) -> str:
        """The module's file, relative to this directory."""
        return f"{self.module}.py"

    @property
    def world_sizes(self) -> tuple[int, ...]:
        return (self.ranks,) if isinstance(self.ranks, int) else tuple(self.ranks)

    @property
    def distributed(self) -> bool:
        return not isinstance(self.ranks, int)


def _p(name: str, category: str, note: str, ranks: int | tuple[int, ...] = 1, half: str = "check") -> Program:
    return Program(name, category, None if category == CONTROL else category, ranks, note, half)


def _h(name: str, category: str, note: str) -> Program:
    """A holdout program: written later, without reading the verdict rules, never used to tune them."""
    return _p(name, category, note, half="holdout")


PROGRAMS: tuple[Program, ...] = (
    _p("tc_mlp_train", "tensor-cores-unused",
       "FP32 MLP training (4096 wide, batch 4096), TF32 off; fixed: set_float32_matmul_precision('high')"),
    _p("tc_conv_infer", "tensor-cores-unused",
       "FP32 conv net inference (32x256x56x56), cuDNN TF32 off; fixed: bf16 autocast + channels_last"),
    _p("unfused_gelu_chain", "unfused-elementwise",
       "FP32 bias+tanh-GELU+scale+residual, 11 kernels over 256 MB tensors; fixed: one Triton kernel"),
    _p("unfused_layernorm_chain", "unfused-elementwise",
       "bf16 hand-written layer norm + SiLU + residual, 12 kernels incl. 2 reductions; fixed: one Triton row kernel"),
    _p("pageable_h2d_train", "pageable-copies",
       "4 x 32 MB pageable host->device input copies per step, small bf16 MLP; fixed: pinned + side-stream prefetch"),
    _p("pageable_d2h_infer", "pageable-copies",
       "4 x 32 MB device->host .cpu() results per step; fixed: pinned buffers, side-stream copies overlapping compute"),
    _p("host_augment_numpy", "host-input-stall",
       "numpy crop/flip/normalise of 128 images per step before a small CNN; fixed: the same augmentation on the GPU"),
    _p("host_features_thread", "host-input-stall",
       "numpy log-mel features in the loop before a bf16 encoder forward; fixed: 8 prefetching threads"),
    _p("sync_item_train", "sync-in-loop",
       "loss.item() + NaN check after each of 8 micro-batches; fixed: summed on the GPU, read once a step"),
    _p("sync_check_infer", "sync-in-loop",
       "bf16 24-block forward, .item() overflow check + .cpu() stat per block; fixed: one copy after the forward"),
    _p("launch_param_loop", "launch-bound",
       "hand-written momentum SGD over 1000 64x64 tensors, 3000 tiny launches; fixed: 2 ops over flat buffers"),
    _p("launch_decode_loop", "launch-bound",
       "64-token greedy decode of a 512-wide bf16 model, batch 1, eager; fixed: one CUDA graph replay"),
    _p("straggler_ddp", "straggler-rank",
       "DDP MLP, last rank gets 2x the batch; fixed: the same samples split evenly", ranks=(2, 4)),
    _p("straggler_allreduce", "straggler-rank",
       "matmuls then a 128 MB all_reduce, last rank does 2x the matmuls; fixed: work split evenly", ranks=(2, 4)),
    _p("control_bf16_train", CONTROL, "bf16 MLP training, three 8192x8192 layers, batch 8192: tensor-core GEMMs"),
    _p("control_graphed_decode", CONTROL,
       "CUDA-graphed 16-token decode, batch 64, 4096-wide bf16 model: weight streaming at memory speed"),
    # the holdout half: different structure, sizes and dtypes; kept unseen by the rules while they are tuned
    _h("holdout_sync_nonzero", "sync-in-loop",
       "fp16 detection head, per-image mask indexing + torch.unique + top-min(100,n); fixed: fixed-shape where/topk"),
    replace(_h("holdout_sync_cpu_print", "sync-in-loop",
               "bf16 transformer training, float(loss) + metrics.cpu() logged per micro-batch; fixed: one .cpu() "
               "a step"),
            excluded="no measurable defect: on the H100 (2026-11-26) the fixed twin ran 10% slower (33.2 against "
                     "36.5 ms a step), so there is no gain to diagnose"),
    _h("holdout_launch_small_mlp", "launch-bound",
       "FP32 32-64-64-10 MLP run per sample over 4 batches of 64 (~1,500 launches); fixed: one call per batch"),
    _h("holdout_unfused_adam", "unfused-elementwise",
       "hand-written AdamW, 16 elementwise ops per 64M-element FP32 tensor, 4 tensors; fixed: one Triton kernel each"),
    _h("holdout_pageable_eval", "pageable-copies",
       "64 MB pageable fp16 batch .to(device) per step, 4-block bf16 MLP eval; fixed: pinned + side-stream prefetch"),
    _h("holdout_host_tokenize", "host-input-stall",
       "pure-Python tokenisation of 64 documents per step before a bf16 encoder; fixed: a background thread + queue"),
    _h("holdout_tf32_attention", "tensor-cores-unused",
       "hand-written FP32 attention (q@k.T, softmax, @v), 4 layers, TF32 off; fixed: bf16 autocast + SDPA"),
    _h("holdout_control_compiled", CONTROL,
       "CUDA-graphed bf16 2-block transformer forward, width 4096, flash attention: tensor-core GEMMs"),
)
HALVES = ("check", "holdout")

BY_NAME = {p.name: p for p in PROGRAMS}


def names(half: str) -> str:
    """The comma-separated names of one half, for measure.py --programs."""
    return ",".join(p.name for p in PROGRAMS if p.half == half)
