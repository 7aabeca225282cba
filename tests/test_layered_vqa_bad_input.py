"""Layered-VQA under bad input (issue 16): the release builder confines and decodes, the
tasks re-check rows at load, the row function never raises and counts what it cannot
score. Each test is a row of docs/reliability.md ("Layered-VQA")."""

from __future__ import annotations

import io
import json
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from PIL import Image, ImageFile

from lmms_scene import cli
from lmms_scene.data import recheck
from lmms_scene.data.layered_vqa import synth as S
from lmms_scene.data.layered_vqa.builder import build_release, max_turns
from lmms_scene.data.layered_vqa.delivery import SCHEDULES, deliver
from lmms_scene.data.layered_vqa.rounds import (
    MAX_LAYERS,
    MAX_ROUNDS,
    REPEATS_KEY,
    KeepRepeats,
    turns_of,
)
from lmms_scene.data.layered_vqa.sample import toy_item
from lmms_scene.data.layered_vqa.schema import COLUMNS, features, n_layers, repeated
from lmms_scene.data.layered_vqa.views import schedule_docs
from lmms_scene.metrics.layered_vqa import aggregation, scoring


@pytest.fixture(scope="module")
def items():
    return S.generate(2, seed=0, size=(64, 48))


def write_release(root: Path, items) -> Path:
    for it in items:
        d = root / "scenes" / it["scene_id"]
        (d / "layers").mkdir(parents=True, exist_ok=True)
        it["composite"].save(d / "composite.png")
        for k, (img, name) in enumerate(zip(it["layers"], it["layer_names"])):
            img.save(d / "layers" / f"{k}_{name.replace(' ', '-')}.png")
    with open(root / "questions.jsonl", "w") as f:
        for it in items:
            f.write(json.dumps({k: it[k] for k in COLUMNS if k not in ("composite", "layers", "layer_names")}) + "\n")
    return root


def edit_questions(root: Path, change) -> None:
    lines = [json.loads(x) for x in (root / "questions.jsonl").read_text().splitlines()]
    (root / "questions.jsonl").write_text("\n".join(json.dumps(change(q)) for q in lines) + "\n")


def build_error(root: Path, out: Path) -> str:
    with pytest.raises((ValueError, FileNotFoundError)) as caught:
        build_release(root, out)
    assert not out.exists()  # nothing written when a check fails
    return str(caught.value)


# -- the builder: paths stay inside the release --------------------------------------------


@pytest.mark.parametrize(
    "scene_id, message",
    [
        ("../../etc", r"line 1: scene '../../etc': field 'scene_id': a scene id names one folder"),
        ("/etc", r"scene '/etc': field 'scene_id': a scene id names one folder"),
        ("..", r"scene '..': field 'scene_id': 'scenes/..' leaves the release folder"),
        ("a\\..\\..\\b", r"a scene id names one folder under scenes/"),
    ],
    ids=["dot-dot-etc", "absolute", "dot-dot", "backslashes"],
)
def test_a_scene_id_that_leaves_the_release_is_refused(tmp_path, items, scene_id, message):
    root = write_release(tmp_path / "rel", items[:1])
    edit_questions(root, lambda q: {**q, "scene_id": scene_id})
    assert re.search(message, build_error(root, tmp_path / "out"))


def test_a_layer_that_is_a_link_out_of_the_release_is_refused(tmp_path, items):
    root = write_release(tmp_path / "rel", items[:1])
    layer = sorted((root / "scenes" / items[0]["scene_id"] / "layers").glob("1_*.png"))[0]
    outside = tmp_path / "elsewhere.png"
    outside.write_bytes(layer.read_bytes())
    layer.unlink()
    layer.symlink_to(outside)
    assert re.search(
        r"layer 1: field 'image': .* resolves to .*outside the release folder", build_error(root, tmp_path / "out")
    )


def test_a_question_file_that_is_a_link_out_of_the_release_is_refused(tmp_path, items):
    root = write_release(tmp_path / "rel", items[:1])
    moved = tmp_path / "questions.jsonl"
    (root / "questions.jsonl").rename(moved)
    (root / "questions.jsonl").symlink_to(moved)
    assert "outside the release folder" in build_error(root, tmp_path / "out")


# -- the builder: every image decoded in full ----------------------------------------------


@pytest.mark.parametrize("which", ["layer", "composite"])
@pytest.mark.parametrize("damage", ["truncated", "html", "stub"])
def test_a_damaged_png_is_a_one_line_error_naming_it(tmp_path, items, capsys, monkeypatch, which, damage):
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)  # as lmms-eval sets it
    root = write_release(tmp_path / "rel", items[:1])
    scene = root / "scenes" / items[0]["scene_id"]
    path = sorted((scene / "layers").glob("1_*.png"))[0] if which == "layer" else scene / "composite.png"
    data = path.read_bytes()
    path.write_bytes(
        {"truncated": data[: int(len(data) * 0.6)], "html": b"<html>gone</html>", "stub": data[:40]}[damage]
    )
    message = build_error(root, tmp_path / "out")
    assert f"image {path} cannot be decoded in full" in message and "line 1: scene" in message
    assert cli.main(["build", "layered-vqa", "--release", str(root), "--out", str(tmp_path / "o2")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lmms-scene build layered-vqa: error: questions.jsonl line 1") and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert ImageFile.LOAD_TRUNCATED_IMAGES is True


# -- the builder: releases every evaluation would fail on -----------------------------------


def test_a_40_layer_scene_is_refused_at_build_naming_the_limit(tmp_path):
    item = toy_item(40, size=(48, 8))
    item["scene_id"], item["question_id"] = "deep", "deep-0"
    root = write_release(tmp_path / "rel", [item])
    message = build_error(root, tmp_path / "out")
    assert (
        f"40 layers, more than the {MAX_LAYERS} a scene may have" in message
        and f"at most {MAX_ROUNDS} rounds" in message
    )


def test_a_question_in_32_shards_is_refused_at_build(tmp_path, items):
    root = write_release(tmp_path / "rel", items[:1])
    edit_questions(
        root, lambda q: {**q, "shards": [{"text": f"part {i}.", "supporting_layers": []} for i in range(MAX_ROUNDS)]}
    )
    message = build_error(root, tmp_path / "out")
    assert (
        "schedule 'recap-q' needs 33 turns, more than the 32 rounds" in message
        and "every evaluation of this release would fail" in message
    )


def test_the_longest_schedule_is_found_by_delivering_every_schedule(items):
    for item in items:
        turns, schedule = max_turns(item)
        assert turns == max(len(deliver(item, s)) for s in SCHEDULES)
        assert turns == max(n_layers(item), len(item["shards"])) + 1 and schedule in ("recap-v", "recap-q")


@pytest.mark.parametrize(
    "line, message",
    [
        ('["synth-0000", "q"]', r"questions.jsonl line 1: expected a JSON object, got list"),
        ('{"scene_id": 7}', r"line 1: scene_id: expected a non-empty string, got 7"),
        (None, r"line 1: .*shards: expected a list of \{text, supporting_layers\}, got 'one shard'"),
    ],
    ids=["line-is-a-list", "scene-id-int", "shards-a-string"],
)
def test_question_lines_that_are_not_questions_name_the_line(tmp_path, items, line, message):
    root = write_release(tmp_path / "rel", items[:1])
    if line is None:
        edit_questions(root, lambda q: {**q, "shards": "one shard"})
    else:
        (root / "questions.jsonl").write_text(line + "\n")
    assert re.search(message, build_error(root, tmp_path / "out"))


def test_a_repeated_question_id_is_found_in_one_pass(tmp_path, items):
    root = write_release(tmp_path / "rel", items[:1])
    edit_questions(root, lambda q: q)
    (root / "questions.jsonl").write_text((root / "questions.jsonl").read_text() * 2)
    assert "repeated question_id" in build_error(root, tmp_path / "out")
    ids = [f"q{k}" for k in range(40_000)] + ["q7", "q3", "q7"]
    assert repeated(ids) == ["q7", "q3"]  # 40k ids: milliseconds (quadratic: 23 s, bench/bench_duplicate_ids.py)


# -- the tasks: rows re-checked at load -------------------------------------------------------


@pytest.fixture(scope="module")
def data(items):
    import datasets

    return datasets.Dataset.from_list(S.generate(3, seed=1, size=(64, 48)), features=features())


def _png(image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def _with_row(data, index: int, change):
    """``data`` with row ``index`` changed by ``change(row)`` (images as PNG bytes)."""
    import datasets

    rows = []
    undecoded = recheck.undecoded(data)
    for k in range(len(data)):
        row = dict(undecoded[k])
        rows.append(change(row) if k == index else row)
    return datasets.Dataset.from_list(rows, features=recheck.undecoded(data).features).cast(data.features)


@pytest.mark.slow
@pytest.mark.parametrize(
    "change, reason",
    [
        (
            lambda r: {
                **r,
                "layers": [r["layers"][0], {"bytes": r["layers"][1]["bytes"][:-40], "path": "1.png"}, *r["layers"][2:]],
            },
            r"field 'layers\[1\]': image 1.png cannot be decoded in full",
        ),
        (
            lambda r: {**r, "composite": {"bytes": b"<html>", "path": "c.png"}},
            r"field 'composite': image c.png cannot be decoded in full \(not an image",
        ),
        (lambda r: {**r, "question_type": "trivia"}, r"question_type: 'trivia' is not one of"),
        (lambda r: {**r, "minimal_sufficient_layers": [99]}, r"minimal_sufficient_layers: layer index 99 out of range"),
        (
            lambda r: {**r, "composite": {"bytes": _png(Image.new("RGB", (10, 10))), "path": "c.png"}},
            r"composite: size 10x10 differs from the layers' 64x48",
        ),
        (lambda r: {**r, "shards": []}, r"shards: expected at least one shard"),
        (
            lambda r: {**r, "layers": [{"bytes": None, "path": "/etc/passwd"}, *r["layers"][1:]]},
            r"the image is a path on this machine \('/etc/passwd'\)",
        ),
    ],
    ids=[
        "truncated-layer",
        "html-composite",
        "unknown-type",
        "index-out-of-range",
        "size-mismatch",
        "no-shards",
        "path-outside",
    ],
)
def test_a_bad_row_at_load_is_a_stand_in_scored_as_unscored(data, change, reason):
    bad = _with_row(data, 1, change)
    with pytest.warns(UserWarning, match=f"1 of {len(data)} rows failed the check"):
        docs = schedule_docs(bad, list(SCHEDULES))
    assert len(docs) == 16 * len(data)  # nothing dropped
    stand_ins = [k for k in range(len(docs)) if recheck.problem_of(docs[k])]
    assert stand_ins == list(range(16, 32)) and re.search(reason, recheck.problem_of(docs[16]))
    from lmms_scene.tasks.layered_vqa import utils

    for k in stand_ins:  # every schedule delivers the stand-in and scores it as unscored
        doc = docs[k]
        assert all(image.size == (recheck.STAND_IN_SIDE,) * 2 for image in utils.doc_to_visual(doc))
        assert recheck.UNUSABLE_PROMPT in utils.doc_to_text(doc)
        n = len(turns_of(doc))
        row = utils.process_results(doc, [["Blue."] * n])["accuracy"]
        assert row["scored"] is False and re.search(reason, row["unscored_reason"]) and row["correct"] is None
    good = docs[0]
    row = utils.process_results(good, [["x"] * len(turns_of(good))])["accuracy"]
    assert row["scored"] is True and row.get("unscored_reason") is None


def test_every_row_bad_a_missing_column_or_a_repeated_item_stops_before_the_model_runs(data):
    with pytest.raises(ValueError, match=rf"the Layered-VQA dataset: nothing to evaluate: all {len(data)} rows failed"):
        schedule_docs(data.map(lambda r: {"question_type": "trivia"}), ["full"])
    with pytest.raises(ValueError, match=r"Layered-VQA data lacks the fields \['answer'\]"):
        schedule_docs(data.remove_columns(["answer"]), ["full"])
    import datasets

    twice = datasets.concatenate_datasets([data, data.select([0])])
    with pytest.raises(ValueError, match=rf"row {len(data)}: item '.*' \(scene '.*'\) repeats row 0"):
        schedule_docs(twice, ["full"])


def test_a_good_dataset_is_not_copied(data):
    assert recheck.PROBLEM not in schedule_docs(data, ["full"]).column_names


# -- the row function: never raises ------------------------------------------------------------


@pytest.fixture(scope="module")
def sample_docs():
    import datasets

    from lmms_scene.tasks.layered_vqa import utils

    raw = datasets.load_dataset(
        "parquet", data_files={"test": str(Path(utils.__file__).parent / "sample" / "layered_vqa_sample.parquet")}
    )["test"]
    return utils.process_docs_sample(raw)


@pytest.fixture
def utils():
    from lmms_scene.tasks.layered_vqa import utils

    return utils


def _doc(docs, schedule: str):
    return next(docs[k] for k in range(len(docs)) if docs[k]["schedule"] == schedule)


@pytest.mark.slow
def test_a_lone_surrogate_and_control_characters_are_sanitised_before_grading(utils, sample_docs):
    doc = _doc(sample_docs, "full")
    row = utils.process_results(doc, [[doc["answer"] + "\ud800\x00"]])["accuracy"]
    assert row["scored"] is True and row["correct"] is True
    assert row["output"] == doc["answer"] + " " and row["output_changes"] == [
        "turn 0: 1 lone surrogate dropped",
        "turn 0: 1 control character replaced by a space",
    ]
    json.dumps(row, ensure_ascii=False).encode("utf-8")


@pytest.mark.slow
@pytest.mark.parametrize(
    "results",
    [{"a": 1}, 42, [{"lmms_scene_repeats": 7}], [[["nested", ["deeper"]]]], None],
    ids=["dict", "int", "repeats-not-a-list", "nested-lists", "none"],
)
def test_results_of_any_shape_never_raise(utils, sample_docs, results):
    doc = _doc(sample_docs, "sharded-q")
    entries = utils.process_results(doc, results)
    row = entries["accuracy"]
    assert set(entries) == set(utils.METRIC_KEYS) and row["correct"] is None and row["scored"] is False
    assert row["unscored_reason"]


@pytest.mark.slow
def test_a_conversation_that_stopped_early_is_counted_unscored_with_its_reason(utils, sample_docs):
    doc = _doc(sample_docs, "sharded-q")
    n = len(turns_of(doc))
    stopped = utils.process_results(doc, [["Got it."]])["accuracy"]
    full = utils.process_results(_doc(sample_docs, "full"), [["A red square."]])["accuracy"]
    assert stopped["unscored_reason"] == f"conversation stopped after 1 of {n} turns"
    rep = aggregation.report([stopped, full])
    assert rep["n_unscored"] == 1 and rep["unscored"][0]["reason"] == stopped["unscored_reason"]
    assert rep["unscored"][0]["question_id"] == doc["question_id"] and rep["n_failed_conversations"] == 1
    # show / report name it with its reason; submit counts it (the run is unrankable)
    from pathlib import Path

    from lmms_scene.metrics.layered_vqa import tables
    from lmms_scene.results import TaskResult, label_runs

    result = TaskResult("layered_vqa_sample", "layered_vqa", {"layered_vqa_report": rep}, {}, "m", "", Path("."))
    view = tables.view([result], label_runs([result])[0])
    assert (
        f"m (layered_vqa_sample): 1 rows not scored (left out of every column): {doc['question_id']}/sharded-q"
        in " ".join(view.notes)
    )
    assert stopped["unscored_reason"] in view.text()
    counts, reasons = tables.failures(rep)
    assert counts["n_unscored"] == 1 and reasons == ["1 failed conversations"]


@pytest.mark.slow
def test_a_grader_failure_is_recorded_not_raised(utils, sample_docs, monkeypatch):
    def broken(*args, **kwargs):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(scoring, "grade", broken)
    row = utils.process_results(_doc(sample_docs, "full"), [["A red square."]])["accuracy"]
    assert row["scored"] is False and row["unscored_reason"] == "RecursionError: maximum recursion depth exceeded"
    assert aggregation.report([row])["n_unscored"] == 1


@pytest.mark.slow
def test_process_results_from_four_threads_equals_one_thread(utils, sample_docs):
    docs = [sample_docs[k] for k in range(32)]
    results = [[["Blue.\ud800"] * len(turns_of(d))] if k % 3 else 42 for k, d in enumerate(docs)]
    serial = [utils.process_results(d, r)["accuracy"] for d, r in zip(docs, results)]
    with ThreadPoolExecutor(4) as pool:
        threaded = [e["accuracy"] for e in pool.map(utils.process_results, docs, results)]
    assert serial == threaded


@pytest.mark.parametrize(
    "text, n_layers, expected",
    [
        ("A red square.\nLayers: 1-3", 4, [1, 2, 3]),
        ("Layers: 1\u20133", 4, [1, 2, 3]),
        ("Layers: 0, 2 to 3", 4, [0, 2, 3]),
        ("Layers: 3-1", 4, [1, 2, 3]),
        ("Layers: 1-3", 3, None),
        ("Layers: 0-99999999999999", 4, None),
    ],
    ids=["hyphen-range", "en-dash-range", "to-range", "reversed", "range-out-of-range", "huge-range"],
)
def test_a_layer_range_selects_every_layer_in_it(text, n_layers, expected):
    assert scoring.parse_selection(text, n_layers)[0] == expected


def test_keep_repeats_sanitises_and_makes_the_raw_record_writable():
    raw = [["Blue.\ud800", "Red."], [("a\ud800", "b")]]
    out = KeepRepeats().apply(raw, None)
    assert out == [{REPEATS_KEY: ["Blue.", "Red."]}, {REPEATS_KEY: [("a", "b")]}]
    assert raw == [["Blue.\ufffd", "Red."], [("a\ufffd", "b")]]  # the harness's own record, in place
    json.dumps(raw, ensure_ascii=False).encode("utf-8")
