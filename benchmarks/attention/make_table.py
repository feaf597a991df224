"""Markdown table of a recorded attention benchmark: flash vs SDPA flash and cuDNN, with the targets.

``PYTHONPATH=src python benchmarks/attention/make_table.py tests/data/bench_attention_h100.json``
Every number comes from the results file; ratios are flash TFLOP/s over the peer's, same run.
"""
from __future__ import annotations

import sys

from kernelscope.bench.results import BenchResults


def _target(hd: int, seq: int, vs_flash: float, vs_cudnn: float) -> str:
    """Which of the issue's targets apply at this point, and whether each is met."""
    marks = [f"> sdpa-flash {'met' if vs_flash > 1 else 'MISSED'}"]
    if hd == 128 and seq >= 2048:
        marks.append(f">= 1.3x sdpa-flash {'met' if vs_flash >= 1.3 else 'MISSED'}")
    if hd == 128 and seq >= 4096:
        marks.append(f">= 0.85x cuDNN {'met' if vs_cudnn >= 0.85 else 'MISSED'}")
    return "; ".join(marks)


def table(results: BenchResults) -> str:
    rows = {(r.impl, r.params["head_dim"], r.params["causal"], r.params["seq_len"]): r for r in results.rows}
    env = results.environment
    lines = [f"Device: {env['device']['name']['value']}; run {env.get('date_utc')} to {env.get('date_utc_end')}.", "",
             "| head dim | mask | S | flash TF/s | sdpa-flash | sdpa-cudnn | x sdpa-flash | x cuDNN "
             "| SM MHz after flash / cuDNN | flash config | targets |",
             "|---:|---|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for (impl, hd, causal, seq), r in sorted(rows.items(), key=lambda kv: kv[0][1:]):
        if impl != "flash" or r.status != "ok":
            continue
        sf, cu = rows.get(("sdpa-flash", hd, causal, seq)), rows.get(("sdpa-cudnn", hd, causal, seq))
        if not (sf and cu and sf.status == cu.status == "ok"):
            continue
        a, b, c = r.get("tflops"), sf.get("tflops"), cu.get("tflops")
        clk = (f"{r.get('sm_clock_mhz_after')} / {cu.get('sm_clock_mhz_after')}" if 'sm_clock_mhz_after' in r.values
               else "not recorded")
        cfg = (r.get("flash_config") or "N/A").replace("BLOCK_", "").replace(" ", ",")
        lines.append(f"| {hd} | {'causal' if causal else 'full'} | {seq} | {a:.0f} | {b:.0f} | {c:.0f} | "
                     f"{a / b:.2f} | {a / c:.2f} | {clk} | {cfg} | {_target(hd, seq, a / b, a / c)} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(table(BenchResults.load(sys.argv[1])))
