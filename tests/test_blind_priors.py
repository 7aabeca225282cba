"""The blind baseline's priors are counted on data disjoint from what they are scored on
(issue 33, item 4): on the embedded samples, each doc is answered from the other images or
scenes (leave one out); on any other data, from the whole sample, which it does not hold.
``show`` and the report say where the answers come from."""

from __future__ import annotations

from collections import Counter

import pyarrow.parquet as pq
import pytest

from lmms_scene import cli
from lmms_scene.registration import tasks_path


def test_snus_prior_leaves_the_scored_images_caption_out():
    from lmms_scene.baselines.snus import blind_answer, prior_from

    rows = pq.read_table(tasks_path() / "snus" / "sample" / "snus_sample.parquet", columns=["image_id", "caption"]).to_pylist()
    answers = {}
    for row in rows:
        others = [r["caption"] for r in rows if r["image_id"] != row["image_id"]]
        answers[row["image_id"]] = blind_answer({"image_id": row["image_id"]}, "any prompt")
        assert answers[row["image_id"]] == prior_from(others), row["image_id"]
    # the whole sample answers a doc the sample does not hold (a full build's image)
    everything = prior_from(r["caption"] for r in rows)
    assert blind_answer({"image_id": "not-in-the-sample"}, "") == everything == blind_answer({}, "")
    # leaving one caption out changes the answer for some images: the old prior saw them
    assert any(a != everything for a in answers.values())


def _count(rows, left_out):
    by_type: dict[str, Counter] = {}
    for r in rows:
        if r["scene_id"] != left_out:
            by_type.setdefault(r["question_type"], Counter())[r["answer"]] += 1
    return {t: min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] for t, c in by_type.items()}


def test_layered_vqa_prior_leaves_the_scored_scene_out():
    from lmms_scene.baselines.layered_vqa import blind_answer, prior

    rows = pq.read_table(tasks_path() / "layered_vqa" / "sample" / "layered_vqa_sample.parquet",
                         columns=["scene_id", "question_type", "answer"]).to_pylist()  # fmt: skip
    for scene in sorted({r["scene_id"] for r in rows}):
        assert prior(scene)["answers"] == _count(rows, scene), scene
        doc = next(r for r in rows if r["scene_id"] == scene)
        assert blind_answer(doc, "question?") == _count(rows, scene)[doc["question_type"]]
    # the generated split's scenes are not in the sample: the whole sample answers them
    assert prior("gen1-0000")["answers"] == _count(rows, None)


def test_show_says_where_the_blind_answers_come_from(tmp_path, capsys):
    from lmms_scene.baselines import layered_vqa
    from test_report import vqa_report, write_run

    write_run(tmp_path / "blind", "scene_blind", "", {"layered_vqa_sample": {"layered_vqa_report": vqa_report(0.3), "accuracy": 0.3}})
    write_run(tmp_path / "model", "qwen2_5_vl", "pretrained=/ckpt/m", {"layered_vqa_sample": {"layered_vqa_report": vqa_report(0.6), "accuracy": 0.6}})
    assert cli.main(["show", str(tmp_path), "--width", "0"]) == 0
    out = capsys.readouterr().out
    assert f"scene_blind (the blind baseline) never looks at an image; its Layered-VQA answers are {layered_vqa.PRIOR_SOURCE}." in out
    assert cli.main(["show", str(tmp_path / "model"), "--width", "0"]) == 0
    assert "scene_blind (the blind baseline)" not in capsys.readouterr().out


@pytest.mark.parametrize("bench", ["cooco", "snus", "layered_vqa"])
def test_every_prior_module_says_where_its_answers_come_from(bench):
    from lmms_scene import benchmarks
    from lmms_scene.report.html import blind_prior_source

    source = blind_prior_source(benchmarks.get(bench))
    assert isinstance(source, str) and len(source) > 40
