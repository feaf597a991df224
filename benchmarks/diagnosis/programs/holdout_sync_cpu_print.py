"""sync-in-loop, training (holdout): a small pre-norm transformer block stack trained under bf16 autocast with
8 micro-batches a step; after each micro-batch the loop logs float(loss) and a small metrics tensor
(token accuracy, logit norm) read with .cpu(), so the host blocks on the GPU and the next micro-batch is
launched only after the GPU has drained. Fixed: losses and metrics stacked on the GPU and read with one .cpu()
at the end of the step, the same numbers logged."""
from __future__ import annotations

import torch
import torch.nn.functional as F

import harness

CPU_SKIP = None
SIZES = {"full": dict(micro=8, batch=8, seq=256, dim=1024, heads=16, layers=2, vocab=8192),
         "tiny": dict(micro=3, batch=2, seq=6, dim=16, heads=2, layers=1, vocab=11)}


class Block(torch.nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.qkv, self.proj = torch.nn.Linear(dim, 3 * dim), torch.nn.Linear(dim, dim)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))

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


if __name__ == "__main__":
    main()
