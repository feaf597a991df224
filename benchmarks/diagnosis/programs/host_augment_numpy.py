"""host-input-stall, training: each step the host crops, flips and normalises a batch of uint8 images with
numpy (float32 conversion, per-image Python loop) before a small bf16 CNN trains on it; the GPU waits for the
host every step. Fixed: the uint8 batch goes to the GPU as is (pinned, non_blocking) and the same crop, flip and
normalisation run there as a few batched tensor ops."""
from __future__ import annotations

import numpy as np
import torch

import harness

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


if __name__ == "__main__":
    main()
