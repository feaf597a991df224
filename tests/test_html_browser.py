"""The HTML report in a real browser: headless Chromium loads it from a file URL, a screenshot is taken
and is not blank, the page's console shows no error, and a kernel and region named like a script element
show as text in the DOM with no script element injected. Skipped where no Chromium is installed
(.ci/run installs Debian's chromium)."""
from __future__ import annotations

import shutil
import subprocess

import pytest

from conftest import HANG_S
from html_fixtures import SCRIPT, hostile, many_launches, recorded
from kernelscope.analyze.report import build_report
from kernelscope.render.html import render_html

BROWSER = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome", "chrome")
                if shutil.which(b)), None)
pytestmark = [pytest.mark.browser, pytest.mark.slow,
              pytest.mark.skipif(BROWSER is None, reason="no Chromium installed (apt-get install chromium)")]
# --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start; the page is our own file
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--enable-logging=stderr", "--v=0",
         "--no-first-run", "--disable-extensions"]


def chromium(url: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([BROWSER, *FLAGS, *args, url], capture_output=True, text=True, timeout=HANG_S)


def console_errors(stderr: str) -> list[str]:
    """Chromium logs the page's console as INFO:CONSOLE lines; any of those, or an uncaught error, counts."""
    return [line for line in stderr.splitlines() if ":CONSOLE" in line or "Uncaught" in line]


def write(tmp_path, name: str, page: str):
    p = tmp_path / name
    p.write_text(page, encoding="utf-8")
    return p


def test_console_check_sees_a_script_error(tmp_path) -> None:
    """The check below is able to fail: a page with a broken script is caught."""
    p = write(tmp_path, "bad.html", "<!DOCTYPE html><html><body><p>x</p><script>no_such_fn();</script></body></html>")
    r = chromium(p.as_uri(), "--dump-dom")
    assert any("no_such_fn" in line for line in console_errors(r.stderr)), r.stderr[-2000:]


@pytest.mark.parametrize("session", ["session_h100_instrumented.json.gz", "session_h100_proton.json.gz",
                                     "session_h100_samples.json.gz", "session_h100_analysis.json.gz"])
def test_report_loads_renders_and_logs_nothing(tmp_path, session) -> None:
    from matplotlib.image import imread
    import numpy as np

    p = write(tmp_path, "r.html", render_html(build_report(recorded(session))))
    shot = tmp_path / "shot.png"
    r = chromium(p.as_uri(), f"--screenshot={shot}", "--window-size=1280,2000")
    assert shot.exists(), r.stderr[-2000:]
    assert not console_errors(r.stderr), console_errors(r.stderr)
    img = imread(str(shot))[..., :3]
    colours = np.unique((img.reshape(-1, 3) * 255).astype(np.uint8), axis=0)
    assert len(colours) > 50, len(colours)  # text, tables and charts: not a blank or single-colour page
    assert (img < 0.5).mean() > 0.01  # dark pixels (text) cover some of it


def test_script_names_are_text_in_the_browser(tmp_path) -> None:
    p = write(tmp_path, "h.html", render_html(build_report(hostile())))
    r = chromium(p.as_uri(), "--dump-dom")
    dom = r.stdout
    assert "<main>" in dom, r.stderr[-2000:]  # the page was loaded and serialised
    assert "<script" not in dom.lower()  # no element was injected
    assert dom.count("&lt;script&gt;alert(1)&lt;/script&gt;") >= 3  # the name is there, as text
    assert not console_errors(r.stderr), console_errors(r.stderr)


def test_dom_check_sees_an_injected_script(tmp_path) -> None:
    """The check above is able to fail: unescaped, a name like it becomes a script element in the DOM (one
    that does not open a dialog, which would stall the headless browser)."""
    name = SCRIPT.replace("alert(1)", "window.ran = 1")
    p = write(tmp_path, "raw.html", f"<!DOCTYPE html><html><body><main><p>{name}</p></main></body></html>")
    assert "<script" in chromium(p.as_uri(), "--dump-dom").stdout.lower()


def test_100k_launch_report_opens(tmp_path) -> None:
    p = write(tmp_path, "big.html", render_html(build_report(many_launches(100_000))))
    r = chromium(p.as_uri(), "--dump-dom")
    assert "100,000 launches" in r.stdout and not console_errors(r.stderr)
