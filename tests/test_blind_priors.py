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


@pytest.mark.slow
def test_snus_prior_leaves_the_scored_images_caption_out():
    from lmms_scene.baselines.snus import blind_answer, prior_from

    rows = pq.read_table(
        tasks_path() / "snus" / "sample" / "snus_sample.parquet", columns=["image_id", "caption"]
    ).to_pylist()
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


@pytest.mark.slow
def test_layered_vqa_prior_is_counted_on_a_generated_split_no_task_scores():
    from lmms_scene.baselines import layered_vqa
    from lmms_scene.data.layered_vqa import sample, synth

    items = synth.generate(
        layered_vqa.PRIOR_SCENES, seed=layered_vqa.PRIOR_SEED, size=layered_vqa.PRIOR_SIZE, id_prefix="prior"
    )
    by_type: dict[str, Counter] = {}
    for it in items:
        by_type.setdefault(it["question_type"], Counter())[it["answer"]] += 1
    expected = {t: min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] for t, c in by_type.items()}
    assert layered_vqa.prior()["answers"] == expected
    assert (
        layered_vqa.blind_answer({"question_type": "counting", "scene_id": "synth-0000"}, "How many?")
        == expected["counting"]
    )
    # disjoint from what the tasks score: other seeds than the sample's (0) and the generated split's
    assert layered_vqa.PRIOR_SEED not in (0, sample.SYNTH_SEED)
    # ... and no prior scene is a scene a task scores (pixels compared)
    import io

    from PIL import Image

    def pixels(image) -> bytes:
        return image.convert("RGB").tobytes()

    scored = set()
    for path in (
        tasks_path() / "layered_vqa" / "sample" / "layered_vqa_sample.parquet",
        tasks_path() / "layered_vqa" / sample.SYNTH_FILE,
    ):
        for row in pq.read_table(path, columns=["composite"]).to_pylist():
            scored.add(pixels(Image.open(io.BytesIO(row["composite"]["bytes"]))))
    assert len(scored) > 60 and not {pixels(it["composite"]) for it in items} & scored


def test_show_says_where_the_blind_answers_come_from(tmp_path, capsys):
    from test_report import vqa_report, write_run

    from lmms_scene.baselines import layered_vqa

    write_run(
        tmp_path / "blind",
        "scene_blind",
        "",
        {"layered_vqa_sample": {"layered_vqa_report": vqa_report(0.3), "accuracy": 0.3}},
    )
    write_run(
        tmp_path / "model",
        "qwen2_5_vl",
        "pretrained=/ckpt/m",
        {"layered_vqa_sample": {"layered_vqa_report": vqa_report(0.6), "accuracy": 0.6}},
    )
    assert cli.main(["show", str(tmp_path), "--width", "0"]) == 0
    out = capsys.readouterr().out
    assert (
        f"scene_blind (the blind baseline) never looks at an image; its Layered-VQA answers are {layered_vqa.PRIOR_SOURCE}."
        in out
    )
    assert cli.main(["show", str(tmp_path / "model"), "--width", "0"]) == 0
    assert "scene_blind (the blind baseline)" not in capsys.readouterr().out


@pytest.mark.parametrize("bench", ["cooco", "snus", "layered_vqa"])
def test_every_prior_module_says_where_its_answers_come_from(bench):
    from lmms_scene import benchmarks
    from lmms_scene.report.html import blind_prior_source

    source = blind_prior_source(benchmarks.get(bench))
    assert isinstance(source, str) and len(source) > 40
