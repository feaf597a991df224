"""A CUDA runtime call that made the host wait for the GPU (trace pass).

The GPU idles after a synchronize until the host launches again, so a kernel that
follows one waits on the host however short the gap; the timeline alone cannot tell
that gap from launch overhead. Times are CPU times on the session's clock.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# kind of wait: "device" (cudaDeviceSynchronize), "stream", "event", or "memcpy" (a copy that blocks the host)
HOST_SYNC_KINDS = ("device", "stream", "event", "memcpy")


@dataclass
class HostSync:
    name: str  # the runtime/driver API call as the trace named it, e.g. "cudaDeviceSynchronize"
    kind: str  # one of HOST_SYNC_KINDS
    cpu_start_ns: int  # session clock
    cpu_duration_ns: int  # how long the host was blocked in the call

    @property
    def cpu_end_ns(self) -> int:
        return self.cpu_start_ns + self.cpu_duration_ns

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "HostSync":
        return cls(name=str(d["name"]), kind=str(d["kind"]), cpu_start_ns=int(d["cpu_start_ns"]),
                   cpu_duration_ns=int(d["cpu_duration_ns"]))
