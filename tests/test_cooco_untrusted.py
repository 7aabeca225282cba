"""COOCO under the bad inputs of issue 16 (the builder's own probes are in
tests/test_cooco_bad_input.py): image paths confined to the release folder, datasets in
COOCO's layout re-checked when a task loads them, outputs of any shape recorded. Each
test is a row of docs/reliability.md ("COOCO")."""

from __future__ import annotations

import csv
import io
import re
from pathlib import Path

import datasets
import pytest
from conftest import clear_cache_keeping_models
from PIL import Image

from lmms_scene import settings
from lmms_scene.data import cooco, recheck
from lmms_scene.metrics.cooco import scoring

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "tasks" / "cooco" / cooco.SAMPLE_FILE
ORIGINAL = "000000000011_kitchen_cup_original.jpg"
LOW = "000000000011_kitchen_cup_ham_relscore_low.jpg"


@pytest.fixture(scope="module")
def sample():
    return datasets.load_dataset("parquet", data_files={"test": str(SAMPLE)})["test"]


@pytest.fixture
def utils():
    import importlib

    return importlib.import_module("lmms_scene.tasks.cooco.utils")


def folder_with(tmp_path: Path, file_name: str) -> Path:
    folder = tmp_path / "cooco"
    folder.mkdir()
    Image.new("RGB", (40, 30), (10, 200, 30)).save(folder / ORIGINAL, "JPEG")
    with (folder / "metadata.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(
            handle, fieldnames=["file_name", "scene", "target", "swapped_object", "target_bbox", "rel_level"]
        )
        writer.writeheader()
        writer.writerow(
            {
                "file_name": file_name,
                "scene": "kitchen",
                "target": "cup",
                "swapped_object": "",
                "target_bbox": "[5, 5, 10, 8]",
                "rel_level": "original",
            }
        )
    return folder


def build(folder: Path):
    rows, columns = cooco.folder_rows(folder)
    return cooco.build_dataset(rows, columns, base=folder)


# -- the builder: image paths stay inside the release folder ---------------------------------


@pytest.mark.parametrize(
    "file_name, message",
    [
        ("/etc/passwd", r"row 0: field 'file_name': '/etc/passwd' is an absolute path"),
        (f"../outside/{ORIGINAL}", r"row 0: field 'file_name': '../outside/.*' leaves the release folder"),
    ],
    ids=["absolute", "dot-dot"],
)
def test_a_metadata_path_outside_the_release_is_refused(tmp_path, file_name, message):
    folder = folder_with(tmp_path, file_name)
    (tmp_path / "outside").mkdir()
    Image.new("RGB", (40, 30)).save(tmp_path / "outside" / ORIGINAL, "JPEG")
    with pytest.raises(cooco.CoocoBuildError, match=message):
        build(folder)


def test_an_image_that_is_a_link_out_of_the_release_is_refused(tmp_path):
    folder = folder_with(tmp_path, ORIGINAL)
    outside = tmp_path / "secret.jpg"
    (folder / ORIGINAL).rename(outside)
    (folder / ORIGINAL).symlink_to(outside)
    with pytest.raises(
        cooco.CoocoBuildError, match=r"row 0: field 'file_name': .* resolves to .*outside the release folder"
    ):
        build(folder)


def test_a_hub_row_naming_a_file_on_this_machine_is_not_read():
    hub = datasets.Dataset.from_list(
        [
            {
                "image": {"bytes": None, "path": "/etc/passwd"},
                "scene": "kitchen",
                "target": "cup",
                "swapped_object": "ham",
                "target_bbox": [5.0, 5.0, 10.0, 8.0],
                "rel_level": "relscore_low",
                "coco_id": "11",
            },
        ]
    )
    with pytest.raises(cooco.CoocoBuildError, match=r"row 0.*the image is a path on this machine \('/etc/passwd'\)"):
        cooco.ensure_schema(hub)


def test_no_decoder_flips_pils_global_truncated_loading():
    # the builders and the load-time checks decode strictly without touching
    # ImageFile.LOAD_TRUNCATED_IMAGES (lmms-eval sets it; other threads may be decoding)
    offenders = [
        str(p)
        for p in (REPO / "lmms_scene" / "data").rglob("*.py")
        if re.search(r"LOAD_TRUNCATED_IMAGES\s*=", p.read_text())
    ]
    assert offenders == []


# -- the task: a dataset in COOCO's layout is re-checked when it is loaded --------------------


def _changed(sample, index: int, **fields):
    return sample.map(lambda row, i: fields if i == index else {}, with_indices=True)


@pytest.mark.parametrize(
    "index, fields, reason",
    [
        (2, {"width": 103}, r"row 2 \(.*\): fields 'width', 'height': the row says 103x72 but its image is 96x72"),
        (
            1,
            {"target_bbox": [float("nan"), 5.0, 10.0, 8.0]},
            r"row 1 \(.*\): field 'target_bbox': \[nan, 5.0, 10.0, 8.0\] is not 4 finite numbers",
        ),
        (1, {"target_bbox": [90.0, 60.0, 40.0, 40.0]}, r"field 'target_bbox': box .* lies outside the 96x72 image"),
        (1, {"condition": "unrelated"}, r"field 'condition': 'unrelated' is not one of"),
        (1, {"gold_label": ""}, r"field 'gold_label': expected the name a correct answer gives"),
        (1, {"scene": " "}, r"field 'scene': expected a non-empty label"),
        (2, {"height": -3}, r"field 'height': expected a positive integer, got -3"),
    ],
    ids=["width-disagrees", "nan-box", "box-outside", "unknown-condition", "no-gold", "blank-scene", "negative-height"],
)
def test_a_bad_row_of_a_built_dataset_is_recorded_unscored_before_generation(sample, utils, index, fields, reason):
    clear_cache_keeping_models()
    bad = _changed(sample, index, **fields)
    with settings.override(clip_model="none"), pytest.warns(UserWarning, match=r"1 of 36 rows failed the check"):
        docs = utils.process_docs(bad)
    flagged = [d for d in docs if recheck.problem_of(d)]
    assert len(docs) == 29 and len(flagged) == 1  # kept: nothing silently dropped
    doc = flagged[0]
    assert re.search(reason, recheck.problem_of(doc))
    # safe to show (a grey square and a notice instead of a mid-generation exception) ...
    assert utils.doc_to_visual(doc)[0].size == (recheck.STAND_IN_SIDE,) * 2
    assert utils.doc_to_text(doc) == recheck.UNUSABLE_PROMPT
    # ... and recorded unscored with the reason, counted in the breakdown
    with settings.override(clip_model="none"):
        entries = utils.process_results(doc, ["cup"])
        row = entries[scoring.BREAKDOWN_KEY]
        assert (
            row["scored"] is False and re.search(reason, row["unscored_reason"]) and row["levenshtein_accuracy"] is None
        )
        assert "score" not in entries["levenshtein_accuracy"]
        rows = [utils.process_results(d, [d["gold_label"]])[scoring.BREAKDOWN_KEY] for d in docs]
        stats = utils.breakdown(rows)["output_statistics"]
    assert stats["n_unscored"] == 1 and re.search(reason, stats["unscored"][0]["reason"])


def test_a_good_built_dataset_is_returned_as_it_is_and_every_row_bad_is_an_error(sample):
    assert cooco.ensure_schema(sample) is sample
    with pytest.raises(
        cooco.CoocoBuildError,
        match=r"the COOCO dataset: nothing to evaluate: all 36 rows failed .*not 4 finite numbers",
    ):
        cooco.ensure_schema(sample.map(lambda row: {"target_bbox": [float("nan")] * 4}))


def test_the_only_good_rows_excluded_is_nothing_to_evaluate_listing_the_bad_ones(sample):
    n = len(sample)
    bad = sample.map(lambda row, i: {"excluded": True} if i else {"width": 5}, with_indices=True)
    with pytest.raises(
        cooco.CoocoBuildError, match=rf"all {n - 1} rows are excluded .*besides, 1 rows failed the check at load: row 0"
    ):
        cooco.ensure_schema(bad)


def test_an_exif_rotated_image_in_a_built_dataset_is_refused_at_load(sample):
    buffer = io.BytesIO()
    image = Image.new("RGB", (96, 72), (1, 2, 3))
    exif = image.getexif()
    exif[0x0112] = 6
    image.save(buffer, "JPEG", exif=exif.tobytes())
    rotated = (
        sample.cast_column("image", datasets.Image(decode=False))
        .map(
            lambda row, i: {"image": {"bytes": buffer.getvalue(), "path": "r.jpg"}} if i == 0 else {}, with_indices=True
        )
        .cast_column("image", datasets.Image())
    )
    with pytest.warns(UserWarning):
        checked = cooco.ensure_schema(rotated)
    assert "EXIF orientation 6" in recheck.problem_of(checked[0])


def test_a_bad_hub_row_among_good_ones_is_a_stand_in_not_a_lost_run(tmp_path):
    good = io.BytesIO()
    Image.new("RGB", (40, 30), (1, 2, 3)).save(good, "JPEG")
    rows = [
        {
            "image": {"bytes": good.getvalue(), "path": LOW},
            "scene": "kitchen",
            "target": "cup",
            "swapped_object": "ham",
            "target_bbox": [5.0, 5.0, 10.0, 8.0],
            "rel_level": "relscore_low",
        },
        {
            "image": {"bytes": good.getvalue()[:300], "path": ORIGINAL},
            "scene": "kitchen",
            "target": "cup",
            "swapped_object": "",
            "target_bbox": [5.0, 5.0, 10.0, 8.0],
            "rel_level": "original",
        },
    ]
    with pytest.warns(UserWarning, match="1 of 2 rows failed"):
        converted = cooco.ensure_schema(datasets.Dataset.from_list(rows))
    assert converted[0][recheck.PROBLEM] == "" and converted[0]["gold_label"] == "ham"
    assert converted[1]["image_id"] == Path(ORIGINAL).stem and converted[1]["condition"] == "original"
    assert re.search(
        rf"row 1 \({ORIGINAL}\): image {ORIGINAL} cannot be decoded in full", recheck.problem_of(converted[1])
    )


# -- the row function: outputs of any shape ------------------------------------------------------


@pytest.mark.parametrize(
    "results, reason",
    [
        ([["a", "b"]], "the model output is a list of 2 items, not one text"),
        ([("a", "b")], "the model output is a tuple of 2 items, not one text"),
        ([{"text": "cup"}], "the model output is a mapping with keys ['text'], not a text"),
        ([7], "the model output is int '7', not a text"),
        ([None], "no model output for this doc"),
    ],
    ids=["list", "tuple", "mapping", "number", "none"],
)
def test_an_output_that_is_not_one_text_is_recorded_unscored(sample, utils, results, reason):
    with settings.override(clip_model="none"):
        doc = next(iter(utils.process_docs(sample)))
        entries = utils.process_results(doc, results)
    row = entries[scoring.BREAKDOWN_KEY]
    assert row["scored"] is False and row["unscored_reason"] == reason
    assert all("score" not in entries[key] for key in scoring.HEADLINE)
    assert row["output"] is None or isinstance(row["output"], str)
    # show / report name it with its reason; submit counts it (the run is unrankable)
    from pathlib import Path

    from lmms_scene.metrics.cooco import tables as cooco_tables
    from lmms_scene.results import TaskResult, label_runs

    with settings.override(clip_model="none"):
        rep = scoring.report([row])
    result = TaskResult("cooco_sample", "cooco", {scoring.BREAKDOWN_KEY: rep}, {}, "m", "", Path("."))
    view = cooco_tables.view([result], label_runs([result])[0])
    assert (
        f"m (cooco_sample): 1 rows not scored (left out of every column): {row['image_id']}/{row['condition']}"
        in " ".join(view.notes)
    )
    assert reason in view.text()
    counts, reasons = cooco_tables.failures(rep)
    assert counts["n_unscored"] == 1 and "1 rows could not be scored" in reasons


def test_one_text_in_a_list_is_that_text(sample, utils):
    with settings.override(clip_model="none"):
        doc = next(iter(utils.process_docs(sample)))
        row = utils.process_results(doc, [[doc["gold_label"]]])[scoring.BREAKDOWN_KEY]
    assert row["scored"] is True and row["levenshtein_accuracy"] == 1.0
    assert row["output_changes"] == [] and row["prediction"] == scoring.normalise_output(doc["gold_label"])


def test_a_failing_clip_at_scoring_time_is_recorded_not_raised(sample, utils, monkeypatch, tiny_clip):
    from lmms_scene.metrics import clip

    with settings.override(clip_model=str(tiny_clip)):
        doc = next(iter(utils.process_docs(sample)))

        def gone(*args, **kwargs):
            raise clip.ClipModelUnavailable("the checkpoint folder was deleted")

        monkeypatch.setattr(clip, "ref_clip_components", gone)
        clear_cache_keeping_models()
        row = utils.process_results(doc, ["cup"])[scoring.BREAKDOWN_KEY]
    assert row["scored"] is False and "the checkpoint folder was deleted" in row["unscored_reason"]


def test_prescore_leaves_stand_ins_and_odd_outputs_to_process_results(sample, utils):
    bad = _changed(sample, 2, width=103)
    with settings.override(clip_model="none"), pytest.warns(UserWarning):
        docs = list(utils.process_docs(bad))
    pairs = [(d, ["x", "y"] if k == 0 else d["gold_label"]) for k, d in enumerate(docs)]
    with settings.override(clip_model="none"):
        done = utils.prescore(pairs)
    assert done == len(docs) - 2  # the list and the stand-in were left to process_results
