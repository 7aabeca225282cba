"""lmms-scene's own harness models: the echo test model and the scene_blind baseline."""

from __future__ import annotations

import json

import pytest
from lmms_eval.api.instance import Instance
from PIL import Image

from lmms_scene.harness import round_outputs
from lmms_scene.models import MANIFESTS
from lmms_scene.models.blind import SceneBlind, SceneBlindChat, benchmark_of, prior_for
from lmms_scene.models.echo import Echo, EchoChat

DOC = {"item_id": "x", "rounds": 3}


def _doc_to_visual(doc):
    return [Image.new("RGB", (20, 10)), Image.new("RGB", (6, 4))]


def _doc_to_text(doc, previous_output=None, round_idx=None, previous_round_info=None):
    if round_idx >= doc["rounds"]:
        return None, None, True, previous_output, previous_round_info
    visuals = [Image.new("RGB", (3, 3))] if round_idx == 2 else []
    return visuals, f"round {round_idx} saw {len(previous_output)}", False, previous_output, {"k": round_idx}


def _doc_to_messages(doc, round_idx=None, previous_output=None, previous_round_info=None):
    if round_idx is None:
        return [
            {
                "role": "user",
                "content": [{"type": "image", "url": Image.new("RGB", (8, 8))}, {"type": "text", "text": "first"}],
            }
        ]
    if round_idx >= doc["rounds"]:
        return None, True, previous_output, previous_round_info
    return (
        [{"role": "user", "content": [{"type": "text", "text": f"chat round {round_idx}"}]}],
        False,
        previous_output,
        None,
    )


def _inst(request_type: str, args: tuple) -> Instance:
    return Instance(request_type, args, 0, metadata={"task": args[-2], "doc_id": args[-3], "repeats": 1})


def _simple(model, multi_round: bool, task="scene_selftest"):
    model.task_dict = {task: {"test": [DOC]}}
    if multi_round:
        args = ("first", {}, _doc_to_visual, _doc_to_text, 0, task, "test")
        return _inst("generate_until_multi_round", args)
    return _inst("generate_until", ("first", {}, _doc_to_visual, 0, task, "test"))


def test_manifests_register_every_model_and_every_class_path_imports():
    import importlib

    manifests = {m.model_id: m for m in MANIFESTS()}
    assert set(manifests) == {"echo", "scene_blind", "scene_replay", "scene_from_samples"}
    assert manifests["echo"].chat_class_path.endswith("EchoChat")
    assert manifests["scene_blind"].simple_class_path.endswith("blind.SceneBlind")
    for manifest in manifests.values():
        for path in (manifest.simple_class_path, manifest.chat_class_path):
            if path:
                module, _, name = path.rpartition(".")
                assert isinstance(getattr(importlib.import_module(module), name), type), path


def test_echo_simple_records_images_and_text_per_turn(tmp_path):
    record = tmp_path / "rec.jsonl"
    model = Echo(record=str(record))
    (single,) = model.generate_until([_simple(model, multi_round=False)])
    assert single == "2 images 20x10, 6x4; 5 chars"
    (rounds,) = model.generate_until_multi_round([_simple(model, multi_round=True)])
    assert isinstance(rounds, list) and len(rounds) == 3  # a list per doc, never a tuple
    lines = [json.loads(l) for l in record.read_text().splitlines()]
    assert [t["n_images"] for t in lines[1]["turns"]] == [2, 0, 1]
    assert lines[1]["turns"][1]["text"] == "round 1 saw 1"
    assert lines[1]["turns"][2]["image_sizes"] == [[3, 3]]
    assert lines[1]["outputs"] == rounds


def test_echo_chat_follows_doc_to_messages_rounds(tmp_path):
    model = EchoChat(answer="cup", record=str(tmp_path / "r.jsonl"))
    model.task_dict = {"t": {"test": [DOC]}}
    req = _inst("generate_until_multi_round", ("", _doc_to_messages, {}, 0, "t", "test"))
    (rounds,) = model.generate_until_multi_round([req])
    assert rounds == ["cup", "cup", "cup"]
    line = json.loads((tmp_path / "r.jsonl").read_text())
    assert line["variant"] == "chat"
    assert [t["text"] for t in line["turns"]] == ["first", "chat round 1", "chat round 2"]
    assert [t["n_images"] for t in line["turns"]] == [1, 0, 0]


def test_runaway_rounds_fail_with_the_doc_named():
    model = Echo()
    endless = {"item_id": "x", "rounds": 10**6}
    model.task_dict = {"t": {"test": [endless]}}
    req = _inst("generate_until_multi_round", ("q", {}, _doc_to_visual, _doc_to_text, 0, "t", "test"))
    with pytest.raises(RuntimeError, match=r"task 't' doc 0: no terminal signal"):
        model.generate_until_multi_round([req])


def test_unknown_model_args_are_rejected():
    with pytest.raises(ValueError, match="unknown model_args"):
        Echo(temprature="0.1")


def test_blind_never_calls_doc_to_visual(monkeypatch):
    import lmms_scene.models.blind as blind

    seen = []
    monkeypatch.setattr(blind, "prior_for", lambda task: lambda doc, prompt: seen.append((doc, prompt)) or "prior")

    def exploding_visual(doc):
        raise AssertionError("the blind baseline looked at the image")

    simple = SceneBlind()
    simple.task_dict = {"cooco_sample": {"test": [DOC]}}
    req = _inst("generate_until", ("name it", {}, exploding_visual, 0, "cooco_sample", "test"))
    assert simple.generate_until([req]) == ["prior"]

    chat = SceneBlindChat()
    assert chat.is_simple is False
    chat.task_dict = {"cooco_sample": {"test": [DOC]}}

    def messages(doc, **_kw):
        return [{"role": "user", "content": [{"type": "text", "text": "chat: name it"}]}]

    req = _inst("generate_until", ("unused", messages, {}, 0, "cooco_sample", "test"))
    assert chat.generate_until([req]) == ["prior"]
    assert seen == [(DOC, "name it"), (DOC, "chat: name it")]


def test_blind_finds_the_benchmark_a_task_declares(tmp_path):
    from lmms_scene import registration

    assert benchmark_of("cooco_noise") == "cooco"
    with pytest.raises(ValueError, match="declares no lmms-scene benchmark"):
        benchmark_of("pope")
    # a user's own task, indexed by the harness from another folder, declaring cooco
    own = tmp_path / "mine.yaml"
    own.write_text("task: my_local_run\nmetadata:\n  version: 1.0\n  benchmark: cooco\n")
    registration.record_index({"my_local_run": {"type": "task", "yaml_path": str(own)}})
    assert benchmark_of("my_local_run") == "cooco"
    assert prior_for("my_local_run").__module__ == "lmms_scene.baselines.cooco"
    # a name that merely looks like ours is not enough: the task must declare it
    registration.record_index({"cooco_lookalike": {"type": "task", "yaml_path": str(tmp_path / "absent.yaml")}})
    with pytest.raises(ValueError, match="declares no lmms-scene benchmark"):
        benchmark_of("cooco_lookalike")


@pytest.mark.parametrize(
    "given, expected",
    [
        (["('a', 'b c')"], ["a", "b c"]),  # simple qwen2_5_vl in lmms-eval 0.7.3
        ([["a", "b"]], ["a", "b"]),
        (["a", "b"], ["a", "b"]),
        (["(not a tuple"], ["(not a tuple"]),
        (["(1, 2)"], ["(1, 2)"]),  # not strings: left as the model's text
        ("plain", ["plain"]),
    ],
)
def test_round_outputs_normalises_harness_shapes(given, expected):
    assert round_outputs(given) == expected
