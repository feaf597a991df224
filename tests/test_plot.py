"""`kernelscope plot` on a results file recorded on an H100: no GPU needed."""
from __future__ import annotations

import struct
import zlib

import pytest

from conftest import DATA, run_cli

pytest.importorskip("matplotlib")

RECORDED = DATA / "bench_attention_h100.json"


def _png_text(path) -> dict[str, str]:
    """The text chunks (tEXt, iTXt) of a PNG, checked chunk by chunk, CRC included."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    out, pos = {}, 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind, body = data[pos + 4:pos + 8], data[pos + 8:pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length:pos + 12 + length])
        assert zlib.crc32(kind + body) == crc
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            out[key.decode("latin-1")] = value.decode("latin-1")
        elif kind == b"iTXt":  # used for text that is not latin-1 (the title's dash)
            key, _, rest = body.partition(b"\0")
            compressed, rest = rest[0], rest[2:]
            _lang, _, rest = rest.partition(b"\0")
            _translated, _, text = rest.partition(b"\0")
            out[key.decode("latin-1")] = (zlib.decompress(text) if compressed else text).decode("utf-8")
        pos += 12 + length
    return out


_ks = run_cli


def test_plot_recorded_results_writes_titled_pngs(tmp_path):
    from kernelscope.bench.results import BenchResults

    device = BenchResults.load(RECORDED).environment["device"]["name"]["value"]
    assert "H100" in device
    r = _ks("plot", str(RECORDED), "--output-dir", str(tmp_path / "plots"))
    assert r.returncode == 0, r.stderr
    names = sorted(p.name for p in (tmp_path / "plots").glob("*.png"))
    assert names == ["attention_latency.png", "attention_memory.png", "attention_speedup.png", "attention_tflops.png"]
    for name in names:
        png = tmp_path / "plots" / name
        assert png.stat().st_size > 10_000  # a drawn figure, not an empty canvas
        title = _png_text(png)["Title"]
        assert device in title, title
    assert "speedup over sdpa-flash" in _png_text(tmp_path / "plots" / "attention_speedup.png")["Title"]
    assert r.stdout.split() == [str(tmp_path / "plots" / n) for n in
                                ("attention_latency.png", "attention_tflops.png", "attention_memory.png",
                                 "attention_speedup.png")]


def test_plot_with_another_baseline_and_failed_rows(tmp_path):
    from kernelscope.bench.results import BenchResults, BenchRow
    from kernelscope.render.plots import write_plots

    results = BenchResults.load(RECORDED)
    first = results.rows[0]
    results.rows.append(BenchRow("broken", dict(first.params), "oom", "OutOfMemoryError: CUDA out of memory"))
    paths = write_plots(results, tmp_path, baseline="flash")
    assert len(paths) == 4 and all(p.stat().st_size > 10_000 for p in paths)
    assert "speedup over flash" in _png_text(tmp_path / "attention_speedup.png")["Title"]


def test_plot_bad_input_is_one_sentence(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("[]")
    for args, phrase in ((["plot", str(bad)], "not a kernelscope benchmark results file"),
                         (["plot", str(tmp_path / "none.json")], "does not exist"),
                         (["plot", str(RECORDED), "--baseline", "cublas", "--output-dir", str(tmp_path)],
                          "--baseline cublas has no successful rows")):
        r = _ks(*args)
        assert r.returncode == 2 and "Traceback" not in r.stderr
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and phrase in lines[0] and lines[0].startswith("kernelscope: error: "), r.stderr
