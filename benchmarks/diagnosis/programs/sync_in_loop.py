"""sync-in-loop: the loop makes the host wait for the GPU (.item(), .cpu(), data-dependent shapes).

Each function is one program: its docstring says what it plants, and it returns the names the program
defines (build, main, SIZES, CPU_SKIP and its helpers). ``python run.py NAME --variant V`` runs one.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

import harness


def sync_item_train() -> dict:
    """sync-in-loop, training: gradient accumulation over 8 micro-batches of a small FP32 (TF32) MLP, and after each
    micro-batch the loss is read with .item() for a running sum and a NaN check, so the host waits for the GPU and
    the GPU then waits for the host to launch the next micro-batch. Fixed: the losses summed on the GPU and the NaN
    check done on the GPU sum, read once at the end of the step."""
    CPU_SKIP = None
    SIZES = {"full": dict(micro=8, batch=2048, hidden=2048, layers=6),
             "tiny": dict(micro=3, batch=4, hidden=8, layers=2)}

    def build(variant: str, tiny: bool, dev: torch.device):
        torch.set_float32_matmul_precision("high")
        s = SIZES["tiny" if tiny else "full"]
        torch.manual_seed(0)
        layers: list[torch.nn.Module] = []
        for _ in range(s["layers"]):
            layers += [torch.nn.Linear(s["hidden"], s["hidden"]), torch.nn.LayerNorm(s["hidden"]), torch.nn.GELU()]
        model = torch.nn.Sequential(*layers, torch.nn.Linear(s["hidden"], 1)).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        xs = torch.randn(s["micro"], s["batch"], s["hidden"], device=dev)
        ys = torch.randn(s["micro"], s["batch"], 1, device=dev)

        def step() -> torch.Tensor:
            if variant == "defect":
                total = 0.0
                for k in range(s["micro"]):
                    loss = torch.nn.functional.mse_loss(model(xs[k]), ys[k]) / s["micro"]
                    loss.backward()
                    value = loss.item()
                    if math.isnan(value):
                        raise RuntimeError("loss is NaN")
                    total += value
            else:
                total_t = torch.zeros((), device=dev)
                for k in range(s["micro"]):
                    loss = torch.nn.functional.mse_loss(model(xs[k]), ys[k]) / s["micro"]
                    loss.backward()
                    total_t += loss.detach()
                total = total_t.item()  # once per step
                if math.isnan(total):
                    raise RuntimeError("loss is NaN")
            opt.step()
            opt.zero_grad(set_to_none=True)
            return torch.tensor(total)

        return step

    def main(argv: list[str] | None = None) -> None:
        args = harness.parse(argv, ("defect", "fixed"), steps=30)
        dev = harness.device(args.tiny)
        harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "sync_item_train")

    return locals()


def sync_check_infer() -> dict:
    """sync-in-loop, inference in bf16: a 24-block residual MLP stack whose forward checks each block's output for
    overflow with `if x.abs().max().item() > LIMIT` and copies a per-block statistic to the host with .cpu(), two
    host syncs per block. Fixed: the maxima and statistics kept in GPU tensors (torch.stack), copied to the host once
    after the forward, the overflow check done on that copy."""
    CPU_SKIP = None
    SIZES = {"full": dict(tokens=4096, dim=2048, blocks=24), "tiny": dict(tokens=4, dim=8, blocks=3)}
    LIMIT = 1e4

    def build(variant: str, tiny: bool, dev: torch.device):
        s = SIZES["tiny" if tiny else "full"]
        torch.manual_seed(0)
        d = s["dim"]
        blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.LayerNorm(d), torch.nn.Linear(d, 2 * d), torch.nn.SiLU(),
                                torch.nn.Linear(2 * d, d)) for _ in range(s["blocks"])).to(dev, torch.bfloat16).eval()
        x0 = torch.randn(s["tokens"], d, device=dev, dtype=torch.bfloat16)

        @torch.inference_mode()
        def step() -> torch.Tensor:
            x = x0
            if variant == "defect":
                stats = []
                for blk in blocks:
                    x = x + blk(x)
                    if x.abs().max().item() > LIMIT:
                        raise RuntimeError("activation overflow")
                    stats.append(x.float().norm(dim=-1).mean().cpu())
                return torch.stack(stats)
            maxima, stats = [], []
            for blk in blocks:
                x = x + blk(x)
                maxima.append(x.abs().max())
                stats.append(x.float().norm(dim=-1).mean())
            host = torch.stack([torch.stack(maxima).float(), torch.stack(stats)]).cpu()  # the one sync
            if bool((host[0] > LIMIT).any()):
                raise RuntimeError("activation overflow")
            return host[1]

        return step

    def main(argv: list[str] | None = None) -> None:
        args = harness.parse(argv, ("defect", "fixed"), steps=30)
        dev = harness.device(args.tiny)
        harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "sync_check_infer")

    return locals()


def holdout_sync_nonzero() -> dict:
    """sync-in-loop, inference (holdout): a detection-style fp16 head scores 20k anchors x 80 classes for each of
    32 images, then post-processes each image in a Python loop with data-dependent shapes: boolean-mask indexing
    (scores[keep], boxes[keep]), torch.unique of the kept labels and a top-k of min(100, kept) scores; every one of
    these asks the host how many elements survived, so the GPU drains and idles at each. Fixed: the same numbers
    from fixed-shape tensors (torch.where, masked sums, a per-class any() and a top-100 of the masked scores), for
    the whole batch at once, with no host round trip until the step's end."""
    CPU_SKIP = None
    SIZES = {"full": dict(images=32, anchors=20000, dim=256, hidden=1024, classes=80, topk=100, thresh=0.575),
             "tiny": dict(images=3, anchors=40, dim=8, hidden=16, classes=5, topk=4, thresh=0.575)}

    def build(variant: str, tiny: bool, dev: torch.device):
        s = SIZES["tiny" if tiny else "full"]
        dtype = torch.float16 if dev.type == "cuda" else torch.float32
        torch.manual_seed(0)
        head = torch.nn.Sequential(torch.nn.Linear(s["dim"], s["hidden"]), torch.nn.ReLU(),
                                   torch.nn.Linear(s["hidden"], s["hidden"]), torch.nn.ReLU(),
                                   torch.nn.Linear(s["hidden"], s["classes"] + 4)).to(dev, dtype).eval()
        feats = [torch.randn(s["images"], s["anchors"], s["dim"], device=dev, dtype=dtype) for _ in range(2)]
        state = {"i": 0}
        k, n_cls, thr = s["topk"], s["classes"], s["thresh"]

        def postprocess_loop(logits: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
            rows = []
            for img in range(logits.shape[0]):
                scores, labels = logits[img].sigmoid().max(dim=-1)
                keep = scores > thr
                kept_scores = scores[keep]                      # data-dependent shape: a sync
                kept_boxes = boxes[img][keep]
                n_classes = torch.unique(labels[keep]).numel()  # another sync
                top = kept_scores.float().topk(min(k, kept_scores.numel())).values
                rows.append(torch.stack([kept_scores.float().sum(), kept_boxes.float().sum(),
                                         torch.tensor(float(kept_scores.numel()), device=logits.device),
                                         torch.tensor(float(n_classes), device=logits.device), top.sum()]))
            return torch.stack(rows)

        def postprocess_batched(logits: torch.Tensor, boxes: torch.Tensor) -> torch.Tensor:
            scores, labels = logits.sigmoid().max(dim=-1)       # (images, anchors)
            keep = scores > thr
            sf = scores.float()
            score_sum = torch.where(keep, sf, 0.0).sum(dim=1)
            box_sum = torch.where(keep[..., None], boxes.float(), 0.0).sum(dim=(1, 2))
            count = keep.sum(dim=1).float()
            hits = torch.zeros(keep.shape[0], n_cls, device=keep.device).scatter_add_(1, labels, keep.float())
            n_classes = (hits > 0).sum(dim=1).float()
            top = torch.where(keep, sf, float("-inf")).topk(min(k, sf.shape[1]), dim=1).values
            top_sum = torch.where(torch.isfinite(top), top, 0.0).sum(dim=1)
            return torch.stack([score_sum, box_sum, count, n_classes, top_sum], dim=1)

        post = postprocess_loop if variant == "defect" else postprocess_batched

        @torch.inference_mode()
        def step() -> torch.Tensor:
            x = feats[state["i"] % len(feats)]
            state["i"] += 1
            out = head(x)
            return post(out[..., 4:], out[..., :4])

        return step

    def main(argv: list[str] | None = None) -> None:
        args = harness.parse(argv, ("defect", "fixed"), steps=15)
        dev = harness.device(args.tiny)
        harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "holdout_sync_nonzero")

    return locals()


def holdout_sync_cpu_print() -> dict:
    """sync-in-loop, training (holdout): a small pre-norm transformer block stack trained under bf16 autocast with
    8 micro-batches a step; after each micro-batch the loop logs float(loss) and a small metrics tensor
    (token accuracy, logit norm) read with .cpu(), so the host blocks on the GPU and the next micro-batch is
    launched only after the GPU has drained. Fixed: losses and metrics stacked on the GPU and read with one .cpu()
    at the end of the step, the same numbers logged."""
    CPU_SKIP = None
    SIZES = {"full": dict(micro=8, batch=8, seq=256, dim=1024, heads=16, layers=2, vocab=8192),
             "tiny": dict(micro=3, batch=2, seq=6, dim=16, heads=2, layers=1, vocab=11)}

    class Block(torch.nn.Module):
        def __init__(self, dim: int, heads: int) -> None:
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
            self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
            self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(),
                                           torch.nn.Linear(4 * dim, dim))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            b, t, d = x.shape
            q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
            return x + self.mlp(self.ln2(x))

    def build(variant: str, tiny: bool, dev: torch.device):
        s = SIZES["tiny" if tiny else "full"]
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Embedding(s["vocab"], s["dim"]),
                                    *[Block(s["dim"], s["heads"]) for _ in range(s["layers"])],
                                    torch.nn.LayerNorm(s["dim"]), torch.nn.Linear(s["dim"], s["vocab"])).to(dev)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
        tokens = torch.randint(0, s["vocab"], (s["micro"], s["batch"], s["seq"] + 1), device=dev)
        log: list[list[float]] = []

        def micro_batch(k: int) -> tuple[torch.Tensor, torch.Tensor]:
            x, y = tokens[k, :, :-1], tokens[k, :, 1:]
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                logits = model(x)
            logits = logits.float()
            loss = F.cross_entropy(logits.reshape(-1, s["vocab"]), y.reshape(-1))
            (loss / s["micro"]).backward()
            with torch.no_grad():
                metrics = torch.stack([(logits.argmax(-1) == y).float().mean(), logits.norm() / logits.numel() ** 0.5])
            return loss.detach(), metrics

        def step() -> torch.Tensor:
            rows = []
            if variant == "defect":
                for k in range(s["micro"]):
                    loss, metrics = micro_batch(k)
                    acc, norm = metrics.cpu().tolist()  # logged every micro-batch: the host waits for the GPU
                    rows.append([float(loss), acc, norm])
            else:
                pending = []
                for k in range(s["micro"]):
                    loss, metrics = micro_batch(k)
                    pending.append(torch.cat([loss[None], metrics]))  # stays on the GPU
                rows = torch.stack(pending).cpu().tolist()  # one read a step
            log.append([sum(r[0] for r in rows) / len(rows)])
            opt.step()
            opt.zero_grad(set_to_none=True)
            return torch.tensor(rows, dtype=torch.float64)

        return step

    def main(argv: list[str] | None = None) -> None:
        args = harness.parse(argv, ("defect", "fixed"), steps=15)
        dev = harness.device(args.tiny)
        harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "holdout_sync_cpu_print")

    return locals()
