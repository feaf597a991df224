"""host-input-stall, inference (holdout): each step builds its batch in pure Python, lower-casing, splitting and
stripping 64 text documents, mapping every word through a dict vocabulary (unknown words hashed into buckets),
truncating and padding to 256 tokens, building the attention-mask lists, then torch.tensor() of the lists;
only then does a bf16 text encoder run, and the GPU idles while Python tokenises. Fixed: the same batches built
ahead by a background thread feeding a bounded queue, so tokenisation overlaps the encoder."""
from __future__ import annotations

import queue
import random
import threading

import torch
import torch.nn.functional as F

import harness

CPU_SKIP = None
SIZES = {"full": dict(batch=64, seq=256, docs=512, vocab=32000, dim=1536, heads=12, layers=8, ahead=4),
         "tiny": dict(batch=2, seq=8, docs=6, vocab=50, dim=16, heads=2, layers=1, ahead=2)}
PAD, UNK0 = 0, 1


def make_corpus(n: int, seed: int = 0) -> tuple[list[str], dict[str, int]]:
    rng = random.Random(seed)
    syll = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "ze", "shi", "por", "an", "el"]
    words = sorted({"".join(rng.choice(syll) for _ in range(rng.randint(1, 4))) for _ in range(3000)})
    vocab = {w: i + 2 + 1024 for i, w in enumerate(words[: len(words) * 3 // 4])}  # some words stay unknown
    docs = []
    for _ in range(n):
        ws = [rng.choice(words) for _ in range(rng.randint(150, 400))]
        docs.append(" ".join(w.capitalize() + rng.choice(["", "", ",", "."]) for w in ws))
    return docs, vocab


def tokenize(docs: list[str], vocab: dict[str, int], seq: int, vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    ids, masks = [], []
    for doc in docs:
        row = []
        for word in doc.lower().split():
            word = word.strip(".,")
            tid = vocab.get(word)
            if tid is None:
                tid = UNK0 + sum(ord(c) * 31 ** j for j, c in enumerate(word)) % 1024
            row.append(tid % vocab_size)
            if len(row) == seq:
                break
        mask = [1] * len(row) + [0] * (seq - len(row))
        ids.append(row + [PAD] * (seq - len(row)))
        masks.append(mask)
    return torch.tensor(ids, dtype=torch.long), torch.tensor(masks, dtype=torch.bool)


class Encoder(torch.nn.Module):
    def __init__(self, vocab: int, dim: int, heads: int, layers: int) -> None:
        super().__init__()
        self.heads = heads
        self.emb = torch.nn.Embedding(vocab, dim)
        self.qkv = torch.nn.ModuleList(torch.nn.Linear(dim, 3 * dim) for _ in range(layers))
        self.out = torch.nn.ModuleList(torch.nn.Linear(dim, dim) for _ in range(layers))
        self.ff = torch.nn.ModuleList(torch.nn.Sequential(torch.nn.LayerNorm(dim), torch.nn.Linear(dim, 4 * dim),
                                                          torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))
                                      for _ in range(layers))
        self.norm = torch.nn.LayerNorm(dim)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        x = self.emb(ids)
        b, t, d = x.shape
        attn_mask = mask[:, None, None, :]
        for qkv, out, ff in zip(self.qkv, self.out, self.ff):
            q, k, v = qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
            a = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_mask)
            x = x + out(a.transpose(1, 2).reshape(b, t, d))
            x = x + ff(x)
        pooled = (self.norm(x).float() * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)
        return pooled


def build(variant: str, tiny: bool, dev: torch.device):
    s = SIZES["tiny" if tiny else "full"]
    docs, vocab = make_corpus(s["docs"])
    n_batches = len(docs) // s["batch"]

    def make_batch(i: int) -> tuple[torch.Tensor, torch.Tensor]:
        j = i % n_batches
        return tokenize(docs[j * s["batch"]:(j + 1) * s["batch"]], vocab, s["seq"], s["vocab"])

    torch.manual_seed(0)
    dtype = torch.bfloat16 if dev.type == "cuda" else torch.float32
    model = Encoder(s["vocab"], s["dim"], s["heads"], s["layers"]).to(dev, dtype).eval()
    state = {"i": 0}
    ready: queue.Queue | None = None
    if variant == "fixed":
        ready = queue.Queue(maxsize=s["ahead"])

        def producer() -> None:
            i = 0
            while True:
                ids, mask = make_batch(i)
                if dev.type == "cuda":
                    ids, mask = ids.pin_memory(), mask.pin_memory()
                ready.put((ids, mask))
                i += 1

        threading.Thread(target=producer, daemon=True, name="tokenizer").start()

    @torch.inference_mode()
    def step() -> torch.Tensor:
        if ready is None:
            ids, mask = make_batch(state["i"])
        else:
            ids, mask = ready.get()
        state["i"] += 1
        return model(ids.to(dev, non_blocking=True), mask.to(dev, non_blocking=True))

    return step


def main(argv: list[str] | None = None) -> None:
    args = harness.parse(argv, ("defect", "fixed"), steps=15)
    dev = harness.device(args.tiny)
    harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "holdout_host_tokenize")


if __name__ == "__main__":
    main()
