"""Check the HTML report's layout in a real browser: headless Chromium lays the pages out and a script,
run in the page, measures what a reader would see. Used by tests/test_html_layout.py.

Each page is put in an iframe (srcdoc, so the checking page may read its DOM) of one checking page; the
checking page measures every frame once all have loaded and writes what it found, as JSON, into its own
DOM, which ``chromium --dump-dom`` prints. The report itself stays script-free: only the checking page
runs a script, never the report.

What counts as a problem (each one a line naming the element and its text):
- overflow: an element or a piece of text reaching past the right or left edge of its card (a .panel
  section, the notebook fragment's .ks-report box, the page itself), or a card that scrolls sideways;
- text past its own table cell (drawn over the next cell);
- broken word: a word laid out on two lines, broken between two letters or digits, unless it is a long
  identifier (an element styled overflow-wrap:anywhere or word-break:break-all) in a cell at least
  MIN_ID_EM em wide or as wide as the word: a cell narrower than its longest word;
- SVG text outside its SVG's box (clipped), or outside the card.
"""
from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

from conftest import HANG_S

BROWSER = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome", "chrome")
                if shutil.which(b)), None)
# --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start; the pages are our own files
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
         "--disable-extensions", "--enable-logging=stderr", "--v=0"]
MIN_ID_EM = 10  # a cell holding a long identifier broken anywhere is at least this wide (or as wide as the name)

CHECK_JS = (Path(__file__).parent / "html_layout_check.js").read_text(encoding="utf-8")

HEIGHT_JS = "function ksCheck(doc, win) { return [doc.documentElement.scrollHeight]; }"

CHECK_PAGE = """<!DOCTYPE html><html><head><meta charset="utf-8">
<style>body{margin:0}iframe{display:block;border:0}</style></head><body>%(frames)s<script>%(js)s
window.addEventListener('load', () => {
  const result = {};
  for (const f of document.querySelectorAll('iframe')) {
    try { result[f.dataset.name] = ksCheck(f.contentDocument, f.contentWindow, %(min_id_em)d); }
    catch (e) { result[f.dataset.name] = ['check failed: ' + e]; }
  }
  const pre = document.createElement('pre');
  pre.id = 'ks-check';
  pre.textContent = JSON.stringify(result);
  document.body.appendChild(pre);
});
</script></body></html>"""


def check_pages(pages: dict[str, str], tmp: Path, width: int = 1280, height: int = 900,
                js: str = CHECK_JS) -> dict[str, list[str]]:
    """Lay out each page (name -> HTML document or fragment) in a ``width`` px wide frame and return the
    problems found in each (an empty list: none)."""
    frames = "".join(f'<iframe data-name="{html.escape(name)}" width="{width}" height="{height}" '
                     f'srcdoc="{html.escape(page, quote=True)}"></iframe>' for name, page in pages.items())
    path = tmp / f"check_{width}.html"
    path.write_text(CHECK_PAGE % {"frames": frames, "js": js, "min_id_em": MIN_ID_EM}, encoding="utf-8")
    r = subprocess.run([BROWSER, *FLAGS, "--virtual-time-budget=60000", f"--window-size={width + 40},{height}",
                        "--dump-dom", path.as_uri()], capture_output=True, text=True, timeout=HANG_S)
    m = re.search(r'<pre id="ks-check">(.*?)</pre>', r.stdout, re.S)
    if m is None:
        raise RuntimeError(f"the check page did not report (Chromium exit {r.returncode}): {r.stderr[-2000:]}")
    found = json.loads(html.unescape(m.group(1)))
    missing = set(pages) - set(found)
    if missing:
        raise RuntimeError(f"no result for {sorted(missing)}")
    return found


def page_heights(pages: dict[str, str], tmp: Path, width: int) -> dict[str, int]:
    """How tall each page is, laid out ``width`` px wide."""
    return {k: v[0] for k, v in check_pages(pages, tmp, width=width, js=HEIGHT_JS).items()}


def screenshot(page: str, path: Path, width: int = 1280, height: int = 2400) -> subprocess.CompletedProcess:
    """The page as a PNG, as a reader's browser window of ``width`` px shows it."""
    src = path.with_suffix(".html")
    src.write_text(page, encoding="utf-8")
    return subprocess.run([BROWSER, *FLAGS, f"--screenshot={path}", f"--window-size={width},{height}", src.as_uri()],
                          capture_output=True, text=True, timeout=HANG_S)
