"""Per-device split-k arrival counters, shared by the Triton kernel (:mod:`matmul`) and the Gluon kernel
(:mod:`gluon_hopper`): each launch leaves its counters at zero, so one buffer serves every launch on a stream."""
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


_UNSET: dict[Any, list[torch.Tensor]] = {}


def unset_partials(device: torch.device, numel: int) -> torch.Tensor:
    """fp32 partial slots for the Gluon kernel's polled split-tile sum, every element the sentinel (all bits set, a
    NaN no sum produces): a slot's reader waits until its elements are written and sets them back, so the buffer is
    filled only when allocated. A grown buffer does not free the old one, which a captured CUDA graph may still
    use. The same rule as for the counters: split-k launches on one device must not overlap."""
    bufs = _UNSET.setdefault(device, [])
    if not bufs or bufs[-1].numel() < numel:
        bufs.append(torch.full((max(numel, 1 << 16), ), -1, dtype=torch.int32, device=device).view(torch.float32))
    return bufs[-1]
