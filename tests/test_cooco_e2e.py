"""End-to-end: lmms_eval runs the COOCO sample tasks through real harness model
classes, and the results JSON holds the breakdown, the capture rate and provenance."""

from __future__ import annotations

import pytest
from conftest import find_samples

pytestmark = pytest.mark.e2e

CONDITIONS = {"original", "same_target", "high", "medium", "low"}
HEADLINE = (
    "refclipscore",
    "accuracy",
    "levenshtein_accuracy",
    "output_scene_similarity",
    "context_capture_rate",
    "empty_output_rate",
)


#: row field each headline metric averages
FIELDS = {
    "refclipscore": "refclipscore",
    "accuracy": "accuracy",
    "levenshtein_accuracy": "levenshtein_accuracy",
    "output_scene_similarity": "output_scene_similarity",
    "context_capture_rate": "context_captured",
    "empty_output_rate": "empty",
}


def check_results(results: dict, task: str, tiny_clip, n_rows: int, settings: set, out) -> dict:
    res = results["results"][task]
    report = res["cooco_breakdown,none"]
    assert report["n_rows"] == n_rows
    assert report["scorer"]["clip_model"] == str(tiny_clip) and report["clip_models"] == [str(tiny_clip)]
    # every headline number is the mean of its field over the logged rows (an independent path)
    rows = [s["cooco_breakdown"] for s in find_samples(out, task)]
    assert len(rows) == n_rows and all(r["scored"] for r in rows)
    for key, field in FIELDS.items():
        values = [float(r[field]) for r in rows if r[field] is not None]
        assert values, key
        assert res[f"{key},none"] == pytest.approx(sum(values) / len(values), abs=1e-9), key
    incongruent = [r for r in rows if r["condition"] in ("high", "medium", "low")]
    assert all(r["context_captured"] is not None for r in incongruent)
    assert all(r["context_captured"] is None for r in rows if r not in incongruent)
    cells = report["by_condition_noise"]
    assert set(cells) == CONDITIONS
    for condition, areas in cells.items():
        assert {(a, lv) for a, levels in areas.items() for lv in levels} == settings
        for levels in areas.values():
            for cell in levels.values():
                for metric in ("refclipscore", "accuracy", "levenshtein_accuracy", "empty_output_rate"):
                    assert metric in cell and metric in cell["ci95"]
                assert ("context_capture_rate" in cell) == (condition in ("high", "medium", "low"))
    assert report["context_capture_rate"] == pytest.approx(res["context_capture_rate,none"])
    assert report["output_statistics"]["n"] == n_rows and report["output_statistics"]["n_unscored"] == 0
    return report


@pytest.mark.xdist_group("cooco_blind")
def test_cooco_sample_through_scene_blind(cooco_blind_run, tiny_clip):
    code, results, out, log = cooco_blind_run
    assert code == 0, log[-3000:]
    report = check_results(results, "cooco_sample", tiny_clip, 29, {("none", "0")}, out)
    assert report["output_statistics"]["n_empty"] == 0
    rows = find_samples(out, "cooco_sample")
    assert len(rows) == 29
    ids = {(r["cooco_breakdown"]["image_id"], r["cooco_breakdown"]["noise_area"]) for r in rows}
    assert len(ids) == 29  # every row carries its stable ids
    # the blind prior names a scene-typical object: always the same answer per scene
    by_scene = {}
    for r in rows:
        by_scene.setdefault(r["cooco_breakdown"]["scene"], set()).add(r["cooco_breakdown"]["prediction"])
    assert all(len(v) == 1 for v in by_scene.values())
    # the samples file alone re-creates the breakdown (rows carry their ids)
    from lmms_scene.metrics.cooco import tables as cooco_tables
    from lmms_scene.results import load

    (samples_file,) = out.rglob("*_samples_cooco_sample.jsonl")
    (alone,) = load(samples_file).results
    again = cooco_tables.report_of(alone)  # what show and the HTML report read
    assert again["by_condition_noise"] == report["by_condition_noise"]


@pytest.mark.xdist_group("cooco_blind")
def test_cooco_noise_sample_through_scene_blind(cooco_blind_run, tiny_clip):
    code, results, out, log = cooco_blind_run
    assert code == 0, log[-3000:]
    settings = {(a, lv) for a in ("target", "context", "all") for lv in ("0.5", "1")}
    check_results(results, "cooco_noise_sample", tiny_clip, 29 * 6, settings, out)
    # the answers were scored in batches after generation (same numbers as row by row:
    # tests/test_cooco_robust.py)
    assert "lmms-scene: pre-scored 174 of 174 answers of cooco_noise_sample" in log


@pytest.mark.xdist_group("qwen")
def test_cooco_sample_through_qwen2_5_vl(qwen_run, tiny_clip):
    code, results, out, log = qwen_run
    assert code == 0, log[-3000:]
    check_results(results, "cooco_sample", tiny_clip, 29, {("none", "0")}, out)
    rows = find_samples(out, "cooco_sample")
    # the Qwen2.5-VL prompt gives absolute pixel coordinates of the padded square
    prompts = [str(r.get("input", r.get("arguments", ""))) for r in rows]
    assert any("What is the object in this part of the image [" in p for p in prompts), rows[0].keys()
    assert not any("[0." in p for p in prompts)


def test_harness_indexes_every_cooco_task_and_the_group(harness_index_memo):
    from lmms_eval.tasks import TaskManager

    from lmms_scene.registration import tasks_path

    manager = TaskManager(include_path=str(tasks_path()))
    for name in ("cooco", "cooco_noise", "cooco_sample", "cooco_noise_sample"):
        assert name in manager.all_tasks, name
    assert "cooco_full" in manager.all_groups
    group = manager._get_config("cooco_full")
    assert group["task"] == ["cooco", "cooco_noise"]
