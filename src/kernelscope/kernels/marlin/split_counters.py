"""Per-device split-k arrival counters, shared by the Triton kernel (:mod:`matmul`) and the Gluon kernel
(:mod:`gluon_kernel`): each launch leaves its counters at zero, so one buffer serves every launch on a stream."""
from __future__ import annotations

from typing import Any

import torch

_COUNTERS: dict[Any, torch.Tensor] = {}


def tile_counters(device: torch.device, tiles: int) -> torch.Tensor:
    """Zeroed int32 per-tile arrival counters for split-k, one buffer per device, grown on demand.

    The program that finishes a tile resets its counter, so the buffer is zeroed
    only when allocated. Launches on two streams of one device at once would
    share it: split-k calls must not overlap (one stream, as in a model's forward).
    """
    buf = _COUNTERS.get(device)
    if buf is None or buf.numel() < tiles:
        buf = torch.zeros(max(tiles, 1024), dtype=torch.int32, device=device)
        _COUNTERS[device] = buf
    return buf
