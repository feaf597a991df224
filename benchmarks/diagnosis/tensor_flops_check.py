"""Tensor-core FLOPs from counters against a cuBLAS GEMM's 2*m*n*k (issue 14; needs a GPU, ncu).

    PYTHONPATH=src python benchmarks/diagnosis/tensor_flops_check.py --out OUT [--shape 8192,8192,8192] [--dtype fp16]

Records one torch.matmul under `kernelscope run --counters --region gemm_check` (the GEMM is the region's
only kernel), then compares kernelscope's counter FLOPs (analyze/roofline.counter_flops: the
sm__ops_path_tensor_src_* counters) with 2*m*n*k. A tensor core computes whole tiles, so a GEMM whose
tiles do not divide the problem counts the padding too: when the kernel's name gives its tile (cuBLAS
nvjet/cutlass names carry "<tile_m>x<tile_n>_<tile_k>..."), the padded 2*M'*N'*K' is reported beside it.
Writes OUT/tensor_flops_<dtype>_<m>x<n>x<k>.json (and the session beside it); prints one line.

    --workload M N K DTYPE   (internal) the workload the recorded run executes
"""
from __future__ import annotations

import argparse
import json
import math
import re
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
for p in (ROOT, ROOT / "src"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

REGION = "gemm_check"
DTYPES = {"fp16": "float16", "bf16": "bfloat16"}
TILE = re.compile(r"_(\d+)x(\d+)_(\d+)x\d+")  # nvjet_hsh_256x128_64x4_..., cutlass ..._128x256_64x3_...


def workload(m: int, n: int, k: int, dtype: str) -> None:
    import torch

    import kernelscope

    dt = getattr(torch, DTYPES[dtype])
    a, b = torch.randn(m, k, device="cuda", dtype=dt), torch.randn(k, n, device="cuda", dtype=dt)
    torch.matmul(a, b)  # warm-up: cuBLAS picks its kernel
    torch.cuda.synchronize()
    with kernelscope.region(REGION):
        torch.matmul(a, b)
    torch.cuda.synchronize()


def padded_flops(name: str, m: int, n: int, k: int) -> dict[str, float] | None:
    """2*M'*N'*K with M', N' rounded up to the tile the kernel's name gives (either orientation: cuBLAS
    may compute C^T); None when the name gives no tile."""
    t = TILE.search(name)
    if t is None:
        return None
    tm, tn = int(t.group(1)), int(t.group(2))
    pad = lambda x, tile: math.ceil(x / tile) * tile  # noqa: E731
    return {f"{tm}x{tn}": 2.0 * pad(m, tm) * pad(n, tn) * k, f"{tm}x{tn} (on C^T)": 2.0 * pad(n, tm) * pad(m, tn) * k}


def check(session_path: Path, m: int, n: int, k: int) -> dict:
    from kernelscope.analyze.counters import counter_launches
    from kernelscope.analyze.roofline import counter_flops
    from kernelscope.model import Session

    s = Session.load(session_path)
    names = sorted({x.kernel for x in s.launches if REGION in x.regions})
    out: dict = {"m": m, "n": n, "k": k, "flops_2mnk": 2.0 * m * n * k, "kernels": names}
    rows = []
    for name in names:
        launches = counter_launches(s, name)
        if not launches:
            rows.append({"kernel": name, "error": "no counter-pass launch"})
            continue
        f = counter_flops(launches[0])
        row = {"kernel": name, "counter_flops": f.value, "raw": f.raw_name, "formula": f.formula,
               "missing_reason": f.missing_reason}
        if f.value is not None:
            row["vs_2mnk_pct"] = 100.0 * (float(f.value) / out["flops_2mnk"] - 1.0)
            pads = padded_flops(name, m, n, k) or {}
            row["padded"] = {t: {"flops": v, "counter_vs_padded_pct": 100.0 * (float(f.value) / v - 1.0)}
                             for t, v in pads.items()}
        rows.append(row)
    out["rows"] = rows
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", nargs=4, metavar=("M", "N", "K", "DTYPE"))
    ap.add_argument("--out", type=Path)
    ap.add_argument("--shape", default="8192,8192,8192")
    ap.add_argument("--dtype", default="fp16", choices=sorted(DTYPES))
    args = ap.parse_args(argv)
    if args.workload:
        m, n, k, dt = args.workload
        workload(int(m), int(n), int(k), dt)
        return 0
    if args.out is None:
        ap.error("--out is required")
    m, n, k = (int(v) for v in args.shape.split(","))
    args.out.mkdir(parents=True, exist_ok=True)
    tag = f"{args.dtype}_{m}x{n}x{k}"
    sess = args.out / f"tensor_flops_{tag}.json.gz"
    cmd = [sys.executable, "-m", "kernelscope", "run", "--counters", "--region", REGION, "-f", "-q", "-o", str(sess),
           "--", sys.executable, str(Path(__file__).resolve()), "--workload", str(m), str(n), str(k), args.dtype]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=str(ROOT))
    if r.returncode != 0 or not sess.exists():
        print(f"tensor_flops_check: the recorded run failed (rc {r.returncode}): {(r.stderr or r.stdout)[-800:]}")
        return 1
    res = check(sess, m, n, k)
    (args.out / f"tensor_flops_{tag}.json").write_text(json.dumps(res, indent=1))
    for row in res["rows"]:
        pads = ", ".join(f"{t}: {p['counter_vs_padded_pct']:+.2f}%" for t, p in (row.get("padded") or {}).items())
        print(f"{tag} {row['kernel'][:70]}: counter {row.get('counter_flops')} vs 2mnk {res['flops_2mnk']:.4g} "
              f"({row.get('vs_2mnk_pct', float('nan')):+.2f}%); padded {pads or 'no tile in the name'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
