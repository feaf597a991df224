"""`kernelscope plot` on a results file recorded on an H100: no GPU needed."""
from __future__ import annotations

import gzip
import math
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


@pytest.mark.slow
def test_plot_with_another_baseline_and_failed_rows(tmp_path):
    from kernelscope.bench.results import BenchResults, BenchRow
    from kernelscope.bench.plots import write_plots

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


# --- layout: what a reader sees (figures inspected before they are saved) ---

W4A16 = DATA / "bench_w4a16_h100.json"


@pytest.fixture(scope="module")
def drawn():
    """Every figure of both recorded results files, drawn once: (results, name, figure, title)."""
    import matplotlib.pyplot as plt

    from kernelscope.bench.results import BenchResults
    from kernelscope.bench.plots import figures

    out = []
    for path in (RECORDED, W4A16):
        results = BenchResults.load(path)
        for name, fig, title in figures(results):
            fig.canvas.draw()
            out.append((results, name, fig, title))
    yield out
    for *_, fig, _ in out:
        plt.close(fig)


def _log_axes(fig):
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        for which in ("x", "y"):
            if (ax.get_yscale() if which == "y" else ax.get_xscale()) == "log":
                yield ax, which


def test_tick_labels_on_log_axes_do_not_overlap(drawn):
    from kernelscope.render.plot_text import boxes_overlap, tick_label_boxes

    checked = 0
    for _, name, fig, _ in drawn:
        renderer = fig.canvas.get_renderer()
        for ax, which in _log_axes(fig):
            boxes = tick_label_boxes(ax, which, renderer)
            assert len(boxes) >= 3, f"{name}: {which} axis of {ax.get_title()!r} has {len(boxes)} tick labels"
            for i, a in enumerate(boxes):
                for b in boxes[i + 1:]:
                    assert not boxes_overlap(a, b), f"{name}: tick labels collide on {ax.get_title()!r} ({which})"
            checked += 1
    assert checked >= 2 * 4 + 2 * 5  # attention: latency and memory, log y; W4A16: time; all: log2 x


def test_the_tick_overlap_check_catches_labelled_minor_ticks():
    """The check above can fail: matplotlib's own labelled minor ticks on a narrow log axis collide."""
    import matplotlib.pyplot as plt
    from matplotlib import ticker

    from kernelscope.render.plot_text import boxes_overlap, tick_label_boxes

    fig, ax = plt.subplots(figsize=(4, 2))
    ax.plot([1, 2], [0.2, 9.0])
    ax.set_yscale("log")
    ax.yaxis.set_minor_formatter(ticker.LogFormatterSciNotation(labelOnlyBase=False, minor_thresholds=(9, 9)))
    fig.canvas.draw()
    boxes = tick_label_boxes(ax, "y", fig.canvas.get_renderer())
    assert any(boxes_overlap(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    plt.close(fig)


def test_log_time_axis_has_ticks_between_powers_of_ten(drawn):
    for results, name, fig, _ in drawn:
        if name not in ("time", "latency"):
            continue
        for ax in fig.axes:
            if ax.get_visible() and ax.get_yscale() == "log":
                lo, hi = ax.get_ylim()
                values = [t for t in ax.get_yticks() if lo <= t <= hi]
                assert any(abs(math.log10(v) - round(math.log10(v))) > 1e-9 for v in values), (name, values)


def test_legend_covers_no_data_point(drawn):
    for _, name, fig, _ in drawn:
        renderer = fig.canvas.get_renderer()
        legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
        assert legends, f"{name} has no legend"
        for legend in legends:
            box = legend.get_window_extent(renderer)
            assert fig.bbox.contains(box.x0, box.y0) and fig.bbox.contains(box.x1, box.y1), name
            for ax in fig.axes:
                assert not box.overlaps(ax.get_window_extent(renderer)), f"{name}: legend over a panel"
                for line in ax.lines:
                    for x, y in ax.transData.transform(line.get_xydata()):
                        assert not (box.x0 <= x <= box.x1 and box.y0 <= y <= box.y1), f"{name}: legend over {line}"


def test_each_implementation_has_one_colour_in_every_panel(drawn):
    for _, name, fig, _ in drawn:
        colours: dict[str, set] = {}
        for ax in fig.axes:
            for handle, label in zip(*ax.get_legend_handles_labels()):
                line = handle[0] if isinstance(handle, tuple) else handle  # an errorbar's data line comes first
                colours.setdefault(label, set()).add(line.get_color())
        assert colours and all(len(c) == 1 for c in colours.values()), (name, colours)


def test_attention_titles_name_batch_and_heads(drawn):
    for results, name, fig, _ in drawn:
        if results.benchmark != "attention":
            continue
        titles = [ax.get_title() for ax in fig.axes if ax.get_visible()]
        for heads, head_dim in {(r.params["heads"], r.params["head_dim"]) for r in results.rows}:
            assert any(f"{heads} heads, head dim {head_dim}" in t for t in titles), (heads, head_dim, titles)
        tokens = {r.params["batch"] * r.params["seq_len"] for r in results.rows}
        assert len(tokens) == 1  # the recorded sweep keeps batch × seq fixed, so the batch is under each tick
        assert all(f"batch × seq = {tokens.pop():,} tokens" in t for t in titles[:1])
        ax = next(ax for ax in fig.axes if ax.get_visible())
        ticks = [t.get_text() for t in ax.get_xticklabels()]
        batch_at = {r.params["seq_len"]: r.params["batch"] for r in results.rows}
        assert ticks == [f"{s}\nB={batch_at[s]}" for s in sorted(batch_at)]


@pytest.mark.slow
def test_w4a16_speedup_follows_the_baseline():
    import matplotlib.pyplot as plt

    from kernelscope.bench.results import BenchResults
    from kernelscope.bench.plots import figures

    results = BenchResults.load(W4A16)
    for baseline in ("cublas", "tinygemm"):
        name, fig, title = figures(results, baseline)[-1]
        assert name == "speedup" and f"over {baseline}" in title
        ax = fig.axes[0]
        k, n = (int(v.split("=")[1]) for v in ax.get_title().split()[:2])
        rows = [r for r in results.rows if r.params["k"] == k and r.params["n"] == n and r.status == "ok"]
        base = {r.params["m"]: r.get("median_ms") for r in rows if r.impl == baseline}
        for line in ax.lines:
            impl = line.get_label()
            if impl.startswith("_"):
                continue
            want = [base[r.params["m"]] / r.get("median_ms")
                    for r in sorted((r for r in rows if r.impl == impl), key=lambda r: r.params["m"])]
            assert list(line.get_ydata()) == pytest.approx(want)
            if baseline == "cublas":  # the same formula the benchmark stored
                stored = [r.get("speedup_vs_cublas") for r in sorted((r for r in rows if r.impl == impl),
                                                                       key=lambda r: r.params["m"])]
                assert list(line.get_ydata()) == pytest.approx(stored)
        plt.close("all")


@pytest.mark.slow
@pytest.mark.parametrize("path,default", [(RECORDED, "sdpa-flash"), (W4A16, "cublas")])
def test_cli_default_and_chosen_baseline(tmp_path, path, default):
    from kernelscope.bench.results import BenchResults

    impls = sorted({r.impl for r in BenchResults.load(path).rows} - {default})
    prefix = BenchResults.load(path).benchmark
    help_text = " ".join(_ks("plot", "--help").stdout.split()).replace("- ", "-")  # argparse wraps at hyphens
    assert f"{default} for {prefix}" in help_text
    for args, expect in (([], default), (["--baseline", impls[0]], impls[0])):
        out = tmp_path / (expect or "x")
        r = _ks("plot", str(path), "--output-dir", str(out), *args)
        assert r.returncode == 0, r.stderr
        assert f"speedup over {expect}" in _png_text(out / f"{prefix}_speedup.png")["Title"]


@pytest.mark.slow
def test_plot_reads_gzip_compressed_results(tmp_path):
    gz = tmp_path / "bench.json.gz"
    gz.write_bytes(gzip.compress(RECORDED.read_bytes()))
    r = _ks("plot", str(gz), "--output-dir", str(tmp_path / "p"))
    assert r.returncode == 0, r.stderr
    assert len(list((tmp_path / "p").glob("attention_*.png"))) == 4
    broken = tmp_path / "broken.json.gz"
    broken.write_bytes(gzip.compress(RECORDED.read_bytes())[:200])
    r = _ks("plot", str(broken), "--output-dir", str(tmp_path / "q"))
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and "is not a readable JSON file" in lines[0], r.stderr


def test_colours_stay_with_the_implementation_when_one_is_missing_from_a_panel():
    import matplotlib.pyplot as plt

    from kernelscope.bench.results import BenchResults
    from kernelscope.bench.plots import figures

    results = BenchResults.load(RECORDED)
    first = results.rows[0].impl
    results.rows = [r for r in results.rows if not (r.impl == first and r.params["head_dim"] == 64)]
    _, fig, _ = figures(results)[1]
    colours: dict[str, set] = {}
    for ax in fig.axes:
        for line in ax.lines:
            colours.setdefault(line.get_label(), set()).add(line.get_color())
    assert first in colours and all(len(c) == 1 for c in colours.values()), colours
    plt.close(fig)
