"""One number, one place: ``show``, the results JSON and the HTML report agree on every
number and interval, for all three benchmarks; results on two datasets are never pooled
(two labelled rows, and the mixture stated first).

The runs are real results files (tests/results_kit.py: the samples' docs scored by the
tasks' own functions)."""

from __future__ import annotations

import html as html_lib
import json
import re
from collections import Counter

import pytest
from results_kit import cooco_items, layered_items, snus_items, write_run

from lmms_scene.report.html import build_report
from lmms_scene.report.text import show_text
from lmms_scene.results import with_interval

# with test_report_browser.py, which scores the same sample items (results_kit memoises them)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("report")]

NUMBER = re.compile(r"-?\d+\.\d+ \[-?\d+\.\d+, -?\d+\.\d+\](?: \(n=\d+\))?")


@pytest.fixture(scope="module")
def run(tiny_clip, tmp_path_factory):
    folder = tmp_path_factory.mktemp("identity") / "run"
    write_run(
        folder,
        {
            "cooco_sample": ("cooco", cooco_items(str(tiny_clip))),
            "snus_sample": ("snus", snus_items()),
            "layered_vqa_sample": ("layered_vqa", layered_items()),
        },
    )
    return folder


def _page_text(path) -> str:
    # tags out, white space collapsed: a cell sets its interval and n in a span of their own
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", path.read_text())).split())


def test_show_the_json_and_the_html_hold_the_same_numbers(run, tmp_path):
    shown, code = show_text([run])
    assert code == 0
    info = build_report([run], tmp_path / "r" / "report.html")
    page = _page_text(info.out)
    # every "mean [low, high] (n)" show prints is in the page, as often (one rendering of one object)
    in_show = Counter(NUMBER.findall(shown))
    in_page = Counter(NUMBER.findall(page))
    assert in_show and in_show == in_page
    # and they are the numbers the results JSON holds, cell by cell
    results = json.loads(next(run.glob("*_results.json")).read_text())["results"]
    cooco = results["cooco_sample"]["cooco_breakdown,none"]["by_condition_noise"]
    for condition, areas in cooco.items():
        cell = areas["none"]["0"]
        for metric in ("refclipscore", "accuracy", "levenshtein_accuracy"):
            text = f"{with_interval(cell[metric], cell['ci95'][metric])} (n={cell['n']})"
            assert re.search(rf"^\| {condition} \| {re.escape(text)} \|", shown, flags=re.M), (condition, metric, text)
    vqa = results["layered_vqa_sample"]["layered_vqa_report,none"]
    for schedule, cell in vqa["by_schedule"].items():
        text = f"{with_interval(cell['accuracy'], cell['ci95']['accuracy'])} (n={cell['n']})"
        assert in_show[text] >= 1 and in_page[text] == in_show[text], (schedule, text)
    retained = vqa["retained"]["by_column"]["text"]
    lo, hi = retained["ci95"]
    assert f"{100 * retained['retained_accuracy']:.2f} [{100 * lo:.1f}, {100 * hi:.1f}]" in shown
    snus = results["snus_sample"]["snus_report,none"]["model"]["summary"]
    lo, hi = snus["ci95"]["CESG"]
    cesg = f"{100 * snus['CESG']:.2f} [{100 * lo:.1f}, {100 * hi:.1f}]"
    assert cesg in shown and cesg in page
    # the CSV files hold the same means
    fig3 = (info.out.parent / "tables" / "cooco-figure3-refclipscore.csv").read_text()
    high = cooco["high"]["none"]["0"]
    assert repr(float(high["refclipscore"])) in fig3


def test_two_datasets_of_one_model_are_two_labelled_rows_never_pooled(tmp_path):
    items = layered_items()
    first = {it["layered_vqa_report"]["question_id"] for it in items[:40]}
    subset = [it for it in items if it["layered_vqa_report"]["question_id"] in first]
    write_run(tmp_path / "sample", {"layered_vqa_sample": ("layered_vqa", items)})
    write_run(tmp_path / "other", {"layered_vqa_sample": ("layered_vqa", subset)}, name="20260102_000000")
    shown, code = show_text([tmp_path / "sample", tmp_path / "other"])
    assert code == 0
    assert shown.startswith("NOTE: Layered-VQA: these results hold 2 different datasets")
    table1 = shown[shown.index("Layered-VQA Table 1") :].split("\n\n")[1]
    labels = re.findall(r"^\| (Qwen2\.5-VL-3B \[data [0-9a-f]{12}\]) \|", table1, flags=re.M)
    assert len(labels) == 2 and labels[0] != labels[1]
    info = build_report([tmp_path / "sample", tmp_path / "other"], tmp_path / "r" / "report.html")
    page = info.out.read_text()
    assert "Several datasets" in page and all(html_lib.escape(label) in page for label in labels)
    assert info.mixture and info.skipped == []  # both runs shown, none dropped as a "second run"
    # each row holds its own dataset's numbers: full accuracy differs between the two
    full = re.findall(
        r"^\| Qwen2\.5-VL-3B \[data [0-9a-f]{12}\] \| [^|]+ \| [^|]+ \| [^|]+ \| ([^|]+) \|", table1, flags=re.M
    )
    assert len(set(full)) == 2
