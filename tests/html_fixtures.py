"""Sessions for the HTML report tests: recorded ones, one grown to many launches, one with hostile names."""
from __future__ import annotations

import dataclasses

from conftest import ROOT
from kernelscope.model import Session

DATA = ROOT / "tests" / "data"
SCRIPT = "<script>alert(1)</script>"


def recorded(name: str = "session_h100_instrumented.json.gz") -> Session:
    return Session.load(DATA / name)


def many_launches(n: int = 100_000, name: str = "session_h100_samples.json.gz") -> Session:
    """The recorded session's traced launches repeated back to back, each copy shifted by the run's span,
    until there are ``n``: a long job's launch count with the recorded kernels, grids and durations."""
    s = recorded(name)
    traced = [x for x in s.launches if x.start_ns is not None]
    t0 = min(x.start_ns for x in traced)
    span = max(x.start_ns + x.duration_ns for x in traced) - t0 + 1_000
    out = []
    copy = 0
    while len(out) < n:
        out += [dataclasses.replace(x, start_ns=x.start_ns + copy * span, correlation_id=None) for x in traced]
        copy += 1
    return dataclasses.replace(s, launches=out[:n], samples=[])


def hostile(name: str = "session_h100_instrumented.json.gz") -> Session:
    """The most-time kernel and every region renamed to a script element; the command too."""
    s = recorded(name)
    top = max({x.kernel for x in s.launches}, key=lambda k: sum(x.duration_ns for x in s.launches if x.kernel == k))
    launches = [dataclasses.replace(x, kernel=SCRIPT, regions=[SCRIPT for _ in x.regions] or [SCRIPT])
                if x.kernel == top else x for x in s.launches]
    regions = [dataclasses.replace(r, name=SCRIPT) for r in s.regions]
    return dataclasses.replace(s, launches=launches, regions=regions, command=["python", SCRIPT])


def long_name(length: int = 150, tag: str = "") -> str:
    """A kernel name as cuBLAS and cuDNN write them: ``length`` characters, no space, no template."""
    parts = ["sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_cgasize1x2x1_warpgroupsize2x1x1",
             "_execute_segment_k_off_kernel__5x_cublas", "_cudnn_generated_fort_native_sdpa_flash_fprop_wgmma",
             "_f16_knob_3_128x128x128_4x1x1_kernel0_0"]
    name = tag + "".join(parts)
    while len(name) < length:
        name += "_" + name
    return name[:length]


def long_names(name: str = "session_h100_samples.json.gz", length: int = 150) -> Session:
    """The recorded session with its three most-time kernels renamed to ``length``-character names without a
    space (the first two alike up to their last characters, as cuBLAS's are), its regions and command too."""
    s = recorded(name)
    total: dict[str, int] = {}
    for x in s.launches:
        total[x.kernel] = total.get(x.kernel, 0) + (x.duration_ns or 0)
    top = sorted(total, key=total.get, reverse=True)[:3]
    base = long_name(length - 2)
    new = {k: f"{base}_{i}" for i, k in enumerate(top)}
    region = long_name(length, tag="nvtx_region_")
    launches = [dataclasses.replace(x, kernel=new.get(x.kernel, x.kernel),
                                    regions=[region for _ in x.regions]) for x in s.launches]
    regions = [dataclasses.replace(r, name=region) for r in s.regions]
    return dataclasses.replace(s, launches=launches, regions=regions, command=["python", long_name(length, "/x/")])
