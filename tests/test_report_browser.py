"""The report in a real browser: headless Chromium renders it, the screenshot is a drawn
PNG of the requested size, the plots and tables are in the rendered DOM, and the page
asks the network for nothing.

Needs Debian's ``chromium`` (``apt-get install -y chromium``); skipped with that reason
when ``/usr/bin/chromium`` is absent.

Requests are read from Chromium's net log (``--log-net-log``): every URL request the
page starts carries the page's origin as its initiator, while Chromium's own background
calls (update and account checks, which the flags below reduce but do not silence) carry
none ("not an origin"). A control page with an external image and script shows that the
check does see a page's requests.

The screenshot in docs/reports.md is made by this file's code path:
``python tests/test_report_browser.py --docs-screenshot RESULTS... --out docs/img/report.png``.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from PIL import Image

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic",
         "--no-first-run", "--disable-component-update", "--disable-sync", "--hide-scrollbars")  # fmt: skip
#: the initiator Chromium's net log gives requests no page started
BROWSER_OWN = "not an origin"

needs_chromium = pytest.mark.skipif(
    not CHROMIUM.is_file(), reason=f"{CHROMIUM} is absent: install Debian's chromium (apt-get install -y chromium)"
)


def chromium(page: Path, workdir: Path, *args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    workdir.mkdir(parents=True, exist_ok=True)
    cmd = [str(CHROMIUM), *FLAGS, f"--user-data-dir={workdir / 'profile'}", *args, page.resolve().as_uri()]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc


def screenshot(page: Path, png: Path, size: tuple[int, int], workdir: Path) -> list[str]:
    """Render ``page`` at ``size`` into ``png``; the URLs of every request the page made."""
    netlog = workdir / "netlog.json"
    chromium(page, workdir, f"--screenshot={png}", f"--window-size={size[0]},{size[1]}", f"--log-net-log={netlog}")
    return page_requests(netlog)


def page_requests(netlog: Path) -> list[str]:
    """The URLs of the requests a page started (not Chromium's own), from a net log."""
    log = json.loads(netlog.read_text())
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return sorted({
        ev["params"]["url"] for ev in log["events"]
        if ev.get("type") == start and "url" in ev.get("params", {}) and ev["params"].get("initiator") != BROWSER_OWN
    })  # fmt: skip


def dom(page: Path, workdir: Path) -> str:
    return chromium(page, workdir, "--dump-dom", "--virtual-time-budget=2000").stdout


def is_drawn(png: Path) -> bool:
    im = Image.open(png).convert("RGB")
    colors = im.getcolors(1 << 24) or []
    # a blank page has one colour; a page with plots and text has hundreds
    return len(colors) > 50 and max(c for c, _ in colors) < 0.98 * im.width * im.height


@pytest.fixture
def report(tmp_path):
    from test_report import model_run, pfram_scores

    from lmms_scene.report.html import build_report

    model_run(tmp_path / "runs" / "modelA", "modelA", 0.0)
    model_run(tmp_path / "runs" / "modelB", "modelB", 0.1)
    scores = pfram_scores(tmp_path / "pfram.json", "/ckpt/modelA")
    return build_report([tmp_path / "runs" / "modelA", tmp_path / "runs" / "modelB"], tmp_path / "out" / "report.html",
                        pfram=[scores])  # fmt: skip


@needs_chromium
def test_chromium_renders_the_report_with_its_plots_and_tables_and_no_network(report, tmp_path):
    png = tmp_path / "shot.png"
    requests = screenshot(report.out, png, (1200, 1600), tmp_path / "chrome")
    im = Image.open(png)
    assert im.format == "PNG" and im.size == (1200, 1600)
    assert is_drawn(png)
    # the only thing loaded is the file itself (file:// loads are not network requests and
    # do not show in the net log at all; anything else the page asked for would)
    assert [u for u in requests if u != report.out.resolve().as_uri()] == []
    rendered = dom(report.out, tmp_path / "chrome-dom")
    assert len(re.findall(r'<img class="plot"[^>]+src="data:image/png;base64,', rendered)) == report.n_plots
    assert len(re.findall(r"<table>", rendered)) == report.n_tables
    assert "COOCO Figure 3: RefCLIPScore at noise level 0" in rendered and "Pfram per layer" in rendered
    assert not re.search(r'(src|href)="(?:https?:)?//', rendered)


@needs_chromium
def test_the_request_check_sees_a_page_that_loads_from_the_network(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text('<html><body><img src="http://example.invalid/x.png">'
                    '<script src="https://cdn.example.invalid/a.js"></script>text</body></html>')  # fmt: skip
    requests = screenshot(page, tmp_path / "bad.png", (400, 300), tmp_path / "chrome")
    assert requests == ["http://example.invalid/x.png", "https://cdn.example.invalid/a.js"]


def docs_screenshot(results: list[Path], png: Path, workdir: Path, size: tuple[int, int] = (1100, 1500)) -> Path:
    """The report of ``results`` rendered by Chromium, saved small (palette PNG) for the docs."""
    from lmms_scene.report.html import build_report

    info = build_report(results, workdir / "report.html")
    shot = workdir / "full.png"
    requests = screenshot(info.out, shot, size, workdir / "chrome")
    if requests:
        raise RuntimeError(f"the report requested {requests}")
    im = Image.open(shot).convert("RGB")
    im = im.resize((im.width * 3 // 4, im.height * 3 // 4), Image.LANCZOS).quantize(colors=256)
    png.parent.mkdir(parents=True, exist_ok=True)
    im.save(png, optimize=True)
    return png


if __name__ == "__main__":  # pragma: no cover - the docs screenshot
    import argparse
    import tempfile

    ap = argparse.ArgumentParser(description="render the report of RESULTS for docs/img")
    ap.add_argument("--docs-screenshot", nargs="+", type=Path, required=True, metavar="RESULTS")
    ap.add_argument("--out", type=Path, default=Path("docs/img/report.png"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        path = docs_screenshot(a.docs_screenshot, a.out, Path(d))
    print(f"{path}: {path.stat().st_size} bytes", file=sys.stderr)


VIEWPORT_PROBE = """<script>
window.addEventListener('load', () => {
  const cells = [...document.querySelectorAll('.headline')].map(c => {
    const r = c.getBoundingClientRect();
    return {left: r.left, right: r.right, width: r.width, text: c.textContent.slice(0, 40)};
  });
  const nums = [...document.querySelectorAll('td.num')].map(c => getComputedStyle(c).textAlign);
  const sizes = [...document.querySelectorAll('td, th')].map(c => parseFloat(getComputedStyle(c).fontSize));
  document.body.setAttribute('data-probe', JSON.stringify({cells, nums, minFont: Math.min(...sizes), width: window.innerWidth}));
});
</script>"""


@needs_chromium
def test_every_headline_cell_is_in_view_at_1280_px(tiny_clip, tmp_path):
    """Headline columns first and never scrolled out of view: at a 1280 px window every
    key cell (the label and the headline metrics of every table, SNUS's CESG and
    Layered-VQA's retained columns included) lies inside the viewport; numbers are
    right-aligned and no table text is under 10 px."""
    import html as html_lib

    from results_kit import cooco_items, layered_items, snus_items, write_run

    from lmms_scene.report.html import build_report

    run = tmp_path / "run"
    write_run(run, {"cooco_sample": ("cooco", cooco_items(str(tiny_clip))), "snus_sample": ("snus", snus_items()),
                    "layered_vqa_sample": ("layered_vqa", layered_items())})  # fmt: skip
    info = build_report([run], tmp_path / "out" / "report.html")
    probe = tmp_path / "probe.html"
    probe.write_text(info.out.read_text().replace("</body>", VIEWPORT_PROBE + "</body>"))
    rendered = chromium(probe, tmp_path / "chrome", "--dump-dom", "--window-size=1280,1000", "--virtual-time-budget=3000").stdout
    found = re.search(r'data-probe="([^"]+)"', rendered)
    assert found, rendered[:500]
    data = json.loads(html_lib.unescape(found.group(1)))
    assert data["width"] == 1280
    headline = [c for c in data["cells"] if c["width"] > 0]
    texts = " ".join(c["text"] for c in headline)
    assert "CESG" in texts and "retained text" in texts and "retained layered" in texts
    outside = [c for c in headline if c["left"] < 0 or c["right"] > 1280]
    assert not outside, outside[:5]
    assert data["nums"] and set(data["nums"]) == {"right"}
    assert data["minFont"] >= 10
