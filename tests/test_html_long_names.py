"""Names in the HTML page are shortened as on the terminal (render/text.shortened): a kernel name of millions of
characters is never written whole, once per place that shows it."""
from __future__ import annotations

import gzip
import json

from conftest import DATA
from kernelscope.cli import main
from kernelscope.render.text import DISPLAY_CHARS


def test_a_five_million_character_kernel_name_is_shortened_in_the_page(tmp_path):
    """It made a 65 MB page holding about 13 whole copies (a cell, its tooltip, the timeline tables); now the page
    is about 0.2 MB and each place shows the name's ends around the count of what was left out."""
    d = json.loads(gzip.open(DATA / "session_h100_mixed.json.gz").read())
    name = "k" * 2_000_000 + "middle" * 166_667 + "k" * 2_000_000
    for x in d["launches"]:  # schema 1: launches as objects
        if x["kernel"] == d["launches"][0]["kernel"]:
            x["kernel"] = name
    src = tmp_path / "long.json"
    src.write_text(json.dumps(d))
    out = tmp_path / "r.html"
    assert main(["report", str(src), "-o", str(out), "--panels", "9"]) == 0
    page = out.read_text()
    assert "k" * (DISPLAY_CHARS + 1) not in page and "middle" * 100 not in page
    assert f"{len(name) - (DISPLAY_CHARS - 60) // 2 * 2:,} more characters, blake2b" in page
    assert len(page) < 2_000_000
