"""Record the user-trace suite: small programs, each with one classic defect and its fixed twin, profiled the way
users profile (torch.profiler with a schedule, tensorboard_trace_handler, record_shapes=True, with_stack=True).

For each program and variant it writes one gzipped Kineto trace named ``<program>_<variant>.pt.trace.json.gz`` and
times the variant unprofiled (median step after warm-up, each step ended by a device synchronize), so the fix's
gain is measured: ``gain = 1 - fixed_ms / defect_ms``. It also measures what the profiler's options cost per step
(plain, default, + shapes, + stacks, + both) on launch-heavy programs, and, when kernelscope is importable, the
step under ``kernelscope run``.

    python benchmarks/user_traces/record.py OUTDIR            # every program; OUTDIR/manifest.json
    python benchmarks/user_traces/record.py --one NAME VARIANT --steps N   # one program, prints step times (JSON)

The programs' ``half`` (tune / check) and ``expected`` defect are written here, before the rules that name them.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import torch
import torch.nn.functional as F

try:  # step marks under `kernelscope run`; nothing otherwise
    import kernelscope
except ImportError:
    kernelscope = None

Step = Callable[[], object]


# ---------------------------------------------------------------- syncs
def sync_per_layer(variant: str, dev: torch.device) -> Step:
    """A 24-layer MLP whose forward calls torch.cuda.synchronize() after every layer (to 'time' each layer)."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(1024, 1024, device=dev) for _ in range(24)]
    x = torch.randn(256, 1024, device=dev)

    def step():
        h = x
        for layer in layers:
            h = torch.relu(layer(h))
            if variant == "defect":
                torch.cuda.synchronize()
        return h
    return step


def item_check_per_layer(variant: str, dev: torch.device) -> Step:
    """A 24-layer residual MLP that checks each layer's output for overflow with .item() (an implicit sync)."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(1024, 1024, device=dev) for _ in range(24)]
    x = torch.randn(256, 1024, device=dev)

    def step():
        h = x
        peaks = []
        for layer in layers:
            h = h + torch.tanh(layer(h))
            if variant == "defect":
                if h.abs().max().item() > 1e4:
                    raise RuntimeError("overflow")
            else:
                peaks.append(h.abs().max())
        if peaks and torch.stack(peaks).max().item() > 1e4:  # once per step
            raise RuntimeError("overflow")
        return h
    return step


def bool_mask_in_loop(variant: str, dev: torch.device) -> Step:
    """Per layer, the mean of the positive activations by boolean-mask indexing h[h > 0] (nonzero: a sync)."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(1024, 1024, device=dev) for _ in range(16)]
    x = torch.randn(512, 1024, device=dev)

    def step():
        h = x
        stats = []
        for layer in layers:
            h = torch.tanh(layer(h))
            if variant == "defect":
                pos = h[h > 0]
                stats.append(pos.mean())
            else:
                mask = h > 0
                stats.append((h * mask).sum() / mask.sum())
        return torch.stack(stats)
    return step


def masked_select_in_loop(variant: str, dev: torch.device) -> Step:
    """Per layer, the sum of activations above a threshold by torch.masked_select (data-dependent size: a sync)."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(768, 768, device=dev) for _ in range(16)]
    x = torch.randn(512, 768, device=dev)

    def step():
        h = x
        total = torch.zeros((), device=dev)
        for layer in layers:
            h = torch.tanh(layer(h))
            if variant == "defect":
                total = total + torch.masked_select(h, h > 0.5).sum()
            else:
                total = total + torch.where(h > 0.5, h, 0.0).sum()
        return total
    return step


def tolist_in_loop(variant: str, dev: torch.device) -> Step:
    """A greedy "decode" of 16 tokens through a small MLP head that reads each token with .tolist() as it goes."""
    torch.manual_seed(0)
    emb = torch.nn.Embedding(4096, 512, device=dev)
    layers = [torch.nn.Linear(512, 512, device=dev) for _ in range(4)]
    head = torch.nn.Linear(512, 4096, device=dev)
    start = torch.zeros(8, dtype=torch.long, device=dev)

    def step():
        tok = start
        out: list = []
        kept = []
        for _ in range(16):
            h = emb(tok)
            for layer in layers:
                h = torch.relu(layer(h))
            tok = head(h).argmax(-1)
            if variant == "defect":
                out.append(tok.tolist())
            else:
                kept.append(tok)
        if kept:
            out = torch.stack(kept).tolist()  # once per step
        return out
    return step


def cpu_copy_in_loop(variant: str, dev: torch.device) -> Step:
    """A 16-layer MLP that copies each layer's mean activation to the host with .cpu() for logging."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(1024, 1024, device=dev) for _ in range(16)]
    x = torch.randn(256, 1024, device=dev)

    def step():
        h = x
        logged = []
        for layer in layers:
            h = torch.relu(layer(h))
            logged.append(h.mean(0).cpu() if variant == "defect" else h.mean(0))
        if variant != "defect":
            logged = list(torch.stack(logged).cpu())
        return logged
    return step


# ---------------------------------------------------------------- attention
class ManualAttention(torch.nn.Module):
    """Causal multi-head self-attention written out: q @ k^T, scale, masked_fill, softmax, @ v."""

    def __init__(self, dim: int, heads: int, sdpa: bool, dev: torch.device, dtype: torch.dtype):
        super().__init__()
        self.heads, self.sdpa = heads, sdpa
        self.qkv = torch.nn.Linear(dim, 3 * dim, device=dev, dtype=dtype)
        self.out = torch.nn.Linear(dim, dim, device=dev, dtype=dtype)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        if self.sdpa:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            causal = torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1)
            scores = scores.masked_fill(causal, float("-inf"))
            y = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.out(y.transpose(1, 2).reshape(b, s, d))


def manual_attention(variant: str, dev: torch.device) -> Step:
    """Two transformer attention layers (fp16, batch 4, 2048 tokens, 16 heads of 64) with attention written out."""
    torch.manual_seed(0)
    blocks = [ManualAttention(1024, 16, variant == "fixed", dev, torch.float16) for _ in range(2)]
    x = torch.randn(4, 2048, 1024, device=dev, dtype=torch.float16)

    @torch.no_grad()
    def step():
        h = x
        for blk in blocks:
            h = h + blk(h)
        return h
    return step


def hf_llama_eager(variant: str, dev: torch.device) -> Step:
    """A 4-layer Llama from transformers (random weights, bf16, batch 2, 2048 tokens) with
    attn_implementation="eager" (the defect) or "sdpa" (fixed)."""
    from transformers import LlamaConfig, LlamaModel
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4, num_attention_heads=16,
                      num_key_value_heads=16, vocab_size=8192, max_position_embeddings=4096)
    impl = "eager" if variant == "defect" else "sdpa"
    try:
        model = LlamaModel._from_config(cfg, attn_implementation=impl)
    except TypeError:
        cfg._attn_implementation = impl
        model = LlamaModel(cfg)
    model = model.to(device=dev, dtype=torch.bfloat16).eval()
    print("hf_llama_eager", variant, "attention:", model.config._attn_implementation, flush=True)
    ids = torch.randint(0, 8192, (2, 2048), device=dev)

    @torch.no_grad()
    def step():
        return model(input_ids=ids).last_hidden_state
    return step


# ---------------------------------------------------------------- norms
def manual_layernorm(variant: str, dev: torch.device) -> Step:
    """Eight Linear + LayerNorm blocks on 16384 x 1024 fp32 tokens, LayerNorm written out (mean, var, sub, div...)."""
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    dim = 1024
    layers = [torch.nn.Linear(dim, dim, device=dev) for _ in range(8)]
    weight = torch.ones(dim, device=dev)
    bias = torch.zeros(dim, device=dev)
    x = torch.randn(16384, dim, device=dev)

    def norm(h: torch.Tensor) -> torch.Tensor:
        if variant == "fixed":
            return F.layer_norm(h, (dim,), weight, bias, 1e-5)
        mean = h.mean(-1, keepdim=True)
        var = ((h - mean) ** 2).mean(-1, keepdim=True)
        return (h - mean) / torch.sqrt(var + 1e-5) * weight + bias

    @torch.no_grad()
    def step():
        h = x
        for layer in layers:
            h = norm(layer(h))
        return h
    return step


def manual_rmsnorm(variant: str, dev: torch.device) -> Step:
    """Eight Linear + RMSNorm blocks on 16384 x 2048 bf16 tokens, RMSNorm written out in fp32 as Llama's is."""
    torch.manual_seed(0)
    dim = 2048
    layers = [torch.nn.Linear(dim, dim, device=dev, dtype=torch.bfloat16) for _ in range(8)]
    weight = torch.ones(dim, device=dev, dtype=torch.bfloat16)
    x = torch.randn(16384, dim, device=dev, dtype=torch.bfloat16)

    def norm(h: torch.Tensor) -> torch.Tensor:
        if variant == "fixed":
            return F.rms_norm(h, (dim,), weight, 1e-6)
        h32 = h.to(torch.float32)
        var = h32.pow(2).mean(-1, keepdim=True)
        return weight * (h32 * torch.rsqrt(var + 1e-6)).to(h.dtype)

    @torch.no_grad()
    def step():
        h = x
        for layer in layers:
            h = norm(layer(h))
        return h
    return step


# ---------------------------------------------------------------- optimizers
def _many_params(dev: torch.device, n: int, dim: int) -> tuple[torch.nn.Module, torch.Tensor]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(dim, dim) for _ in range(n)]).to(dev)
    return model, torch.randn(64, dim, device=dev)


def adam_per_tensor(variant: str, dev: torch.device) -> Step:
    """A 32-layer MLP (64 parameter tensors of 256x256 and 256) trained with Adam(foreach=False)."""
    model, x = _many_params(dev, 32, 256)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, foreach=(variant == "fixed"))

    def step():
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    return step


def adamw_per_tensor(variant: str, dev: torch.device) -> Step:
    """A 24-layer MLP of 384 wide trained with AdamW(foreach=False); fixed with AdamW(fused=True)."""
    model, x = _many_params(dev, 24, 384)
    if variant == "fixed":
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, foreach=False)

    def step():
        loss = model(x).square().mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss
    return step


# ---------------------------------------------------------------- control
def graphed_decode(variant: str, dev: torch.device) -> Step:
    """Nothing to fix: a batch-1 decode step of a 16-layer MLP captured once in a CUDA graph and replayed 32 times
    per step; its kernels are many and short, but a graph replay is not launch-bound."""
    torch.manual_seed(0)
    layers = [torch.nn.Linear(1024, 1024, device=dev) for _ in range(16)]
    x = torch.randn(1, 1024, device=dev)

    def body():
        h = x
        for layer in layers:
            h = torch.relu(layer(h))
        return h
    with torch.no_grad():
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                body()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = body()

    def step():
        for _ in range(32):
            graph.replay()
        return out
    return step


# name: (builder, half, expected defect, variants)
PROGRAMS: dict[str, tuple[Callable[[str, torch.device], Step], str, str, tuple[str, ...]]] = {
    "sync_per_layer": (sync_per_layer, "tune", "sync", ("defect", "fixed")),
    "bool_mask_in_loop": (bool_mask_in_loop, "tune", "sync", ("defect", "fixed")),
    "tolist_in_loop": (tolist_in_loop, "tune", "sync", ("defect", "fixed")),
    "manual_attention": (manual_attention, "tune", "unfused_attention", ("defect", "fixed")),
    "manual_layernorm": (manual_layernorm, "tune", "unfused_norm", ("defect", "fixed")),
    "adam_per_tensor": (adam_per_tensor, "tune", "optimizer_per_tensor", ("defect", "fixed")),
    "item_check_per_layer": (item_check_per_layer, "check", "sync", ("defect", "fixed")),
    "masked_select_in_loop": (masked_select_in_loop, "check", "sync", ("defect", "fixed")),
    "cpu_copy_in_loop": (cpu_copy_in_loop, "check", "sync", ("defect", "fixed")),
    "hf_llama_eager": (hf_llama_eager, "check", "unfused_attention", ("defect", "fixed")),
    "manual_rmsnorm": (manual_rmsnorm, "check", "unfused_norm", ("defect", "fixed")),
    "adamw_per_tensor": (adamw_per_tensor, "check", "optimizer_per_tensor", ("defect", "fixed")),
    "graphed_decode": (graphed_decode, "control", "none", ("control",)),
}


def _sync(dev: torch.device) -> None:
    torch.cuda.synchronize(dev)


def time_steps(step: Step, dev: torch.device, warmup: int, steps: int, mark: bool = False) -> list[float]:
    """Per-step wall time in ms after `warmup` steps; each step ends with a device synchronize."""
    times = []
    for i in range(warmup + steps):
        t0 = time.perf_counter()
        step()
        _sync(dev)
        if i >= warmup:
            times.append((time.perf_counter() - t0) * 1e3)
        if mark and kernelscope is not None:
            kernelscope.step()
    return times


def record(name: str, variant: str, step: Step, dev: torch.device, outdir: Path) -> Path:
    """Profile five steps as users do; keep the trace of the three active ones, gzipped."""
    tmp = outdir / f"tmp_{name}_{variant}"
    tmp.mkdir(parents=True, exist_ok=True)
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=acts, schedule=torch.profiler.schedule(wait=1, warmup=1, active=3),
                                on_trace_ready=torch.profiler.tensorboard_trace_handler(
                                    str(tmp), worker_name=f"{name}_{variant}", use_gzip=True),
                                record_shapes=True, with_stack=True) as prof:
        for _ in range(5):
            step()
            _sync(dev)
            prof.step()
    (written,) = list(tmp.glob("*.json.gz"))
    dest = outdir / f"{name}_{variant}.pt.trace.json.gz"
    written.rename(dest)
    tmp.rmdir()
    return dest


def profiler_cost(step: Step, dev: torch.device, steps: int) -> dict[str, float]:
    """Median step (ms) plain and under torch.profiler's default, + record_shapes, + with_stack, + both."""
    acts = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    out = {"plain": statistics.median(time_steps(step, dev, 3, steps))}
    for label, kw in (("default", {}), ("shapes", {"record_shapes": True}), ("stacks", {"with_stack": True}),
                      ("shapes_stacks", {"record_shapes": True, "with_stack": True})):
        with torch.profiler.profile(activities=acts, **kw):
            out[label] = statistics.median(time_steps(step, dev, 3, steps))
    return out


def one(argv: list[str]) -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--one", nargs=2, metavar=("NAME", "VARIANT"), required=True)
    p.add_argument("--steps", type=int, default=10)
    args = p.parse_args(argv)
    dev = torch.device("cuda")
    name, variant = args.one
    times = time_steps(PROGRAMS[name][0](variant, dev), dev, 3, args.steps, mark=True)
    print(json.dumps({"step_ms": times, "median_ms": statistics.median(times)}))


def main() -> None:
    if "--one" in sys.argv:
        one(sys.argv[1:])
        return
    outdir = Path(sys.argv[1])
    outdir.mkdir(parents=True, exist_ok=True)
    dev = torch.device("cuda")
    manifest: dict = {"device": torch.cuda.get_device_name(dev), "torch": torch.__version__,
                      "date": time.strftime("%Y-%m-%d", time.gmtime()), "programs": {}, "profiler_cost": {}}
    names = sys.argv[2:] or list(PROGRAMS)
    for name in names:
        build, half, expected, variants = PROGRAMS[name]
        entry: dict = {"half": half, "expected": expected, "doc": (build.__doc__ or "").split("\n")[0],
                       "variants": {}}
        try:
            for variant in variants:
                step = build(variant, dev)
                times = time_steps(step, dev, 5, 20)
                trace = record(name, variant, step, dev, outdir)
                entry["variants"][variant] = {"median_ms": round(statistics.median(times), 4),
                                              "step_ms": [round(t, 4) for t in times], "trace": trace.name,
                                              "trace_bytes": trace.stat().st_size}
                del step
                torch.cuda.empty_cache()
            v = entry["variants"]
            if "defect" in v and "fixed" in v:
                entry["gain"] = round(1.0 - v["fixed"]["median_ms"] / v["defect"]["median_ms"], 4)
        except Exception as exc:  # one program's failure (a missing package) leaves the others
            entry["error"] = f"{type(exc).__name__}: {exc}"
        manifest["programs"][name] = entry
        (outdir / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")  # kept if a later one hangs
        print(name, json.dumps({k: entry.get(k) for k in ("gain", "error")}),
              {k: v["median_ms"] for k, v in entry["variants"].items()}, flush=True)
    for name in ("tolist_in_loop", "adam_per_tensor", "sync_per_layer", "graphed_decode"):
        build, _, _, variants = PROGRAMS[name]
        cost = profiler_cost(build(variants[0], dev), dev, 15)
        if kernelscope is not None:
            cost["kernelscope_run"] = _kernelscope_run(name, variants[0], outdir)
        manifest["profiler_cost"][f"{name}_{variants[0]}"] = cost
        (outdir / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
        print("cost", name, cost, flush=True)


def _kernelscope_run(name: str, variant: str, outdir: Path) -> float | str:
    """Median step (ms) of the program under `kernelscope run` (the trace pass), or why it is missing."""
    session = outdir / f"tmp_ks_{name}.json"
    cmd = [sys.executable, "-m", "kernelscope", "run", "-q", "-f", "-o", str(session), "--sample-interval", "0", "--",
           sys.executable, __file__, "--one", name, variant, "--steps", "15"]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, env=dict(os.environ))
    except subprocess.TimeoutExpired:
        return "timed out"
    finally:
        session.unlink(missing_ok=True)
    for line in res.stdout.splitlines()[::-1]:
        if line.startswith("{"):
            return json.loads(line)["median_ms"]
    return f"no step times (rc {res.returncode}): {res.stderr[-300:]}"


if __name__ == "__main__":
    main()
