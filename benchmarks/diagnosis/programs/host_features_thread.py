"""host-input-stall, inference: a speech-style encoder whose input features (framing, Hann window, rfft, power,
mel projection, log) are computed with numpy on the host in the loop, before each bf16 forward; the GPU idles
while the host computes. Fixed: the same numpy features prepared ahead by a pool of 8 background threads
(numpy releases the GIL), a few batches in flight, so the GPU never waits for them."""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

import harness

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


if __name__ == "__main__":
    main()
