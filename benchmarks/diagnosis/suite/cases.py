"""Build one case's variant: its inputs, a `run()` that launches the variant's kernel(s) once,
its result, and a torch reference computed another way.

    prepared = prepare(case("uncoalesced"), "defect", device="cuda", size="full")
    prepared.run(); prepared.check()

CUDA C++ cases need a GPU and nvcc (NeedsGpu on a CPU); Triton cases also run in the
Triton interpreter (TRITON_INTERPRET=1) on CPU tensors at the "tiny" size.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from benchmarks.diagnosis.suite.config import CONTROL, CUDA, DEFECT, CaseSpec

BUILDERS: dict[str, Callable[..., "Prepared"]] = {}


class NeedsGpu(RuntimeError):
    """The case cannot run here (a CUDA C++ case without a GPU); the message says why."""


@dataclass
class Prepared:
    spec: CaseSpec
    variant: str
    run: Callable[[], Any]  # one step of the variant: the kernel(s) whose time and counters count
    result: Callable[[], torch.Tensor]  # the output of the last run()
    reference: Callable[[], torch.Tensor]  # the same result computed by torch another way
    atol: float = 1e-5
    rtol: float = 1e-5
    info: dict[str, Any] = field(default_factory=dict)  # launch facts chosen at build time (grid, blocks/SM)

    def check(self) -> None:
        """Raise AssertionError with the worst mismatch when the result is not the reference's."""
        got, want = self.result().float(), self.reference().float()
        if got.shape != want.shape:
            raise AssertionError(f"{self.spec.name}/{self.variant}: shape {tuple(got.shape)} != {tuple(want.shape)}")
        if not torch.allclose(got, want, atol=self.atol, rtol=self.rtol):
            err = (got - want).abs().max().item()
            raise AssertionError(f"{self.spec.name}/{self.variant}: max abs error {err:.3g} "
                                 f"(atol {self.atol:g}, rtol {self.rtol:g})")


def builder(name: str):
    def wrap(fn):
        BUILDERS[name] = fn
        return fn
    return wrap


def prepare(spec: CaseSpec, variant: str, device: str = "cuda", size: str = "full") -> Prepared:
    if variant not in spec.variants:
        raise ValueError(f"case {spec.name} has variants {', '.join(spec.variants)}, not {variant!r}")
    if spec.kind == CUDA and not (device.startswith("cuda") and torch.cuda.is_available()):
        raise NeedsGpu(f"{spec.name} is CUDA C++ (built with nvcc, launched on a GPU); no GPU here")
    params = spec.full if size == "full" else spec.tiny
    torch.manual_seed(0)
    return BUILDERS[spec.name](spec, variant, device, dict(params))


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _cdiv(a: int, b: int) -> int:
    return (a + b - 1) // b


# ---------------------------------------------------------------- Triton cases

@builder("uncoalesced")
def _uncoalesced(spec, variant, device, p):
    from benchmarks.diagnosis.suite.triton_kernels import scale_copy_kernel

    x = torch.randn(p["rows"], p["cols"], device=device)
    y = torch.empty_like(x)
    grid = (_cdiv(x.numel(), p["block"]),)

    def run():
        scale_copy_kernel[grid](x, y, p["rows"], p["cols"], BLOCK=p["block"], COLUMN_ORDER=variant == DEFECT)
    return Prepared(spec, variant, run, lambda: y, lambda: x * 2 + 1, info={"grid": grid})


@builder("scalar_loads")
def _scalar_loads(spec, variant, device, p):
    from benchmarks.diagnosis.suite.triton_kernels import scale_copy_kernel, strided_scale_kernel

    x = torch.randn(p["n"], device=device)
    y = torch.empty_like(x)
    grid = (_cdiv(p["n"], p["block"]),)

    def run():
        if variant == DEFECT:
            strided_scale_kernel[grid](x, y, p["n"], 1, BLOCK=p["block"])
        else:
            scale_copy_kernel[grid](x, y, 1, p["n"], BLOCK=p["block"], COLUMN_ORDER=False)
    return Prepared(spec, variant, run, lambda: y, lambda: x * 2 + 1, info={"grid": grid})


def _fma_reference(x: torch.Tensor, iters: int) -> torch.Tensor:
    a = x.double()
    for _ in range(iters):
        a = a * 0.999 + 0.001
    return a


def blocks_per_sm(compiled: Any, threads: int) -> int:
    """Resident blocks per SM of a compiled Triton kernel, by kernelscope's occupancy calculator."""
    from kernelscope.analyze.occupancy import theoretical_occupancy

    smem = int(getattr(compiled.metadata, "shared", 0) or 0)
    occ = theoretical_occupancy(torch.cuda.get_device_capability(), threads, int(compiled.n_regs), smem)
    return occ.active_blocks_per_sm


@builder("tail_effect")
def _tail_effect(spec, variant, device, p):
    from benchmarks.diagnosis.suite.triton_kernels import fma_rows_kernel

    row, iters, rpp, warps = p["row"], p["iters"], p["rows_per_prog"], p["num_warps"]
    info: dict[str, Any] = {}
    if "programs" in p:  # tiny: no GPU to size waves against
        programs = p["programs"]
    else:  # 1.1 waves of the defect's launch: compile it first to learn its blocks per SM
        probe_x = torch.zeros(rpp * row, device=device)
        compiled = fma_rows_kernel[(1,)](probe_x, torch.empty_like(probe_x), rpp, rpp, ROW=row, ITERS=iters,
                                         num_warps=warps)
        bps = blocks_per_sm(compiled, 32 * warps)
        sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
        programs = math.ceil(p["waves"] * bps * sms)
        info.update(blocks_per_sm=bps, sms=sms, registers=int(compiled.n_regs))
    n_rows = programs * rpp
    x = torch.rand(n_rows * row, device=device)
    y = torch.empty_like(x)
    grid, per = ((programs,), rpp) if variant == DEFECT else ((n_rows,), 1)
    info.update(grid=grid, rows_per_program=per, rows=n_rows)

    def run():
        fma_rows_kernel[grid](x, y, n_rows, per, ROW=row, ITERS=iters, num_warps=warps)
    return Prepared(spec, variant, run, lambda: y, lambda: _fma_reference(x, iters), atol=1e-4, rtol=1e-4, info=info)


@builder("small_grid")
def _small_grid(spec, variant, device, p):
    from benchmarks.diagnosis.suite.triton_kernels import fma_rows_kernel

    row, iters, rows, warps = p["row"], p["iters"], p["rows"], p["num_warps"]
    x = torch.rand(rows * row, device=device)
    y = torch.empty_like(x)
    grid, per = ((p["programs"],), _cdiv(rows, p["programs"])) if variant == DEFECT else ((rows,), 1)

    def run():
        fma_rows_kernel[grid](x, y, rows, per, ROW=row, ITERS=iters, num_warps=warps)
    return Prepared(spec, variant, run, lambda: y, lambda: _fma_reference(x, iters), atol=1e-4, rtol=1e-4,
                    info={"grid": grid, "rows_per_program": per})


@builder("fma_matmul")
def _fma_matmul(spec, variant, device, p):
    from benchmarks.diagnosis.suite.triton_kernels import matmul_kernel

    m, n, k = p["m"], p["n"], p["k"]
    bm, bn, bk, warps = p["defect_tile" if variant == DEFECT else "fixed_tile"]
    a = torch.randn(m, k, device=device).half()
    b = torch.randn(k, n, device=device).half()
    c = torch.empty(m, n, device=device, dtype=torch.float16)
    grid = (m // bm, n // bn)

    def run():
        matmul_kernel[grid](a, b, c, m, n, k, BM=bm, BN=bn, BK=bk, USE_DOT=variant != DEFECT, num_warps=warps)
    # fp16 output of sums of k products of unit normals: |c| ~ sqrt(k), fp16 spacing there ~ sqrt(k) / 1024
    tol = 2 * math.sqrt(k) / 1024
    return Prepared(spec, variant, run, lambda: c, lambda: a.float() @ b.float(), atol=tol, rtol=1e-2,
                    info={"grid": grid, "tile": (bm, bn, bk), "num_warps": warps})


@builder("launch_bound")
def _launch_bound(spec, variant, device, p):
    from benchmarks.diagnosis.suite.triton_kernels import add_one_kernel

    chunks, chunk, block = p["chunks"], p["chunk"], p["block"]
    x = torch.randn(chunks * chunk, device=device)
    y = torch.empty_like(x)
    pieces = [(x[i * chunk:(i + 1) * chunk], y[i * chunk:(i + 1) * chunk]) for i in range(chunks)]

    def run():
        if variant == DEFECT:
            for xi, yi in pieces:
                add_one_kernel[(_cdiv(chunk, block),)](xi, yi, chunk, BLOCK=block)
        else:
            add_one_kernel[(_cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block)
    return Prepared(spec, variant, run, lambda: y, lambda: x + 1, info={"launches_per_step": chunks
                                                                        if variant == DEFECT else 1})


@builder("host_gaps")
def _host_gaps(spec, variant, device, p):
    from benchmarks.diagnosis.suite.triton_kernels import scale_copy_kernel

    x = torch.randn(p["n"], device=device)
    y = torch.empty_like(x)
    grid = (_cdiv(p["n"], p["block"]),)

    def run():
        for _ in range(p["steps"]):
            scale_copy_kernel[grid](x, y, 1, p["n"], BLOCK=p["block"], COLUMN_ORDER=False)
            if variant == DEFECT:
                _sync(device)  # the planted defect: the host waits for every step
    return Prepared(spec, variant, run, lambda: y, lambda: x * 2 + 1, info={"kernels_per_step": p["steps"]})


# ---------------------------------------------------------------- CUDA C++ cases (GPU only)

def _ptr(t: torch.Tensor) -> int:
    return t.data_ptr()


@builder("bank_conflicts")
def _bank_conflicts(spec, variant, device, p):
    from benchmarks.diagnosis.suite.cuda_build import call

    w = p["width"]
    x = torch.randn(w, w, device=device)
    y = torch.empty_like(x)
    return Prepared(spec, variant, lambda: call("transpose", _ptr(x), _ptr(y), w, int(variant != DEFECT)),
                    lambda: y, lambda: x.t())


@builder("local_memory")
def _local_memory(spec, variant, device, p):
    from benchmarks.diagnosis.suite.cuda_build import call, constant

    k, n, shift = constant("local_k"), p["n"], p["shift"]
    x = torch.randn(k, n, device=device)
    w = torch.randn(k, device=device)
    y = torch.empty(n, device=device)
    run = lambda: call("local_array", _ptr(x), _ptr(w), _ptr(y), n, shift, int(variant == DEFECT))  # noqa: E731
    ref = lambda: (torch.roll(x, -shift, 0).double() * w.double()[:, None]).sum(0)  # noqa: E731
    return Prepared(spec, variant, run, lambda: y, ref, atol=1e-4, rtol=1e-4)


@builder("divergence")
def _divergence(spec, variant, device, p):
    from benchmarks.diagnosis.suite.cuda_build import call

    n, iters = p["n"], p["iters"]
    x = torch.rand(n, device=device)
    y = torch.empty_like(x)

    def ref():
        a, odd = x.double(), (torch.arange(n, device=device) % 2 == 1)
        c, d = torch.where(odd, 1.001, 0.999).double(), torch.where(odd, -0.001, 0.001).double()
        for _ in range(iters):
            a = a * c + d
        return a
    run = lambda: call("divergence", _ptr(x), _ptr(y), n, iters, int(variant != DEFECT))  # noqa: E731
    return Prepared(spec, variant, run, lambda: y, ref, atol=1e-4, rtol=1e-4)


def _chain_reference(x: torch.Tensor, table: torch.Tensor, reps: int) -> torch.Tensor:
    a = x.double()
    for _ in range(reps):
        for c in table.double().tolist():
            a = a * c + 0.001
    return a


@builder("occupancy_smem")
def _occupancy_smem(spec, variant, device, p):
    from benchmarks.diagnosis.suite.cuda_build import call

    n, t, reps = p["n"], p["table"], p["reps"]
    x = torch.rand(n, device=device)
    table = 1 + 1e-3 * torch.randn(t, device=device)
    y = torch.empty_like(x)
    smem = p["defect_smem"] if variant == DEFECT else 4 * t
    run = lambda: call("smem_chain", _ptr(x), _ptr(table), _ptr(y), n, t, reps, smem)  # noqa: E731
    return Prepared(spec, variant, run, lambda: y, lambda: _chain_reference(x, table, reps), atol=1e-4, rtol=1e-4,
                    info={"dynamic_shared_memory_bytes": smem})


@builder("occupancy_regs")
def _occupancy_regs(spec, variant, device, p):
    from benchmarks.diagnosis.suite.cuda_build import call, constant

    n, reps, t = p["n"], p["reps"], constant("reg_table_len")
    x = torch.rand(n, device=device)
    table = 1 + 1e-3 * torch.randn(t, device=device)
    y = torch.empty_like(x)
    # defect: the kernel compiled with a free register budget (~200 per thread); fixed: 32 per thread
    run = lambda: call("reg_chain", _ptr(x), _ptr(table), _ptr(y), n, reps, int(variant == DEFECT))  # noqa: E731
    return Prepared(spec, variant, run, lambda: y, lambda: _chain_reference(x, table, reps), atol=1e-4, rtol=1e-4,
                    info={"launch_bounds": "(128)" if variant == DEFECT else "(128, 16)"})


# ---------------------------------------------------------------- controls (library kernels)

@builder("control_gemm")
def _control_gemm(spec, variant, device, p):
    a = torch.randn(p["m"], p["k"], device=device).half()
    b = torch.randn(p["k"], p["n"], device=device).half()
    c = torch.empty(p["m"], p["n"], device=device, dtype=torch.float16)
    assert variant == CONTROL
    # cuBLAS may reduce partly in fp16 (allow_fp16_reduced_precision_reduction): a looser bound than fma_matmul's
    return Prepared(spec, variant, lambda: torch.matmul(a, b, out=c), lambda: c, lambda: a.float() @ b.float(),
                    atol=8 * math.sqrt(p["k"]) / 1024, rtol=2e-2)


@builder("control_sdpa")
def _control_sdpa(spec, variant, device, p):
    import torch.nn.functional as F

    shape = (p["batch"], p["heads"], p["seq"], p["head_dim"])
    q, k, v = (torch.randn(shape, device=device).half() for _ in range(3))
    out: dict[str, torch.Tensor] = {}

    def run():
        if device.startswith("cuda"):
            from torch.nn.attention import SDPBackend, sdpa_kernel

            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                out["o"] = F.scaled_dot_product_attention(q, k, v)
        else:
            out["o"] = F.scaled_dot_product_attention(q, k, v)

    def ref():
        s = (q.float() @ k.float().transpose(-1, -2)) / math.sqrt(p["head_dim"])
        return torch.softmax(s, dim=-1) @ v.float()
    return Prepared(spec, variant, run, lambda: out["o"], ref, atol=2e-2, rtol=1e-2)


@builder("control_add")
def _control_add(spec, variant, device, p):
    x, y = torch.randn(p["n"], device=device), torch.randn(p["n"], device=device)
    z = torch.empty_like(x)
    return Prepared(spec, variant, lambda: torch.add(x, y, out=z), lambda: z, lambda: x.double() + y.double())



# ---------------------------------------------------------------- check half (issue 35)

BUILDERS["tail_effect_w8"] = BUILDERS["tail_effect_w4"] = _tail_effect  # same kernel, other waves and warps
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


@builder("uncoalesced_bf16_transpose")
def _uncoalesced_transpose(spec, variant, device, p):
    from benchmarks.diagnosis.suite.triton_kernels import transpose_kernel

    r, c, br, bc = p["rows"], p["cols"], p["br"], p["bc"]
    x = torch.randn(r, c, device=device).to(torch.bfloat16)
    y = torch.empty(c, r, device=device, dtype=torch.bfloat16)
    gather = variant == DEFECT
    grid = (_cdiv(r * c, br * bc),) if gather else (r // br, c // bc)

    def run():
        transpose_kernel[grid](x, y, r, c, BR=br, BC=bc, GATHER=gather)
    return Prepared(spec, variant, run, lambda: y, lambda: x.t(), atol=0, rtol=0, info={"grid": grid})


@builder("small_grid_rmsnorm")
def _small_grid_rmsnorm(spec, variant, device, p):
    from benchmarks.diagnosis.suite.triton_kernels import rms_rows_kernel

    rows, row, warps = p["rows"], p["row"], p["num_warps"]
    x = torch.randn(rows, row, device=device).half()
    y = torch.empty_like(x)
    grid, per = ((p["programs"],), _cdiv(rows, p["programs"])) if variant == DEFECT else ((rows,), 1)

    def run():
        rms_rows_kernel[grid](x, y, rows, per, ROW=row, num_warps=warps)

    def ref():
        xd = x.double()
        return xd / torch.sqrt((xd * xd).mean(dim=1, keepdim=True) + 1e-6)
    return Prepared(spec, variant, run, lambda: y, ref, atol=1e-2, rtol=1e-2,
                    info={"grid": grid, "rows_per_program": per, "num_warps": warps})


@builder("fma_matmul_fp32")
@builder("fma_matmul_fp16_rect")
def _fma_matmul_any(spec, variant, device, p):
    from benchmarks.diagnosis.suite.triton_kernels import matmul_any_kernel

    m, n, k, dtype = p["m"], p["n"], p["k"], _DTYPES[p["dtype"]]
    bm, bn, bk, warps = p["defect_tile" if variant == DEFECT else "fixed_tile"]
    a = torch.randn(m, k, device=device).to(dtype)
    b = torch.randn(k, n, device=device).to(dtype)
    c = torch.empty(m, n, device=device, dtype=dtype)
    grid = (m // bm, n // bn)

    def run():
        matmul_any_kernel[grid](a, b, c, m, n, k, BM=bm, BN=bn, BK=bk, USE_DOT=variant != DEFECT, num_warps=warps)
    # |c| ~ sqrt(k); fp16 output and TF32 operands (the fp32 fix) both keep ~10 bits: the max error over millions
    # of elements is a few units of sqrt(k) / 1024 (a wrong result is off by ~sqrt(k))
    tol = 8 * math.sqrt(k) / 1024
    return Prepared(spec, variant, run, lambda: c, lambda: a.double() @ b.double(), atol=tol, rtol=1e-2,
                    info={"grid": grid, "tile": (bm, bn, bk), "num_warps": warps, "dtype": p["dtype"]})


@builder("launch_bound_bf16")
def _launch_bound_bf16(spec, variant, device, p):
    from benchmarks.diagnosis.suite.triton_kernels import axpb_kernel

    chunks, chunk, block = p["chunks"], p["chunk"], p["block"]
    x = torch.randn(chunks * chunk, device=device).to(torch.bfloat16)
    y = torch.empty_like(x)
    pieces = [(x[i * chunk:(i + 1) * chunk], y[i * chunk:(i + 1) * chunk]) for i in range(chunks)]

    def run():
        if variant == DEFECT:
            for xi, yi in pieces:
                axpb_kernel[(_cdiv(chunk, block),)](xi, yi, chunk, BLOCK=block)
        else:
            axpb_kernel[(_cdiv(x.numel(), block),)](x, y, x.numel(), BLOCK=block)
    return Prepared(spec, variant, run, lambda: y, lambda: x.double() * 0.5 + 1, atol=1e-2, rtol=1e-2,
                    info={"launches_per_step": chunks if variant == DEFECT else 1})


@builder("bank_conflicts_wide_tile")
def _bank_conflicts_wide(spec, variant, device, p):
    from benchmarks.diagnosis.suite.cuda_build import call

    r, c = p["rows"], p["cols"]
    x = torch.randn(r, c, device=device)
    y = torch.empty(c, r, device=device)
    return Prepared(spec, variant, lambda: call("transpose_wide", _ptr(x), _ptr(y), r, c, int(variant != DEFECT)),
                    lambda: y, lambda: x.t())


@builder("local_memory_k16")
def _local_memory_k16(spec, variant, device, p):
    from benchmarks.diagnosis.suite.cuda_build import call, constant

    k, n, shift = constant("window_k"), p["n"], p["shift"]
    x = torch.randn(k, n, device=device)
    w = torch.randn(k, device=device)
    y = torch.empty(n, device=device)
    run = lambda: call("window_array", _ptr(x), _ptr(w), _ptr(y), n, shift, int(variant == DEFECT))  # noqa: E731
    ref = lambda: (torch.roll(x, -shift, 0).double() * w.double()[:, None]).sum(0)  # noqa: E731
    return Prepared(spec, variant, run, lambda: y, ref, atol=1e-4, rtol=1e-4)


@builder("divergence_lane4")
def _divergence_lane4(spec, variant, device, p):
    from benchmarks.diagnosis.suite.cuda_build import call

    n, iters = p["n"], p["iters"]
    x = torch.rand(n, device=device)
    y = torch.empty_like(x)

    def ref():
        cls = torch.arange(n, device=device) % 4
        c = torch.tensor([0.999, 1.001, 0.998, 1.002], device=device, dtype=torch.float64)[cls]
        d = torch.tensor([0.001, -0.001, 0.002, -0.002], device=device, dtype=torch.float64)[cls]
        a = x.double()
        for _ in range(iters):
            a = a * c + d
        return a
    run = lambda: call("divergence4", _ptr(x), _ptr(y), n, iters, int(variant != DEFECT))  # noqa: E731
    return Prepared(spec, variant, run, lambda: y, ref, atol=1e-4, rtol=1e-4)


@builder("occupancy_smem_256")
def _occupancy_smem_256(spec, variant, device, p):
    from benchmarks.diagnosis.suite.cuda_build import call

    n, t, reps, threads = p["n"], p["table"], p["reps"], p["threads"]
    x = torch.rand(n, device=device)
    table = 1 + 1e-3 * torch.randn(t, device=device)
    y = torch.empty_like(x)
    smem = p["defect_smem"] if variant == DEFECT else 4 * t
    run = lambda: call("smem_chain_threads", _ptr(x), _ptr(table), _ptr(y), n, t, reps, smem, threads)  # noqa: E731
    return Prepared(spec, variant, run, lambda: y, lambda: _chain_reference(x, table, reps), atol=1e-4, rtol=1e-4,
                    info={"dynamic_shared_memory_bytes": smem, "threads_per_block": threads})


def _chase_reference(nxt: torch.Tensor, w: torch.Tensor, threads: int, rows: int, hops: int) -> torch.Tensor:
    """Per thread: sum over hops h of (row & 255) * w[h % len(w)], row following nxt from (thread // 32) % rows."""
    row = ((torch.arange(threads // 32, device=nxt.device) % rows)).long()
    acc = torch.zeros(threads // 32, dtype=torch.float64, device=nxt.device)
    wd, nl = w.double(), nxt.long()
    for h in range(hops):
        acc += (row & 255).double() * wd[h % len(w)]
        row = nl[row]
    return acc.repeat_interleave(32)


@builder("occupancy_regs_hot")
def _occupancy_regs_hot(spec, variant, device, p):
    from benchmarks.diagnosis.suite.cuda_build import call, constant

    threads, rows, hops, nw = p["threads"], p["rows"], p["hops"], constant("chase_w")
    nxt = torch.randperm(rows, device=device).to(torch.int32)
    w = 1 + 1e-2 * torch.randn(nw, device=device)
    y = torch.empty(threads, device=device)
    run = lambda: call("chase", _ptr(nxt), _ptr(w), _ptr(y), threads, rows, hops, int(variant == DEFECT))  # noqa: E731
    return Prepared(spec, variant, run, lambda: y, lambda: _chase_reference(nxt, w, threads, rows, hops),
                    atol=1e-2, rtol=1e-4, info={"weights": "registers" if variant == DEFECT else "shared memory"})


@builder("control_gemm_bf16")
def _control_gemm_bf16(spec, variant, device, p):
    a = torch.randn(p["m"], p["k"], device=device).to(torch.bfloat16)
    b = torch.randn(p["k"], p["n"], device=device).to(torch.bfloat16)
    c = torch.empty(p["m"], p["n"], device=device, dtype=torch.bfloat16)
    assert variant == CONTROL
    # bf16 output (8 significant bits) of sums of k products of unit normals: |c| ~ sqrt(k)
    return Prepared(spec, variant, lambda: torch.matmul(a, b, out=c), lambda: c, lambda: a.float() @ b.float(),
                    atol=4 * math.sqrt(p["k"]) / 128, rtol=2e-2)


@builder("control_softmax")
def _control_softmax(spec, variant, device, p):
    x = torch.randn(p["rows"], p["cols"], device=device).half()
    out: dict[str, torch.Tensor] = {}
    assert variant == CONTROL

    def run():
        out["y"] = torch.softmax(x, dim=-1)
    return Prepared(spec, variant, run, lambda: out["y"], lambda: torch.softmax(x.double(), dim=-1),
                    atol=1e-3, rtol=1e-2)
