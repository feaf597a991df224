"""host-input-stall: the GPU waits while the host prepares each step's input.

Each function is one program: its docstring says what it plants, and it returns the names the program
defines (build, main, SIZES, CPU_SKIP and its helpers). ``python run.py NAME --variant V`` runs one.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
import queue
import random
import threading

import numpy as np
import torch
import torch.nn.functional as F

import harness


def host_augment_numpy() -> dict:
    """host-input-stall, training: each step the host crops, flips and normalises a batch of uint8 images with
    numpy (float32 conversion, per-image Python loop) before a small bf16 CNN trains on it; the GPU waits for the
    host every step. Fixed: the uint8 batch goes to the GPU as is (pinned, non_blocking) and the same crop, flip and
    normalisation run there as a few batched tensor ops."""
    CPU_SKIP = None
    SIZES = {"full": dict(batch=128, src=256, crop=224, pool=4), "tiny": dict(batch=2, src=12, crop=8, pool=2)}
    MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32).reshape(3, 1, 1) * 255
    STD = np.array([0.229, 0.224, 0.225], dtype=np.float32).reshape(3, 1, 1) * 255

    def augment_numpy(images: np.ndarray, offs: np.ndarray, flips: np.ndarray, crop: int) -> np.ndarray:
        out = np.empty((len(images), 3, crop, crop), dtype=np.float32)
        for i, img in enumerate(images):  # (H, W, 3) uint8
            y, x = offs[i]
            patch = img[y:y + crop, x:x + crop].astype(np.float32)
            if flips[i]:
                patch = patch[:, ::-1]
            out[i] = (patch.transpose(2, 0, 1) - MEAN) / STD
        return out

    def augment_torch(images: torch.Tensor, offs: np.ndarray, flips: np.ndarray, crop: int) -> torch.Tensor:
        n = images.shape[0]
        dev = images.device
        ar = torch.arange(crop, device=dev)
        ys = torch.as_tensor(offs[:, 0], device=dev)[:, None] + ar  # (n, crop)
        xs = torch.as_tensor(offs[:, 1], device=dev)[:, None] + ar
        flip = torch.as_tensor(flips, device=dev)[:, None]
        xs = torch.where(flip, xs.flip(1), xs)
        idx = torch.arange(n, device=dev)[:, None, None]
        patch = images[idx, ys[:, :, None], xs[:, None, :]].float()  # (n, crop, crop, 3)
        mean = torch.as_tensor(MEAN, device=dev)
        std = torch.as_tensor(STD, device=dev)
        return (patch.permute(0, 3, 1, 2) - mean) / std

    def build(variant: str, tiny: bool, dev: torch.device):
        s = SIZES["tiny" if tiny else "full"]
        rng = np.random.default_rng(0)
        pool = [rng.integers(0, 256, (s["batch"], s["src"], s["src"], 3), dtype=np.uint8) for _ in range(s["pool"])]
        host = [torch.from_numpy(p) for p in pool]
        if variant == "fixed" and dev.type == "cuda":
            host = [t.pin_memory() for t in host]
        torch.manual_seed(0)
        model = torch.nn.Sequential(
            torch.nn.Conv2d(3, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(32, 64, 3, stride=2, padding=1), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(64, 10)).to(dev)
        model = model.to(memory_format=torch.channels_last)
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        labels = torch.randint(0, 10, (s["batch"],), device=dev)
        state = {"i": 0}

        def step() -> torch.Tensor:
            i = state["i"]
            state["i"] += 1
            step_rng = np.random.default_rng(i)
            offs = step_rng.integers(0, s["src"] - s["crop"] + 1, (s["batch"], 2))
            flips = step_rng.random(s["batch"]) < 0.5
            if variant == "defect":
                x = torch.from_numpy(augment_numpy(pool[i % len(pool)], offs, flips, s["crop"])).to(dev)
            else:
                x = augment_torch(host[i % len(host)].to(dev, non_blocking=True), offs, flips, s["crop"])
            x = x.contiguous(memory_format=torch.channels_last)
            with torch.autocast(dev.type, dtype=torch.bfloat16):
                loss = torch.nn.functional.cross_entropy(model(x).float(), labels)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            return x

        return step

    def main(argv: list[str] | None = None) -> None:
        args = harness.parse(argv, ("defect", "fixed"), steps=20)
        dev = harness.device(args.tiny)
        harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "host_augment_numpy")

    return locals()


def host_features_thread() -> dict:
    """host-input-stall, inference: a speech-style encoder whose input features (framing, Hann window, rfft, power,
    mel projection, log) are computed with numpy on the host in the loop, before each bf16 forward; the GPU idles
    while the host computes. Fixed: the same numpy features prepared ahead by a pool of 8 background threads
    (numpy releases the GIL), a few batches in flight, so the GPU never waits for them."""
    CPU_SKIP = None
    SIZES = {"full": dict(batch=16, frames=200, frame_len=400, mels=80, dim=2048, layers=12, ahead=8, pool=4),
             "tiny": dict(batch=2, frames=4, frame_len=16, mels=4, dim=8, layers=2, ahead=2, pool=2)}

    def features(audio: np.ndarray, frame_len: int, mel: np.ndarray) -> np.ndarray:
        frames = audio.reshape(audio.shape[0], -1, frame_len) * np.hanning(frame_len).astype(np.float32)
        power = np.abs(np.fft.rfft(frames, axis=-1)) ** 2
        return np.log(power.astype(np.float32) @ mel + 1e-6)

    def build(variant: str, tiny: bool, dev: torch.device):
        s = SIZES["tiny" if tiny else "full"]
        rng = np.random.default_rng(0)
        mel = rng.random((s["frame_len"] // 2 + 1, s["mels"]), dtype=np.float32)

        audio = [rng.standard_normal((s["batch"], s["frames"] * s["frame_len"]), dtype=np.float32)
                 for _ in range(s["pool"])]  # the "dataset", raw audio in host memory

        def load(i: int) -> torch.Tensor:
            return torch.from_numpy(features(audio[i % len(audio)], s["frame_len"], mel))

        torch.manual_seed(0)
        d = s["dim"]
        blocks: list[torch.nn.Module] = [torch.nn.Linear(s["mels"], d)]
        for _ in range(s["layers"]):
            blocks += [torch.nn.Linear(d, 4 * d), torch.nn.GELU(), torch.nn.Linear(4 * d, d)]
        model = torch.nn.Sequential(*blocks).to(dev, torch.bfloat16).eval()
        pool = ThreadPoolExecutor(max_workers=s["ahead"]) if variant == "fixed" else None
        pending: dict[int, object] = {}
        state = {"i": 0}

        def next_features() -> torch.Tensor:
            i = state["i"]
            state["i"] += 1
            if pool is None:
                return load(i)
            for j in range(i, i + s["ahead"]):
                if j not in pending:
                    pending[j] = pool.submit(load, j)
            return pending.pop(i).result()

        @torch.inference_mode()
        def step() -> torch.Tensor:
            x = next_features().to(dev, torch.bfloat16)
            return model(x).float().mean(dim=1)

        return step

    def main(argv: list[str] | None = None) -> None:
        args = harness.parse(argv, ("defect", "fixed"), steps=20)
        dev = harness.device(args.tiny)
        harness.run_steps(build(args.variant, args.tiny, dev), args, dev, "host_features_thread")

    return locals()


def holdout_host_tokenize() -> dict:  # noqa: C901 (the program's helpers and build, nested)
    """host-input-stall, inference (holdout): each step builds its batch in pure Python, lower-casing, splitting and
    stripping 64 text documents, mapping every word through a dict vocabulary (unknown words hashed into buckets),
    truncating and padding to 256 tokens, building the attention-mask lists, then torch.tensor() of the lists;
    only then does a bf16 text encoder run, and the GPU idles while Python tokenises. Fixed: the same batches built
    ahead by a background thread feeding a bounded queue, so tokenisation overlaps the encoder."""
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

    def tokenize(docs: list[str], vocab: dict[str, int], seq: int,
                 vocab_size: int) -> tuple[torch.Tensor, torch.Tensor]:
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

    return locals()
