"""The CUDA calls of a Kineto trace that made the host wait for the GPU.

Kept as a short list beside the launches so the host-gaps rule can tell a GPU gap the
host caused by synchronizing from launch overhead (analyze/host_syncs.py). Kineto
records CUDA runtime and driver calls with cat "cuda_runtime" / "cuda_driver"; copies
are matched to their GPU side by correlation id to see where they copy to.
"""
from __future__ import annotations

from typing import Any

from kernelscope.model import HostSync

# call name -> kind of wait (runtime and driver API)
SYNC_CALLS: dict[str, str] = {
    "cudaDeviceSynchronize": "device", "cuCtxSynchronize": "device",
    "cudaStreamSynchronize": "stream", "cuStreamSynchronize": "stream",
    "cudaEventSynchronize": "event", "cuEventSynchronize": "event",
}
# copies that return only when the data is on the host: the synchronous calls (any device-to-host copy)
# and, for the Async calls, a device-to-host copy into pageable memory (staged, so the call waits)
SYNC_COPY_CALLS = frozenset({"cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemcpyFromSymbol",
                             "cuMemcpyDtoH_v2", "cuMemcpyDtoH", "cuMemcpy"})
ASYNC_COPY_CALLS = frozenset({"cudaMemcpyAsync", "cudaMemcpy2DAsync", "cudaMemcpy3DAsync",
                              "cudaMemcpyFromSymbolAsync", "cuMemcpyDtoHAsync_v2", "cuMemcpyAsync"})
_CALL_CATEGORIES = ("cuda_runtime", "cuda_driver")


def _ns(us: Any) -> int:
    return int(round(float(us) * 1000.0))


def _blocks_host(name: str, copy_name: str | None) -> bool:
    if copy_name is None or "DtoH" not in copy_name:
        return False
    return name in SYNC_COPY_CALLS or (name in ASYNC_COPY_CALLS and "Pageable" in copy_name)


def host_syncs(events: list[dict[str, Any]], origin_ns: int) -> tuple[list[HostSync], int]:
    """The host-blocking calls among ``events`` (Kineto "X" events), in time order, and how many
    such events were left out as malformed."""
    copies: dict[int, str] = {}  # correlation -> GPU copy name, e.g. "Memcpy DtoH (Device -> Pageable)"
    for e in events:
        if e.get("cat") == "gpu_memcpy":
            corr = (e.get("args") or {}).get("correlation")
            if isinstance(corr, int):
                copies[corr] = str(e.get("name"))
    out: list[HostSync] = []
    bad = 0
    for e in events:
        name = e.get("name")
        if e.get("cat") not in _CALL_CATEGORIES or not isinstance(name, str):
            continue
        kind = SYNC_CALLS.get(name)
        if kind is None and name in SYNC_COPY_CALLS | ASYNC_COPY_CALLS:
            corr = (e.get("args") or {}).get("correlation")
            kind = "memcpy" if _blocks_host(name, copies.get(corr) if isinstance(corr, int) else None) else None
        if kind is None:
            continue
        try:
            out.append(HostSync(name, kind, _ns(e["ts"]) - origin_ns, max(0, _ns(e.get("dur", 0)))))
        except (KeyError, TypeError, ValueError, OverflowError):
            bad += 1
    out.sort(key=lambda h: h.cpu_start_ns)
    return out, bad
