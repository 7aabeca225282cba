"""`make demo` runs offline; with no CLIP at hand COOCO's CLIP metrics are recorded
as not computed (null), never as zeros or from another model."""

from __future__ import annotations

import pytest
from conftest import find_results
from PIL import Image

from lmms_scene.metrics import clip
from lmms_scene.metrics.cooco import scoring


def _item(output: str, condition: str = "low", image_id: str = "1") -> dict:
    return {
        "image_id": image_id,
        "condition": condition,
        "noise_area": "none",
        "noise_level": 0.0,
        "scene": "kitchen",
        "target": "oven",
        "gold": "ham",
        "output": output,
        "crop": Image.new("RGB", (8, 8)),
    }


def test_clip_off_records_clip_metrics_as_not_computed():
    rows = scoring.score_rows([_item("ham"), _item("", image_id="2"), _item("teapot", "original")], model="none")
    for row in rows:
        assert all(row[name] is None for name in scoring.CLIP_FIELDS), row
        assert row["clip_model"] is None
    assert [r["levenshtein_accuracy"] for r in rows] == [1.0, 0.0, 0.0]
    report = scoring.report(rows)
    assert report["scorer"]["clip_model"] is None
    assert "not computed" in report["scorer"]["clip_metrics"]
    assert report["clip_models"] == []
    assert "refclipscore" not in report["overall"] and report["overall"]["levenshtein_accuracy"] == pytest.approx(1 / 3)
    assert scoring.mean_score([scoring.metric_entries(r)["refclipscore"] for r in rows]) is None
    with pytest.raises(clip.ClipModelUnavailable, match="switched off"):
        clip.encoder("none")


@pytest.mark.e2e
@pytest.mark.xdist_group("demo")
def test_demo_runs_offline_and_says_what_it_did_not_compute(demo_run):
    # `lmms-scene demo --output_path OUT` with no CLIP setting and no CLIP checkpoint cached (conftest.py)
    proc, out = demo_run
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-3000:]
    assert "recorded as not computed" in proc.stdout
    from lmms_scene import benchmarks

    for bench in benchmarks.BENCHMARKS:
        said = f"{bench.title} is not built yet" in proc.stdout
        assert said != bench.built(), bench.name
    assert f"results: {out}" in proc.stdout
    # the printed harness table holds numbers only; the demo ends with the readable tables
    table = [line for line in proc.stdout.splitlines() if line.startswith("|cooco")]
    assert table and not any("{" in line for line in table), table[:3]
    assert "# COOCO" in proc.stdout and "## COOCO Figure 3: Levenshtein accuracy at noise level 0" in proc.stdout
    # CLIP is off here: the CLIP figures say so instead of printing empty tables
    flat = " ".join(proc.stdout.split())  # notes are wrapped at 160 characters
    assert (
        "RefCLIPScore: not computed in these results: openai/clip-vit-base-patch32 is not in the local Hugging Face cache"
        in flat
    )
    assert "`hf download openai/clip-vit-base-patch32`" in flat
    assert "## COOCO Figure 3: RefCLIPScore" not in proc.stdout
    # a demo you want to read: no INFO flood, no progress bars, no line over 160 characters,
    # and it ends with the three paths a user needs, then a five-line summary
    lines = proc.stdout.splitlines()
    assert not [line for line in lines if len(line) > 160]
    assert not [line for line in lines if " INFO " in line or "%|" in line]
    at = next(i for i, line in enumerate(lines) if line.startswith("lmms-scene demo: results:"))
    assert [line.split(":")[0] + ":" + line.split(":")[1] for line in lines[at : at + 3]] == [
        "lmms-scene demo: results",
        "lmms-scene demo: report",
        "lmms-scene demo: tables",
    ]
    summary = " ".join(lines[at + 3 :]).replace("   ", " ").split("lmms-scene demo: ")[1:]  # wrapped lines joined
    assert [part.split(":")[0].split(",")[0] for part in summary] == [
        "measured",
        "headline",
        "these are the embedded samples",
        "next",
        "next",
    ], summary
    results = find_results(out)["results"]
    tasks = [t for b in benchmarks.built() for t in b.sample_tasks]
    assert all(t in summary[0] for t in tasks) and "scene_blind" in summary[0]
    assert f"snus_sample: CESG {results['snus_sample']['CESG,none']:.3f}" in " ".join(summary[1].split())
    assert "lmms-scene eval --tasks cooco,snus,layered_vqa" in " ".join(summary[4].split())
    # ... then the HTML report, and the submission it refuses for sample splits, with why
    (report,) = out.rglob("report/report.html")
    assert f"report:  {report}" in proc.stdout and "<img" in report.read_text()
    (refused,) = out.rglob("submission_refused.txt")
    assert "no leaderboard submission, as expected for sample splits" in proc.stdout
    assert "cooco_sample: a sample split" in refused.read_text()
    assert not list(out.rglob("submission.json"))
    cooco = find_results(out)["results"]["cooco_sample"]
    assert cooco["refclipscore,none"] is None
    assert 0.0 <= cooco["levenshtein_accuracy,none"] <= 1.0
    assert cooco["cooco_breakdown,none"]["scorer"]["clip_model"] is None
    assert "cooco_noise_sample" in find_results(out)["results"]
