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

# one worker for the file (and test_report.py, test_results_identity.py): the module's
# three_benchmarks report is built once, and `report` finds the figures test_report.py drew
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("report")]

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)
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
    return sorted(
        {
            ev["params"]["url"]
            for ev in log["events"]
            if ev.get("type") == start
            and "url" in ev.get("params", {})
            and ev["params"].get("initiator") != BROWSER_OWN
        }
    )


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
    return build_report(
        [tmp_path / "runs" / "modelA", tmp_path / "runs" / "modelB"], tmp_path / "out" / "report.html", pfram=[scores]
    )


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
    page.write_text(
        '<html><body><img src="http://example.invalid/x.png">'
        '<script src="https://cdn.example.invalid/a.js"></script>text</body></html>'
    )
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


@pytest.fixture(scope="module")
def three_benchmarks(tiny_clip, tmp_path_factory):
    """The report of two models' COOCO, SNUS and Layered-VQA sample results (scored by the
    tasks' own row functions: every table and figure a real run shows, per-model detail
    tables included)."""
    from results_kit import cooco_items, layered_items, snus_items, write_run

    from lmms_scene.report.html import build_report

    root = tmp_path_factory.mktemp("three")
    runs = []
    for k, name in enumerate(("Qwen2.5-VL-3B-Instruct", "llava-onevision-qwen2-7b-ov")):
        tasks = {
            "cooco_sample": ("cooco", cooco_items(str(tiny_clip), shift=k)),
            "snus_sample": ("snus", snus_items(shift=k)),
            "layered_vqa_sample": ("layered_vqa", layered_items(shift=k)),
        }
        if k == 0:  # COOCO's Figure 4 (one model's: the figures are per model)
            tasks["cooco_noise_sample"] = ("cooco", cooco_items(str(tiny_clip), noise=True))
        write_run(root / name, tasks, model_args=f"pretrained=/ckpt/{name},device=cpu")
        runs.append(root / name)
    return build_report(runs, root / "out" / "report.html")


def probe(info, tmp_path: Path, width: int, script: str) -> dict:
    """Render the report with ``script`` (which sets ``data-probe`` on the body) at ``width``."""
    import html as html_lib

    page = tmp_path / f"probe{width}.html"
    page.write_text(info.out.read_text().replace("</body>", script + "</body>"))
    rendered = chromium(
        page, tmp_path / f"chrome{width}", "--dump-dom", f"--window-size={width},1000", "--virtual-time-budget=3000"
    ).stdout
    found = re.search(r'data-probe="([^"]+)"', rendered)
    assert found, rendered[:500]
    return json.loads(html_lib.unescape(found.group(1)))


@needs_chromium
def test_every_headline_cell_is_in_view_at_1280_px(three_benchmarks, tmp_path):
    """Headline columns first and never scrolled out of view: at a 1280 px window every
    key cell (the label and the headline metrics of every table, SNUS's CESG and
    Layered-VQA's retained columns included) lies inside the viewport; numbers are
    right-aligned and no table text is under 10 px."""
    data = probe(three_benchmarks, tmp_path, 1280, VIEWPORT_PROBE)
    assert data["width"] == 1280
    headline = [c for c in data["cells"] if c["width"] > 0]
    texts = " ".join(c["text"] for c in headline)
    assert "CESG" in texts and "retained text" in texts and "retained layered" in texts
    outside = [c for c in headline if c["left"] < 0 or c["right"] > 1280]
    assert not outside, outside[:5]
    assert data["nums"] and set(data["nums"]) == {"right"}
    assert data["minFont"] >= 10


#: per table: its headline cells' edges with the table scrolled to the start, and every
#: column's and the kept-in-view (sticky) cells' edges scrolled to the end; the page's
#: own width; every figure's drawn and natural width; the smallest table text
NARROW_PROBE = """<script>
window.addEventListener('load', () => {
  const tables = [...document.querySelectorAll('.scroll')].map(box => {
    const b = box.getBoundingClientRect();
    const rows = [...box.querySelectorAll('tr')];
    const edges = sel => [...box.querySelectorAll(sel)].map(c => {
      const r = c.getBoundingClientRect();
      return [r.left - b.left, r.right - b.left, c.textContent.slice(0, 30)];
    });
    box.scrollLeft = 0;
    const start = edges('tr:first-child > .headline');
    box.scrollLeft = box.scrollWidth;
    const kept = edges('tr:first-child > .stick');
    const widths = [...rows[0].children].map(c => c.getBoundingClientRect().width);
    const end = edges('tr:first-child > :last-child');
    return {title: box.parentElement.querySelector('figcaption').textContent.slice(0, 60), box: b.width,
            scrolls: box.scrollWidth > box.clientWidth, start, kept, widths, end, keptN: kept.length};
  });
  const figures = [...document.querySelectorAll('img.plot')].map(i => {
    const r = i.getBoundingClientRect();
    return {alt: i.alt.slice(0, 60), width: i.clientWidth, natural: i.naturalWidth, right: r.right};  // clientWidth: no border
  });
  const sizes = [...document.querySelectorAll('td, th, td .ci')].map(c => parseFloat(getComputedStyle(c).fontSize));
  document.body.setAttribute('data-probe', JSON.stringify({tables, figures, width: window.innerWidth,
    page: document.documentElement.scrollWidth, minFont: Math.min(...sizes)}));
});
</script>"""


@needs_chromium
def test_at_800_px_every_table_scrolls_inside_itself_with_its_headline_in_view(three_benchmarks, tmp_path):
    """At an 800 px window: the page itself never scrolls sideways (a wide table scrolls
    inside its own box); scrolled to the start, every table shows its label and headline
    columns whole; scrolled to the end, its row label is still in view beside the last
    column, and every column fits in the room the kept columns leave (so each can be read
    whole at some scroll position); every figure is drawn at its own size (never scaled
    down, text and all) inside the window; no table text is under 10 px."""
    data = probe(three_benchmarks, tmp_path, 800, NARROW_PROBE)
    assert data["width"] == 800
    assert data["page"] <= 800, f"the page scrolls sideways: {data['page']} px"
    tables = data["tables"]
    assert len(tables) == three_benchmarks.n_tables
    assert any(t["scrolls"] for t in tables)  # the check below does see tables that scroll
    for t in tables:
        box = t["box"]
        assert box <= 800
        hidden = [(round(lo), round(hi), text) for lo, hi, text in t["start"] if lo < -0.5 or hi > box + 0.5]
        assert not hidden, (t["title"], box, hidden)
        assert t["keptN"] >= 1, t["title"]  # the row label at least stays
        kept_right = max(hi for _, hi, _ in t["kept"])
        assert all(-0.5 <= lo and hi <= box + 0.5 for lo, hi, _ in t["kept"]), (t["title"], t["kept"])
        lo, hi, _ = t["end"][0]
        assert lo >= kept_right - 0.5 and hi <= box + 0.5, (t["title"], t["end"], kept_right, box)
        free = box - kept_right
        too_wide = [w for w in t["widths"][t["keptN"] :] if w > free + 0.5]
        assert not too_wide, (t["title"], free, too_wide)
    assert len(data["figures"]) == three_benchmarks.n_plots
    for f in data["figures"]:
        assert abs(f["width"] - f["natural"]) <= 0.5 and f["right"] <= 800, f
    assert data["minFont"] >= 10


#: how each paper numbers what the report shows, in the paper's order: tables by number,
#: then figures by number (Layered-VQA's captions: Tables 1-8 and Figures 6-9, Figure 7
#: being aptitude against unreliability, the repeated-sampling table; COOCO: Figures 3
#: and 4; SNUS: Table 2)
PAPER_ORDER = {
    "cooco": ["Figure 3", "Figure 4"],
    "snus": ["Table 2"],
    "layered_vqa": [*(f"Table {i}" for i in range(1, 9)), *(f"Figure {i}" for i in range(6, 10))],
}


def paper_labels(view) -> list[tuple[int, str]]:
    """(rank in PAPER_ORDER, title) of each of a view's tables that names a paper table or figure."""
    out = []
    for t in view.tables:
        found = re.match(r"[\w-]+ (Table \d+|Figure \d+)\b", t.title)
        if found:
            assert found.group(1) in PAPER_ORDER[view.benchmark], t.title
            out.append((PAPER_ORDER[view.benchmark].index(found.group(1)), t.title))
    return out


def test_tables_come_in_the_papers_order(three_benchmarks):
    """Within each model's tables (Layered-VQA's per-model detail) and each metric's
    (COOCO's Figure 3 then its Figure 4 per model), the paper's tables and figures come in
    the paper's order; SNUS opens with Table 2."""
    views = {v.benchmark: v for v in three_benchmarks.views}
    assert set(views) == {"cooco", "snus", "layered_vqa"}
    vqa = paper_labels(views["layered_vqa"])
    for model in ("Qwen2.5-VL-3B-Instruct", "llava-onevision-qwen2-7b-ov"):
        mine = [rank for rank, title in vqa if f"({model})" in title or title.endswith(f"{model})")]
        assert len(mine) >= 9, vqa  # Tables 2-8 and Figures 6, 8, 9 per model
        assert mine == sorted(mine), [title for _, title in vqa if model in title]
    assert vqa[0][0] == 0  # Table 1 first, all models in it
    cooco = paper_labels(views["cooco"])
    metrics = [
        re.match(r"COOCO Figure 3: (.+?) at noise level 0", title).group(1) for rank, title in cooco if rank == 0
    ]
    # the median RefCLIPScore first, as the paper's Figure 3 draws it (it has no Figure 4: that one plots means)
    assert len(metrics) == 4 and metrics[0] == "median RefCLIPScore", cooco
    for m in metrics:
        ranks = [rank for rank, title in cooco if re.match(rf"COOCO Figure \d: {re.escape(m)} (at|by)", title)]
        figures = 1 if m == "median RefCLIPScore" else 2
        assert ranks[0] == 0 and ranks == sorted(ranks) and len(ranks) == figures, (m, cooco)  # Figure 3, then Figure 4
    assert views["snus"].tables[0].title.startswith("SNUS Table 2")


def test_a_repeated_sampling_run_shows_figure_7_between_figures_6_and_8():
    """The repeated-sampling table is the paper's Figure 7 and comes between Figures 6 and 8."""
    from lmms_scene.metrics.layered_vqa.tables import _detail_tables
    from lmms_scene.report.tables import View

    cell = {"accuracy": 0.5, "n": 4}
    rep = {
        "attempts": {"by_attempt": {"1": {"words": 5.0, "accuracy": 0.5, "n": 4}}, "baseline": cell},
        "reliability": {"full": {"aptitude": 0.9, "unreliability": 0.2, "average": 0.6, "repeats": 4}},
        "loss_concentration": {
            "concat-v": {
                "questions": 4,
                "total_loss": 1.0,
                "share_of_questions_for_half": 0.25,
                "share_of_questions_for_80": 0.5,
            }
        },
    }
    view = View("layered_vqa", "Layered-VQA")
    _detail_tables(view, rep, "m", "m", ["full"])
    assert [title.split(":")[0] for _, title in paper_labels(view)] == [
        "Layered-VQA Figure 6",
        "Layered-VQA Figure 7",
        "Layered-VQA Figure 8 (left)",
    ]
