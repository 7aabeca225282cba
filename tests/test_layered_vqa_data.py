"""Layered-VQA data: the generator, the embedded sample, the release builder, the blind
prior and the replay wrapper's handling of a failing model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lmms_scene import compositing
from lmms_scene.data.layered_vqa import synth as S
from lmms_scene.data.layered_vqa.builder import build_release
from lmms_scene.data.layered_vqa.delivery import LAYER, PHRASES, SCHEDULES, deliver
from lmms_scene.data.layered_vqa.rounds import MAX_ROUNDS, turns_of
from lmms_scene.data.layered_vqa.sample import build_sample, toy_item
from lmms_scene.data.layered_vqa.schema import (
    COLUMNS,
    QUESTION_TYPES,
    depth,
    features,
    validate,
)
from lmms_scene.data.layered_vqa.views import PLACEHOLDER_FILE, schedule_docs


@pytest.fixture(scope="module")
def items():
    return S.generate(6, seed=0, size=(96, 72))


def test_generator_is_deterministic_and_exact(items):
    again = S.generate(6, seed=0, size=(96, 72))
    assert [i["question"] for i in items] == [i["question"] for i in again]
    assert items[0]["composite"].tobytes() == again[0]["composite"].tobytes()
    assert [i["question"] for i in S.generate(6, seed=1, size=(96, 72))] != [i["question"] for i in items]
    for item in items:
        validate(item)
        assert compositing.recomposition_error(item["layers"], item["composite"]).max_difference == 0
        assert item["layers"][0].mode == "RGBA" and np.asarray(item["layers"][0])[..., 3].min() == 255


def test_generator_covers_every_type_and_answers_from_geometry(items):
    assert {i["question_type"] for i in items} == set(QUESTION_TYPES)
    for item in items:
        names = item["layer_names"]
        minimal = item["minimal_sufficient_layers"]
        assert 0 not in item["distractor_layers"] and not set(minimal) & set(item["distractor_layers"])
        if item["question_type"] == "direct ask":
            (k,) = minimal
            assert names[k].split()[0] in item["question"] and names[k].split()[1] in item["answer"]
        if item["question_type"] == "occlusion":
            front, back = sorted(minimal)[::-1]
            a_front = np.asarray(item["layers"][front])[..., 3] > 0
            a_back = np.asarray(item["layers"][back])[..., 3] > 0
            assert (a_front & a_back).any() and names[back] in item["answer"].lower()
        if item["question_type"] == "counting" and " and " not in item["answer"]:
            shape = item["question"].split()[2].rstrip("s")
            assert sum(1 for n in names[1:] if n.endswith(shape)) == len(minimal)


def test_every_depth_present_and_all_schedules_deliver(items):
    assert {depth(i) for i in items} >= {2, 3, 4, 5, 6}
    for item in items:
        for schedule in SCHEDULES:
            turns = deliver(item, schedule)
            assert all(len(t.images) == len(t.views) for t in turns)


def test_generator_rejects_bad_arguments():
    with pytest.raises(ValueError, match="scenes"):
        S.generate(0)
    with pytest.raises(ValueError, match="size"):
        S.generate(1, size=(8, 8))


def test_build_sample_writes_the_schema(tmp_path):
    import datasets

    path, synth_split, placeholder = build_sample(tmp_path, scenes=2)
    assert placeholder == tmp_path / PLACEHOLDER_FILE and placeholder.is_file()
    data = datasets.load_dataset("parquet", data_files={"test": str(path)})["test"]
    assert list(data.features) == list(COLUMNS)
    row = data[0]
    assert row["layers"][1].mode == "RGBA" and isinstance(row["shards"][0]["supporting_layers"], list)
    docs = schedule_docs(data, list(SCHEDULES))
    assert len(docs) == 16 * len(data)
    assert [docs[i]["schedule"] for i in range(16)] == list(SCHEDULES)  # item-major
    assert docs[0]["n_layers"] == len(row["layers"])


def test_shipped_sample_is_current():
    import pyarrow.parquet as pq

    from lmms_scene.registration import tasks_path

    shipped = pq.read_table(
        tasks_path() / "layered_vqa" / "sample" / "layered_vqa_sample.parquet",
        columns=["question_id", "question", "answer"],
    ).to_pylist()
    fresh = S.generate(4, seed=0, size=(160, 120))
    assert [(r["question_id"], r["question"], r["answer"]) for r in shipped] == [
        (i["question_id"], i["question"], i["answer"]) for i in fresh
    ]


def _release(root: Path, items):
    for it in items:
        d = root / "scenes" / it["scene_id"]
        (d / "layers").mkdir(parents=True, exist_ok=True)
        it["composite"].save(d / "composite.png")
        for k, (img, name) in enumerate(zip(it["layers"], it["layer_names"])):
            img.save(d / "layers" / f"{k}_{name.replace(' ', '-')}.png")
    with open(root / "questions.jsonl", "w") as f:
        for it in items:
            f.write(json.dumps({k: it[k] for k in COLUMNS if k not in ("composite", "layers", "layer_names")}) + "\n")


def test_build_release_round_trip_and_checks(tmp_path, items):
    import datasets

    some = [i for i in items if i["scene_id"] in ("synth-0000", "synth-0001")]
    _release(tmp_path / "rel", some)
    report = build_release(tmp_path / "rel", tmp_path / "out", name="rel")
    assert report.rows == len(some) and report.scenes == 2 and set(report.max_difference.values()) == {0}
    assert (
        report.out == tmp_path / "out" / "data" / "test-00000-of-00001.parquet"
        and report.card == tmp_path / "out" / "README.md"
    )
    assert report.groups == ["layered_vqa_rel"] and len(report.tasks) == 16
    assert "max pixel difference 0" in report.card.read_text()
    data = datasets.load_dataset("parquet", data_files={"test": str(report.out)})["test"]
    assert [r["question_id"] for r in data] == [i["question_id"] for i in some]

    # a layer that no longer recomposes the composite
    bad = tmp_path / "rel" / "scenes" / "synth-0001" / "layers"
    first = sorted(bad.glob("1_*.png"))[0]
    from PIL import Image

    img = Image.open(first).convert("RGBA")
    img.putpixel((0, 0), (255, 0, 255, 255))
    img.save(first)
    with pytest.raises(
        ValueError,
        match=r"scene 'synth-0001': layers do not recompose the composite: max pixel difference \d+ > tolerance 2",
    ):
        build_release(tmp_path / "rel", tmp_path / "out-bad")
    assert not (tmp_path / "out-bad").exists()  # nothing written when a check fails

    # a shard naming a layer that does not exist
    _release(tmp_path / "rel2", some[:1])
    lines = (tmp_path / "rel2" / "questions.jsonl").read_text().splitlines()
    rec = json.loads(lines[0])
    rec["shards"][1]["supporting_layers"] = [42]
    (tmp_path / "rel2" / "questions.jsonl").write_text(json.dumps(rec) + "\n")
    with pytest.raises(ValueError, match=r"questions.jsonl line 1: item 'synth-0000-q0' .*layer index 42 out of range"):
        build_release(tmp_path / "rel2", tmp_path / "out2")


def test_build_release_layer_size_mismatch(tmp_path, items):
    from PIL import Image

    _release(tmp_path / "rel", items[:1])
    layer = sorted((tmp_path / "rel" / "scenes" / "synth-0000" / "layers").glob("2_*.png"))[0]
    Image.open(layer).resize((10, 10)).save(layer)
    with pytest.raises(ValueError, match=r"scene 'synth-0000': layer 2 .* is 10x10"):
        build_release(tmp_path / "rel", tmp_path / "o")


def test_cli_build_synth_and_errors(tmp_path, capsys):
    from lmms_scene.cli import main

    assert (
        main(
            ["build", "layered-synth", "--scenes", "2", "--seed", "4", "--size", "64x48", "--out", str(tmp_path / "s")]
        )
        == 0
    )
    assert (tmp_path / "s" / "data" / "test-00000-of-00001.parquet").is_file() and (
        tmp_path / "s" / "README.md"
    ).is_file()
    assert (tmp_path / "s" / "tasks" / "layered_vqa_s.yaml").is_file()
    assert main(["build", "layered-vqa", "--release", str(tmp_path / "missing"), "--out", str(tmp_path / "x")]) == 2
    assert "no question file" in capsys.readouterr().err
    # --out is required: nothing is written into the installed package
    with pytest.raises(SystemExit):
        main(["build", "layered-synth", "--scenes", "1"])
    assert "the following arguments are required: --out" in capsys.readouterr().err


def test_blind_prior_is_text_only_and_names_layers_when_asked():
    from lmms_scene.baselines.layered_vqa import blind_answer, prior

    answers = prior()["answers"]
    assert set(answers) == set(QUESTION_TYPES)
    doc = {"question_type": "counting"}
    assert blind_answer(doc, "How many?") == answers["counting"]
    assert "\nLayers: " in blind_answer(doc, PHRASES["selection"])


class _FakeInner:
    is_simple = True
    rank, world_size, device = 0, 1, "cpu"

    def __init__(self, fail_at=None, **kwargs):
        self.fail_at, self.kwargs, self.prompts = fail_at, kwargs, []

    def generate_until(self, requests):
        (req,) = requests
        text, _gen, to_visual, doc_id, task, split = req.args
        visuals = to_visual(self.task_dict[task][split][doc_id])
        self.prompts.append((text, len(visuals)))
        if self.fail_at is not None and len(self.prompts) > self.fail_at:
            raise RuntimeError("CUDA out of memory")
        return [f"answer {len(self.prompts)}"]


def _replay(monkeypatch, **kwargs):
    import lmms_eval.models

    from lmms_scene.models.replay import SceneReplay

    monkeypatch.setattr(lmms_eval.models, "get_model", lambda name, force_simple=False: _FakeInner)
    return SceneReplay(inner="fake", **kwargs)


def _request(model, schedule):
    from lmms_eval.api.instance import Instance

    from lmms_scene.tasks.layered_vqa import utils

    doc = dict(toy_item(4), schedule=schedule, seed=0)
    model.task_dict["t"] = {"test": [doc]}
    args = (utils.doc_to_text(doc), {"max_new_tokens": 4}, utils.doc_to_visual, utils.doc_to_text, 0, "t", "test")
    return Instance("generate_until_multi_round", args, 0, metadata={"task": "t", "doc_id": 0, "repeats": 1}), doc


def test_replay_asks_once_per_turn_with_history(monkeypatch):
    model = _replay(monkeypatch, pretrained="x")
    assert model._inner.kwargs == {"pretrained": "x"}
    request, _doc = _request(model, "sharded-v")
    (outputs,) = model.generate_until_multi_round([request])
    assert outputs == ["answer 1", "answer 2", "answer 3", "answer 4"]
    prompts = model._inner.prompts
    assert [n for _, n in prompts] == [1, 2, 3, 4]  # every image shown so far
    assert "Assistant: answer 1" in prompts[1][0] and "Assistant: answer 3" in prompts[3][0]


def test_replay_keeps_turns_before_a_failure(monkeypatch):
    from lmms_scene.metrics.layered_vqa import scoring

    model = _replay(monkeypatch, fail_at=2)
    request, doc = _request(model, "sharded-v")
    (outputs,) = model.generate_until_multi_round([request])
    assert outputs == ["answer 1", "answer 2"]
    row = scoring.score_row(doc, outputs, turns_of(doc))
    assert row["failure"] == "conversation stopped after 2 of 4 turns" and row["correct"] is None


def test_replay_needs_an_inner_model():
    from lmms_scene.models.replay import SceneReplay

    with pytest.raises(ValueError, match="inner="):
        SceneReplay()


def test_schedule_docs_rejects_conversations_past_the_round_cap(monkeypatch):
    import datasets

    item = toy_item(3)
    item["shards"] = [{"text": f"part {i}.", "supporting_layers": []} for i in range(MAX_ROUNDS + 1)]
    data = datasets.Dataset.from_list([item], features=features())
    assert len(schedule_docs(data, ["full"])) == 1
    with pytest.raises(ValueError, match=r"row 0: item 'toy-0' .*'sharded-q' needs 33 turns, more than the 32 rounds"):
        schedule_docs(data, ["full", "sharded-q"])


@pytest.mark.slow
def test_generated_scenes_show_their_answers():
    """Over 500 generated scenes: every question's supporting objects are at least half
    visible in the composite (later layers in front) and in their own lone layer, which is
    shown on a background at least MIN_BACKGROUND_DISTANCE from every object colour."""
    from lmms_scene.data.layered_vqa.delivery import View, render_view

    items = S.generate(500, seed=0, size=(64, 48))
    assert len(items) > 2000
    seen: dict[tuple[str, int], tuple[float, float]] = {}
    for item in items:
        alphas = [np.asarray(layer)[..., 3] > 0 for layer in item["layers"]]
        objects = {int(i) for s in item["shards"] for i in s["supporting_layers"]} | set(
            item["minimal_sufficient_layers"]
        )
        for k in sorted(objects - {0}):
            key = (item["scene_id"], k)
            if key not in seen:
                covered = np.zeros_like(alphas[k])
                for later in alphas[k + 1 :]:
                    covered |= later
                in_composite = (alphas[k] & ~covered).sum() / alphas[k].sum()
                lone = np.asarray(render_view(item, View(LAYER, (k,)))).astype(float)
                bg = lone[~alphas[k]][0]
                assert (lone[~alphas[k]] == bg).all()
                dist = np.sqrt(((lone[alphas[k]] - bg) ** 2).sum(axis=1))
                in_layer = (dist >= compositing.MIN_BACKGROUND_DISTANCE).mean()
                seen[key] = (in_composite, in_layer)
            in_composite, in_layer = seen[key]
            assert in_composite >= S.MIN_VISIBLE, (item["question_id"], k, in_composite)
            assert in_layer >= 0.5, (item["question_id"], k, in_layer)
    # every palette colour is far from the background generated scenes' lone layers get
    for name, rgb in S.COLOURS.items():
        assert (
            np.linalg.norm(np.subtract(rgb, compositing.BACKGROUND_CANDIDATES[0]))
            >= compositing.MIN_BACKGROUND_DISTANCE
        ), name


def test_a_release_layer_gets_a_background_far_from_its_own_colours():
    # a photo-like grey object (mid grey is the first choice) is shown on another colour
    arr = np.zeros((20, 20, 4), np.uint8)
    arr[5:15, 5:15] = (125, 130, 128, 255)
    colour = compositing.lone_layer_background([arr])
    assert colour != (128, 128, 128)
    assert compositing.background_distances([arr], colour).min() >= compositing.MIN_BACKGROUND_DISTANCE
    # a layer with every colour: the candidate whose nearest 1% is farthest
    rng = np.random.default_rng(0)
    noisy = np.concatenate([rng.integers(0, 256, (20, 20, 3), dtype=np.uint8), np.full((20, 20, 1), 255, np.uint8)], 2)
    assert compositing.lone_layer_background([noisy]) in compositing.BACKGROUND_CANDIDATES
