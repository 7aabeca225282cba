"""The HTML report (``lmms-scene report``): what it shows, what it says computed it, and
what it skips (with the reason) when the input is bad.

The results folders here are hand-built lmms-eval results JSONs holding the report dicts
the tasks write (COOCO breakdown, Layered-VQA report), with known means and intervals, so
the tests can check that the page shows exactly the numbers the results hold.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import re
from pathlib import Path

import pytest
from PIL import Image

from lmms_scene.report.html import build_report
from lmms_scene.report.tables import Table, Value

# one worker draws the figures of these tests' runs once (Plot.png memoises them per process):
# test_report_browser.py's report is test_report_shows_every_figure_...'s inputs again, and
# test_results_identity.py reads the sample items test_report_browser.py scores (results_kit)
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("report")]

CONDITIONS = ("original", "same_target", "high", "medium", "low")
SCHEDULES = ("full", "concat-q", "sharded-v")


def cell(n: int, **metrics: tuple[float, list[float]]) -> dict:
    return {"n": n, **{k: v for k, (v, _) in metrics.items()}, "ci95": {k: ci for k, (_, ci) in metrics.items()}}


def cooco_breakdown(offset: float, noise: bool) -> dict:
    """A breakdown as ``naming.report`` writes it; RefCLIPScore of a cell encodes its place."""
    grid = {}
    for i, c in enumerate(CONDITIONS):
        base = 0.5 + offset + i / 100
        areas = {
            "none": {
                "0": cell(
                    20,
                    refclipscore=(base, [base - 0.03, base + 0.02]),
                    accuracy=(0.4 + offset, [0.3, 0.5]),
                    levenshtein_accuracy=(0.3, [0.2, 0.4]),
                    output_scene_similarity=(0.25, [0.2, 0.3]),
                    **({"context_capture_rate": (0.1, [0.05, 0.15])} if c in ("high", "medium", "low") else {}),
                )
            }
        }
        if noise:
            for area in ("context", "target", "all"):
                areas[area] = {
                    lv: cell(20, refclipscore=(base - float(lv) / 10, [base - 0.2, base]), accuracy=(0.3, [0.2, 0.4]))
                    for lv in ("0.5", "1")
                }
        grid[c] = areas
    return {
        "scorer": {
            "scorer": "cooco_naming",
            "lmms_scene_version": "0.1.0",
            "clip_model": "tiny-clip-test",
            "normaliser": "cooco-normalise-2",
            "thresholds": {"accuracy_text_cosine": 0.9, "levenshtein_similarity": 0.55},
            "intervals": "95% percentile bootstrap over images, 1000 resamples, seed 0",
        },
        "clip_models": ["tiny-clip-test"],
        "n_rows": 100,
        "n_duplicate_rows_dropped": 0,
        "overall": cell(
            100,
            refclipscore=(0.55, [0.5, 0.6]),
            output_scene_similarity=(0.26, [0.21, 0.31]),
            context_capture_rate=(0.12, [0.06, 0.18]),
        ),
        "by_condition": {},
        "by_condition_noise": grid,
        "context_capture_rate": 0.12,
        "context_capture_rate_among_wrong": 0.2,
        "output_statistics": {"n": 100, "n_empty": 2, "n_verbose": 1, "n_unscored": 0},
    }


def vqa_report(acc: float) -> dict:
    by = {
        s: cell(
            22, accuracy=(acc - i / 10, [acc - i / 10 - 0.2, acc - i / 10 + 0.2]), empty_output_rate=(0.0, [0.0, 0.0])
        )
        for i, s in enumerate(SCHEDULES)
    }
    return {
        "n_rows": 66,
        "n_duplicates": 0,
        "n_failed_conversations": 1,
        "grader": "rule",
        "synonyms": ["wordnet"],
        "interval": {"method": "percentile bootstrap", "cluster": "scene_id", "n_boot": 1000, "seed": 0, "level": 0.95},
        "overall": cell(66, accuracy=(acc, [acc - 0.1, acc + 0.1])),
        "by_schedule": by,
        "by_type_schedule": {"direct ask": {s: cell(4, accuracy=(0.5, [0.0, 1.0])) for s in SCHEDULES}},
        "retained": {
            "concat-q": {"retained_accuracy": 0.8, "ci95": [0.7, 0.9], "n": 22},
            "by_column": {"text": {"retained_accuracy": 0.8, "ci95": [0.7, 0.9], "n": 22}},
        },
        "evidence": {"all-lyr": cell(22, precision=(0.59, [0.54, 0.65]), recall=(0.33, [0.30, 0.37]))},
        "grounding": {
            "by_schedule": {"sharded-v": cell(22, attempted=(1.0, [1.0, 1.0]), ungrounded_share=(0.7, [0.5, 0.9]))}
        },
        "scorer": {
            "scorer": "layered_vqa",
            "lmms_scene_version": "0.1.0",
            "grader": "rule",
            "grade": "lmms_scene.metrics.vqa.grade",
        },
    }


TASK_BENCH = {
    "cooco_sample": "cooco",
    "cooco_noise_sample": "cooco",
    "layered_vqa_sample": "layered_vqa",
    "snus_sample": "snus",
    "mme": None,
}


def write_run(
    folder: Path,
    model: str,
    model_args: str,
    tasks: dict[str, dict],
    date: str = "20260101_000000",
    version: str = "0.7.3",
) -> Path:
    """An lmms-eval results JSON in ``folder`` holding ``tasks`` (task -> metric dict)."""
    folder.mkdir(parents=True, exist_ok=True)
    data = {
        "results": {t: {"alias": t, **{f"{k},none": v for k, v in m.items()}} for t, m in tasks.items()},
        "configs": {
            t: ({"metadata": {"version": 1.0, "benchmark": TASK_BENCH[t]}} if TASK_BENCH[t] else {}) for t in tasks
        },
        "config": {"model": model, "model_args": model_args, "limit": None},
        "lmms_eval_version": version,
    }
    path = folder / f"{date}_results.json"
    path.write_text(json.dumps(data))
    return path


def model_run(folder: Path, name: str, offset: float, date: str = "20260101_000000") -> Path:
    return write_run(
        folder,
        "qwen2_5_vl",
        f"pretrained=/ckpt/{name},device=cpu",
        {
            "cooco_sample": {"cooco_breakdown": cooco_breakdown(offset, noise=False), "refclipscore": 0.5},
            "cooco_noise_sample": {"cooco_breakdown": cooco_breakdown(offset, noise=True)},
            "layered_vqa_sample": {"layered_vqa_report": vqa_report(0.6 + offset), "accuracy": 0.6 + offset},
        },
        date=date,
    )


def pfram_scores(path: Path, checkpoint: str, bootstrap: bool = True) -> Path:
    layers = {"llm.0": 0.41, "llm.4": 0.47, "llm.8": 0.44}
    row = {
        "phi": "ndcg",
        "k": 25,
        "ties": "index",
        "skipped_anchors": 0,
        "layers": layers,
        "input": 0.41,
        "mean": 0.44,
        "max": 0.47,
        "summary_layers": list(layers),
    }
    if bootstrap:
        row["ci95"] = {x: [v - 0.02, v + 0.03] for x, v in layers.items()}
    path.write_text(
        json.dumps(
            {
                "computed_by": "lmms-scene 0.1.0 pfram score",
                "provenance": {
                    "scorer": "pfram",
                    "checkpoint": checkpoint,
                    "gold": "G_obj (shared object labels)",
                    "thresholds": {"phi": ["ndcg"], "k": [25], "ties": ["index"], "on_undefined": "raise"},
                },
                "rows": [row],
            }
        )
    )
    return path


@pytest.fixture
def two_models(tmp_path):
    model_run(tmp_path / "modelA", "modelA", 0.0)
    model_run(tmp_path / "modelB", "modelB", 0.1)
    return [tmp_path / "modelA", tmp_path / "modelB"]


def _pngs(page: str) -> list[Image.Image]:
    return [
        Image.open(io.BytesIO(base64.b64decode(m))) for m in re.findall(r'src="data:image/png;base64,([^"]+)"', page)
    ]


def visible(page: str) -> str:
    """The page's text as a reader sees it (tags dropped; a value's interval is in its own span)."""
    return re.sub(r"<[^>]+>", "", page)


# first in the file: it clears the figure memo, which the tests below (and
# test_report_browser.py's, in the same worker) then fill once
def test_a_figure_is_drawn_once_per_process_for_the_same_inputs(monkeypatch):
    """Plot.png memoises the PNG by kind, title and arguments: the same figure asked for
    again is not drawn again and is the same bytes; any other argument draws anew."""
    from lmms_scene import cache
    from lmms_scene.report import plots
    from lmms_scene.report.tables import Plot

    cache.memo_namespace("report.png").clear()
    drawn = []
    real = plots.grouped_bars
    monkeypatch.setattr(plots, "grouped_bars", lambda **kw: drawn.append(kw) or real(**kw))
    args = {
        "groups": ["high", "low"],
        "series": {"modelA": [Value(0.5, (0.4, 0.6), 10), None]},
        "title": "t",
        "ylabel": "y",
    }
    first = Plot("t", "grouped_bars", args).png()
    again = Plot("t", "grouped_bars", {**args}).png()
    assert first == again and first.startswith(b"\x89PNG") and len(drawn) == 1
    other = Plot("t", "grouped_bars", {**args, "series": {"modelA": [Value(0.5, (0.4, 0.7), 10), None]}}).png()
    assert other != first and len(drawn) == 2
    Plot("t2", "grouped_bars", args).png()
    assert len(drawn) == 3  # another title: drawn again


def test_report_shows_every_figure_and_table_with_the_intervals_the_results_hold(two_models, tmp_path):
    scores = pfram_scores(tmp_path / "pfram_A.json", "/ckpt/modelA")
    info = build_report(two_models, tmp_path / "out" / "report.html", pfram=[scores])
    page = info.out.read_text()
    assert info.models == ["modelA", "modelB"]
    assert info.benchmarks == ["cooco", "layered_vqa", "pfram"]
    assert info.skipped == []
    # COOCO: Figure 3 for RefCLIPScore, accuracy, Levenshtein (3); Figure 4 per model for each (6);
    # Layered-VQA accuracy per schedule (1); Pfram per layer (1)
    images = _pngs(page)
    assert len(images) == info.n_plots == 11
    for im in images:
        assert im.format == "PNG" and im.width > 200 and im.height > 150
        assert len(im.convert("RGB").getcolors(1 << 22)) > 20  # drawn, not blank
    # the numbers as the results hold them: mean [interval] (n) (the interval on a second line)
    text = visible(page)
    assert "0.520 [0.490, 0.540] (n=20)" in text  # modelA, high, no noise, RefCLIPScore
    assert "0.620 [0.590, 0.640] (n=20)" in text  # modelB, same cell
    assert '0.520 <span class="ci">[0.490, 0.540] (n=20)</span>' in page
    assert "0.470 [0.450, 0.500]" in text  # Pfram llm.4 with its bootstrap interval
    assert "80.00 [70.0, 90.0]" in text  # retained accuracy, text column, in percent as the paper prints it
    for title in (
        "COOCO Figure 3: RefCLIPScore at noise level 0",
        "COOCO Figure 4: RefCLIPScore by relatedness x noise area x level (modelB;",
        "Layered-VQA Table 1",
        "Layered-VQA Table 2: evidence handed over (modelA)",
        "Layered-VQA: grounding",
        "Layered-VQA Table 3: accuracy per question type",
        "output-scene similarity and context-capture rate",
        "Pfram per layer",
    ):
        assert title in page, title
    # every run says once what produced its numbers (one provenance block per run, not per table)
    tables = re.findall(r'<figure class="table".*?</figure>', page, flags=re.DOTALL)
    assert len(tables) == info.n_tables
    runs = re.findall(r'<ul class="runs">.*?</ul>\n', page, flags=re.DOTALL)
    assert len(runs) == 3  # COOCO, Layered-VQA and Pfram's score files
    assert all(r.count("modelA: model qwen2_5_vl") == 1 and r.count("modelB: model qwen2_5_vl") == 1 for r in runs[:2])
    assert "CLIP tiny-clip-test; thresholds: accuracy_text_cosine 0.9, levenshtein_similarity 0.55" in page
    assert "model_args pretrained=/ckpt/modelA,device=cpu" in page
    assert "grader rule (lmms_scene.metrics.vqa.grade, synonyms wordnet)" in page
    # headline first: Table 1 opens with the retained columns, kept in view
    t1 = page[page.index("Layered-VQA Table 1") :]
    assert re.search(
        r'<th class="key headline[^"]*"[^>]*>model</th><th class="key headline[^"]*"[^>]*>retained text</th>', t1
    )
    assert "over scene_id, 1000 resamples, seed 0" in page
    assert "gold G_obj (shared object labels)" in page
    # self-contained: no resource from anywhere else
    assert "http://" not in page and "https://" not in page
    assert not re.search(r'(src|href)="(?!data:|#)', page)


def test_markdown_and_csv_exports_hold_the_same_numbers(two_models, tmp_path):
    info = build_report(two_models, tmp_path / "r" / "report.html")
    md = info.markdown.read_text()
    assert info.markdown == tmp_path / "r" / "report.md"
    assert md.count("\n### ") == info.n_tables
    assert "| high | 0.520 [0.490, 0.540] (n=20) | 0.620 [0.590, 0.640] (n=20) |" in md
    assert len(info.csv) == info.n_tables and all(p.parent == tmp_path / "r" / "tables" for p in info.csv)
    fig3 = tmp_path / "r" / "tables" / "cooco-figure3-refclipscore.csv"
    rows = list(csv.DictReader(fig3.open()))
    high = next(r for r in rows if r["condition"] == "high")
    assert float(high["modelA mean"]) == pytest.approx(0.52)
    assert [float(high["modelA ci_low"]), float(high["modelA ci_high"])] == pytest.approx([0.49, 0.54])
    assert high["modelB n"] == "20"


def test_bad_input_is_listed_with_the_reason_and_the_rest_is_reported(tmp_path):
    a = tmp_path / "modelA"
    model_run(a, "modelA", 0.0, date="20260101_000000")
    model_run(a, "modelA", 0.3, date="20260105_000000")  # a second, newer run of the same model
    b = tmp_path / "modelB"
    write_run(
        b,
        "qwen2_5_vl",
        "pretrained=/ckpt/modelB",
        {  # no cooco_noise_sample; a foreign task; an old SNUS dict
            "cooco_sample": {"cooco_breakdown": cooco_breakdown(0.1, noise=False)},
            "mme": {"score": 1.0},
            "snus_sample": {"snus_report": {"rows": []}},
            "layered_vqa_sample": {"accuracy": 0.5},  # no report dict
        },
    )
    old = write_run(tmp_path / "old", "llava", "pretrained=/ckpt/old", {"cooco_sample": {}}, version="0.3.0")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "20260101_000000_results.json").write_text('{"results": {"cooco_sample": ')
    samples = tmp_path / "samples_only"
    samples.mkdir()
    (samples / "20260101_000000_samples_cooco_sample.jsonl").write_text('{"doc_id": 0}\n')
    info = build_report(
        [a, b, tmp_path / "old", broken, samples, tmp_path / "absent"], tmp_path / "out" / "report.html"
    )
    reasons = dict(info.skipped)
    older = [w for p, w in info.skipped if p == str(a / "20260101_000000_results.json")]
    assert sorted(w.split(":")[0] for w in older) == [
        f"second run of model modelA on task {t} (same data)"
        for t in ("cooco_noise_sample", "cooco_sample", "layered_vqa_sample")
    ]
    assert all(f"the newer run {a / '20260105_000000_results.json'} is shown" in w for w in older)
    assert "written by lmms-eval 0.3.0" in reasons[str(old)]
    assert "not JSON" in reasons[str(broken / "20260101_000000_results.json")]
    assert reasons[str(tmp_path / "absent")] == "no such file or folder"
    assert (
        "a samples file without its results JSON"
        in reasons[str(samples / "20260101_000000_samples_cooco_sample.jsonl")]
    )
    b_file = str(b / "20260101_000000_results.json")
    why_b = [why for path, why in info.skipped if path == b_file]
    assert any("task mme: not an lmms-scene task" in w for w in why_b)
    assert any("task layered_vqa_sample: no 'layered_vqa_report'" in w for w in why_b)
    assert any(w.startswith("task snus_sample: ") for w in why_b)
    assert any("model modelB has no cooco_noise_sample results (modelA do)" in w for p, w in info.skipped)
    # what is valid is reported: the newer run of modelA (offset 0.3), modelB's cooco_sample
    page = info.out.read_text()
    text = visible(page)
    assert "0.820 [0.790, 0.840] (n=20)" in text and "0.520 [0.490, 0.540]" not in text
    assert "0.620 [0.590, 0.640] (n=20)" in text
    assert info.models == ["modelA", "modelB"]
    skipped_html = page[page.index('<section id="skipped"') :]
    for _path, why in info.skipped:
        assert why.split(" (")[0].replace("'", "&#39;") in skipped_html, why
    assert "## Skipped" in info.markdown.read_text()


def test_nothing_usable_is_an_error_naming_the_input(tmp_path):
    (tmp_path / "x_results.json").write_text("not json")
    with pytest.raises(ValueError, match=r"nothing to report from .*x_results.json.*not JSON"):
        build_report([tmp_path / "x_results.json"], tmp_path / "report.html")
    with pytest.raises(ValueError, match="out: expected an .html file name"):
        build_report([tmp_path], tmp_path / "report.pdf")


def test_pfram_files_that_are_not_score_outputs_are_skipped(two_models, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"pearson_r": 0.3}))
    good = pfram_scores(tmp_path / "b.json", "/ckpt/modelB", bootstrap=False)
    info = build_report(two_models, tmp_path / "o" / "report.html", pfram=[bad, good])
    assert "not a 'pfram score' output (KeyError" in dict(info.skipped)[str(bad)]
    page = info.out.read_text()
    assert "modelB ndcg k=25 ties=index" in page and "0.470" in page


def test_a_table_renders_the_same_cells_as_csv_markdown_and_text():
    t = Table("t", ["a", "b"], [["x", Value(0.5, [0.4, 0.6], 3)], ["y", None]])
    assert t.csv().splitlines() == ["a,b mean,b ci_low,b ci_high,b n", "x,0.5,0.4,0.6,3", "y,,,,"]
    assert "| x | 0.500 [0.400, 0.600] (n=3) |" in t.markdown() and "| x | 0.500 [0.400, 0.600] (n=3) |" in t.text()


def test_markdown_and_csv_cells_cannot_inject(tmp_path):
    t = Table("a <b>title</b>", ["m"], [["x\n# heading <script>alert(1)</script> | y"], ["=HYPERLINK(1)"], ["-0.5"]])
    md = t.markdown()
    assert "\n# heading" not in md and "<script>" not in md and "&lt;script&gt;" in md and "\\| y" in md
    rows = list(csv.reader(io.StringIO(t.csv())))
    assert rows[2] == ["'=HYPERLINK(1)"] and rows[3] == ["-0.5"]


def test_report_never_overwrites_a_file_it_did_not_write(two_models, tmp_path):
    out = tmp_path / "mine.html"
    out.write_text("<html>my own page</html>")
    with pytest.raises(ValueError, match="were not written by an lmms-scene report"):
        build_report(two_models, out)
    assert out.read_text() == "<html>my own page</html>"
    info = build_report(two_models, out, overwrite=True)
    assert info.replaced == [out]
    again = build_report(two_models, out)  # its own file: replaced, and it says so
    assert again.replaced == [out, out.with_name("report.md")]
    with pytest.raises(ValueError, match="is a folder"):
        build_report(two_models, tmp_path / "dir.html" if (tmp_path / "dir.html").mkdir() is None else out)


def test_cli_writes_the_report_and_lists_what_it_skipped(two_models, tmp_path, capsys):
    from lmms_scene.cli import main

    out = tmp_path / "cli" / "report.html"
    assert main(["report", *map(str, two_models), str(tmp_path / "absent"), "--out", str(out)]) == 0
    captured = capsys.readouterr()
    assert out.is_file() and (out.parent / "report.md").is_file()
    assert f"skipped {tmp_path / 'absent'}: no such file or folder" in captured.err
    assert "models: modelA, modelB" in captured.out
    assert main(["report", str(tmp_path / "absent"), "--out", str(out)]) == 2
    assert "lmms-scene report: error: nothing to report" in capsys.readouterr().err


@pytest.mark.e2e
@pytest.mark.xdist_group("demo")
def test_report_of_the_demo_shows_snus_table2_and_layered_vqa(demo_run, tmp_path):
    """A real results folder (the offline demo with the blind baseline, conftest.py): every
    built benchmark is in the page, SNUS with its AC row from its own tables."""
    proc, out = demo_run
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    info = build_report([out], tmp_path / "report" / "report.html")
    from lmms_scene import benchmarks

    assert set(info.benchmarks) == {b.name for b in benchmarks.built()}
    page = info.out.read_text()
    assert info.models == ["scene_blind"]
    if benchmarks.get("snus").built():
        assert "SNUS Table 2" in page and "AC (references, negation stripped)" in page
    assert "Layered-VQA Table 1" in page and "COOCO Figure 3: Levenshtein accuracy" in page
    assert "RefCLIPScore: not computed in these results: " in page or "RefCLIPScore at noise" in page
    assert "http://" not in page and "https://" not in page
