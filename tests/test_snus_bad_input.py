"""SNUS under bad input (issue 16): every probe builds its own input and checks that it
gets a clear error naming the row, field and value, or a recorded, counted outcome.
Each test is a row of docs/reliability.md ("SNUS")."""

from __future__ import annotations

import io
import json
import math
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from conftest import clear_cache_keeping_models, java_available
from PIL import Image, ImageFile

from lmms_scene import cache, cli, settings
from lmms_scene.data import recheck, snus
from lmms_scene.metrics.snus import scoring as report

needs_java = pytest.mark.skipif(not java_available(), reason="pycocoevalcap needs Java")
SURROGATE = "There is no helmet.\ud800"


def jpeg_bytes(size=(64, 48), seed=0) -> bytes:
    pixels = np.random.default_rng(seed).integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, "JPEG", quality=90)
    return buffer.getvalue()


def release(tmp_path: Path, records: list, images: dict[str, bytes] | None = None, name: str = "release") -> Path:
    folder = tmp_path / name
    folder.mkdir()
    for file, data in (images if images is not None else {"a.jpg": jpeg_bytes()}).items():
        (folder / file).write_bytes(data)
    (folder / "metadata.jsonl").write_text("\n".join(json.dumps(r) for r in records), encoding="utf-8")
    return folder


def record(**overrides) -> dict:
    return {"image": "a.jpg", "caption": "There is no guardrail.", "missing_objects": ["guardrail"], **overrides}


def build_error(tmp_path, records, images=None) -> str:
    folder = release(tmp_path, records, images)
    with pytest.raises((ValueError, FileNotFoundError)) as caught:
        snus.build(folder)
    return str(caught.value)


# -- the builder: paths stay inside the release folder -------------------------------------


@pytest.mark.parametrize(
    "value", ["/etc/passwd", "../../etc/passwd", "sub/../../a.jpg", "C:\\Windows\\win.ini", "~/a.jpg"]
)
def test_build_refuses_an_image_path_outside_the_release(tmp_path, value):
    message = build_error(tmp_path, [record(image=value)])
    assert "row 1" in message and "field 'image'" in message and repr(value) in message
    assert "release folder" in message


def test_build_refuses_a_symbolic_link_out_of_the_release_and_keeps_one_inside(tmp_path):
    outside = tmp_path / "secret.jpg"
    outside.write_bytes(jpeg_bytes())
    folder = release(tmp_path, [record(image="link.jpg"), record(image="inner.jpg", image_id="b")])
    (folder / "link.jpg").symlink_to(outside)
    (folder / "inner.jpg").symlink_to(folder / "a.jpg")
    with pytest.raises(
        ValueError, match=r"row 1 \(link.jpg\): field 'image': 'link.jpg' resolves to .*outside the release folder"
    ):
        snus.build(folder)
    (folder / "link.jpg").unlink()
    (folder / "link.jpg").symlink_to(folder / "a.jpg")  # a link that stays inside is fine
    assert len(snus.build(folder)["test"]) == 2


def test_cli_build_and_publish_dry_run_refuse_etc_passwd_and_write_nothing(tmp_path, capsys):
    folder = release(tmp_path, [record(image="/etc/passwd")])
    assert cli.main(["build", "snus", "--from-folder", str(folder), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lmms-scene build snus: error: row 1") and "'/etc/passwd' is an absolute path" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()
    args = ["publish", "snus", "--repo", "me/snus", "--from-folder", str(folder), "--dry-run", str(tmp_path / "dry")]
    assert cli.main(args) == 2
    assert "'/etc/passwd' is an absolute path" in capsys.readouterr().err
    assert not (tmp_path / "dry").exists()


# -- the builder: every image decoded in full ----------------------------------------------


@pytest.mark.parametrize(
    "data, why",
    [
        (b"<html><body>404 Not Found</body></html>", "not an image file"),
        (b"\xff\xd8\xff\xe0" + bytes(2044), "not an image file"),  # a 2 KB stub with a JPEG signature
        (jpeg_bytes((160, 120))[: int(len(jpeg_bytes((160, 120))) * 0.6)], "truncated"),
    ],
    ids=["html", "2kb-stub", "jpeg-cut-to-60pct"],
)
def test_build_refuses_a_non_image_naming_the_file_even_with_truncated_loading_on(tmp_path, monkeypatch, data, why):
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)  # what lmms-eval does at import
    message = build_error(tmp_path, [record()], {"a.jpg": data})
    assert "row 1" in message and "a.jpg" in message and "cannot be decoded in full" in message and why in message
    assert ImageFile.LOAD_TRUNCATED_IMAGES is True  # never flipped


def test_build_refuses_a_format_it_cannot_check(tmp_path):
    buffer = io.BytesIO()
    Image.new("RGB", (8, 8)).save(buffer, "GIF")
    message = build_error(tmp_path, [record(image="a.gif")], {"a.gif": buffer.getvalue()})
    assert "format GIF" in message and "JPEG, PNG, WEBP" in message


# -- the builder: metadata that is not what it should be -------------------------------------


@pytest.mark.parametrize(
    "line, message",
    [
        ('["a.jpg", "There is no rail."]', r"line 1: expected a JSON object, got list"),
        (
            '{"image": 5, "caption": "No rail."}',
            r"row 1 \(\?\): field 'image': expected a file name relative to the release folder, got int 5",
        ),
        ('{"image": {"bytes": "x"}, "caption": "No rail."}', r"field 'image': expected a file name .* got dict"),
        ('{"image": "a.jpg", "caption": "No rail.", "image_id": {"x": 1}}', r"field 'image_id': expected a string"),
        ('{"image": "a.jpg", "caption": "No rail.", "split": 3}', r"row 1: field 'split': expected one of .* got 3"),
        ('{"image": "a.jpg", "caption": "No rail.", "scene": ["site"]}', r"field 'scene': expected a string, got list"),
        ('{"image": "a.jpg", "caption": ["No rail."]}', r"field 'caption': expected a non-empty negative caption"),
        ('{"image": "a.jpg"', r"line 1: not JSON"),
    ],
    ids=[
        "line-is-a-list",
        "image-is-5",
        "image-is-a-dict",
        "image-id-dict",
        "split-int",
        "scene-list",
        "caption-list",
        "not-json",
    ],
)
def test_build_errors_name_the_line_field_and_value(tmp_path, capsys, line, message):
    folder = release(tmp_path, [])
    (folder / "metadata.jsonl").write_text(line + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=message):
        snus.build(folder)
    assert cli.main(["build", "snus", "--from-folder", str(folder), "--out", str(tmp_path / "o")]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_build_refuses_ids_that_are_one_id_once_written(tmp_path):
    message = build_error(tmp_path, [record(image_id=1), record(image_id="1")])
    assert "row 2: field 'image_id': duplicate '1' (first in row 1)" in message


def test_metadata_json_must_be_a_list_of_objects_and_utf8(tmp_path):
    folder = release(tmp_path, [])
    (folder / "metadata.jsonl").unlink()
    (folder / "metadata.json").write_text('[{"image": "a.jpg", "caption": "No rail."}, 7]')
    with pytest.raises(ValueError, match=r"metadata.json item 1: expected a JSON object"):
        snus.build(folder)
    (folder / "metadata.json").write_bytes('[{"image": "a.jpg", "caption": "Kein Geländer."}]'.encode("latin-1"))
    with pytest.raises(ValueError, match=r"metadata.json: not UTF-8 \(byte 0xe4"):
        snus.build(folder)


def test_rebuilding_into_the_same_folder_leaves_no_stale_split_for_publish(tmp_path):
    from lmms_scene.report import publish

    folder = release(tmp_path, [record(split="train"), record(image_id="b", split="test")])
    out = tmp_path / "out"
    assert cli.main(["build", "snus", "--from-folder", str(folder), "--out", str(out)]) == 0
    assert sorted(publish.read_splits(out)) == ["test", "train"]
    (folder / "metadata.jsonl").write_text(json.dumps(record(split="validation")))
    assert cli.main(["build", "snus", "--from-folder", str(folder), "--out", str(out)]) == 0
    assert sorted(publish.read_splits(out)) == ["validation"]  # the old train and test splits are gone
    assert not list((out / "tasks").glob("*.yaml"))  # and the task that read the old test split


# -- the task: rows re-checked when the dataset is loaded -------------------------------------


def _png_cell(colour=(200, 10, 10)) -> dict:
    buffer = io.BytesIO()
    Image.new("RGB", (16, 12), colour).save(buffer, "PNG")
    return {"bytes": buffer.getvalue(), "path": "x.png"}


def _dataset(rows):
    from datasets import Dataset

    return Dataset.from_list(rows, features=snus.features())


def _row(i, **overrides):
    return {
        "image_id": f"r{i}",
        "image": _png_cell(),
        "caption": "There is no guardrail.",
        "missing_objects": ["guardrail"],
        "missing_attributes": [],
        "missing_relations": [],
        "scene": "site",
        **overrides,
    }


@pytest.mark.parametrize(
    "overrides, reason",
    [
        ({"caption": "   "}, r"SNUS row 1 \(r1\): field 'caption': empty reference caption"),
        (
            {"image": {"bytes": _png_cell()["bytes"][:-30], "path": "x.png"}},
            r"SNUS row 1 \(r1\): field 'image': image x.png cannot be decoded in full",
        ),
        (
            {"image": {"bytes": b"<html>", "path": "x.png"}},
            r"field 'image': image x.png cannot be decoded in full \(not an image file",
        ),
        (
            {"image": {"bytes": None, "path": "/etc/passwd"}},
            r"field 'image': the image is a path on this machine \('/etc/passwd'\)",
        ),
        ({"image_id": ""}, r"SNUS row 1: field 'image_id': expected a non-empty string"),
    ],
    ids=["empty-caption", "truncated-png", "html-bytes", "path-outside", "empty-id"],
)
def test_a_bad_row_at_load_becomes_a_stand_in_recorded_unscored(overrides, reason):
    data = _dataset([_row(0), _row(1, **overrides), _row(2)])
    with pytest.warns(UserWarning, match="1 of 3 rows failed the check"):
        checked = snus.ensure_schema(data)
    assert len(checked) == 3 and checked[0]["image_id"] == "r0"  # nothing dropped, order kept
    bad = checked[1]
    import re

    assert re.search(reason, recheck.problem_of(bad)) and not recheck.problem_of(checked[2])
    from lmms_scene.tasks.snus import utils

    assert utils.doc_to_text(bad) == recheck.UNUSABLE_PROMPT
    assert utils.doc_to_visual(bad)[0].size == (recheck.STAND_IN_SIDE,) * 2
    row = utils.process_results(bad, ["There is no guardrail."])["CESG"]
    assert row["scored"] is False and re.search(reason, row["unscored_reason"]) and row["scores"]["CESG"] is None


def test_a_good_dataset_is_returned_as_it_is_and_every_row_bad_is_an_error():
    good = _dataset([_row(0), _row(1)])
    assert snus.ensure_schema(good) is good
    with pytest.raises(
        ValueError, match=r"the SNUS dataset: nothing to evaluate: all 2 rows failed .*empty reference caption"
    ):
        snus.ensure_schema(_dataset([_row(0, caption=""), _row(1, caption=" ")]))


def test_a_repeated_image_id_or_a_missing_column_stops_before_the_model_runs():
    with pytest.raises(ValueError, match=r"SNUS row 1: field 'image_id': 'r0' repeats row 0"):
        snus.ensure_schema(_dataset([_row(0), _row(0)]))
    with pytest.raises(ValueError, match=r"SNUS data lacks the fields \['caption'\]"):
        snus.ensure_schema(_dataset([_row(0)]).remove_columns(["caption"]))


# -- the row function: never raises, records what it cannot score ----------------------------


@pytest.fixture(scope="module")
def docs():
    import datasets

    return list(
        datasets.load_dataset("parquet", data_files={"test": str(snus.tasks_folder() / snus.SAMPLE_FILE)}, split="test")
    )


@pytest.fixture
def utils():
    import importlib

    return importlib.import_module("lmms_scene.tasks.snus.utils")


@pytest.mark.slow
def test_a_lone_surrogate_reaches_no_tokenizer_with_clip_on(utils, docs, tiny_clip):
    clear_cache_keeping_models()
    with settings.override(clip_model=str(tiny_clip)):
        row = utils.process_results(docs[0], [SURROGATE])["CESG"]
    assert row["scored"] is True and row["output"] == "There is no helmet." and row["output_sanitised"] is True
    assert row["output_changes"] == ["1 lone surrogate dropped"]
    assert row["clipscore"] is not None and row["clip_model"] == str(tiny_clip)
    json.dumps(row, ensure_ascii=False).encode("utf-8")  # writable, as the samples file needs


@pytest.mark.slow
@needs_java
def test_a_lone_surrogate_with_clip_off_leaves_every_metric_computed(utils, docs):
    clear_cache_keeping_models()
    with settings.override(clip_model="none"):
        items = [
            utils.process_results(d, [SURROGATE if k == 0 else d["caption"]])["CESG"] for k, d in enumerate(docs[:4])
        ]
        values = {key: getattr(utils, key)(items) for key in utils.METRICS if key not in ("snus_report", "clipscore")}
        rep = utils.snus_report(items)
    assert "error" not in rep and all(isinstance(v, float) and math.isfinite(v) for v in values.values()), values
    assert rep["n_unscored"] == 0 and rep["n"] == 4


@pytest.mark.slow
@needs_java
@pytest.mark.parametrize(
    "results, reason",
    [
        ([["There is no rail.", "There is no net."]], "the model output is a list of 2 items, not one text"),
        ([], "no model output for this doc"),
        ([None], "no model output for this doc"),
        ([{"text": "There is no rail."}], "the model output is a mapping"),
        ([42], "the model output is int"),
    ],
    ids=["list", "empty-results", "none", "mapping", "number"],
)
def test_an_output_that_is_not_one_text_is_recorded_unscored_and_counted(utils, docs, results, reason):
    clear_cache_keeping_models()
    with settings.override(clip_model="none"):
        bad = utils.process_results(docs[0], results)["CESG"]
        assert bad["scored"] is False and reason in bad["unscored_reason"]
        assert all(v is None for k, v in bad["scores"].items() if k != "status")
        items = [bad] + [utils.process_results(d, [d["caption"]])["CESG"] for d in docs[1:3]]
        rep = utils.snus_report(items)
        cesg = utils.CESG(items)
    assert rep["n_unscored"] == 1 and rep["unscored"] == [
        {"image_id": docs[0]["image_id"], "reason": bad["unscored_reason"]}
    ]
    assert rep["n"] == 2 and rep["model"]["counts"]["n"] == 2  # left out of the corpus, never a 0
    assert cesg == pytest.approx(1.0)
    from lmms_scene.metrics.snus import tables as snus_tables
    from lmms_scene.results import TaskResult, label_runs

    result = TaskResult("snus_sample", "snus", {"snus_report": rep}, {}, "m", "", Path("."))
    view = snus_tables.view([result], label_runs([result])[0])
    assert (
        f"m (snus_sample): 1 rows not scored (left out of every column): {docs[0]['image_id']}: {bad['unscored_reason']}"
        in view.notes
    )
    assert f"1 rows not scored (left out of every column): {docs[0]['image_id']}: {reason}" in view.text()
    outcomes = dict(zip(view.tables[-1].header, view.tables[-1].rows[0], strict=True))
    assert outcomes["unscored"] == 1 and outcomes["rows"] == 2  # counted apart, never a scored 0
    # a row that could not be scored makes the run unrankable
    assert any("1 rows could not be scored" in why for why in snus_tables.failures(rep)[1])


@pytest.mark.slow
@pytest.mark.parametrize(
    "output, clean, change",
    [
        ("There is no rail.\x00\x1b[31m", "There is no rail.  [31m", "2 control characters replaced by a space"),
        ("There is no rail.\ufffd", "There is no rail.", "1 replacement character (U+FFFD) dropped"),
        ("There is no rail. " * 5000, None, "cut at 20000 of 90000 characters"),
        (b"There is no rail.\xff", "There is no rail.", "bytes decoded as UTF-8"),
    ],
    ids=["control-characters", "replacement-character", "90k-characters", "bytes"],
)
def test_unsafe_outputs_are_sanitised_scored_and_flagged(utils, docs, output, clean, change):
    with settings.override(clip_model="none"):
        row = utils.process_results(docs[0], [output])["CESG"]
    assert row["scored"] is True and row["output_sanitised"] is True and change in row["output_changes"]
    if clean is not None:
        assert row["output"] == clean
    assert len(row["output"]) <= 20_000 and row["scores"]["CESG"] is not None


@pytest.mark.slow
def test_a_failing_clip_leaves_the_row_scored_without_its_clipscore(utils, docs, tiny_clip, monkeypatch):
    from lmms_scene.metrics import clip

    def broken(*args, **kwargs):
        raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(clip, "clip_score", broken)
    with settings.override(clip_model=str(tiny_clip)):
        row = utils.process_results(docs[0], [docs[0]["caption"]])["CESG"]
    assert row["scored"] is True and row["clipscore"] is None and "CUDA out of memory" in row["clip_error"]


@pytest.mark.slow
def test_an_unexpected_failure_in_the_row_function_is_recorded_not_raised(utils, docs, monkeypatch):
    def broken(*args, **kwargs):
        raise MemoryError("no memory left")

    monkeypatch.setattr(report, "_scored_row", broken)
    row = utils.process_results(docs[0], ["There is no rail."])["CESG"]
    assert row["scored"] is False and row["unscored_reason"] == "MemoryError: no memory left"


@pytest.mark.slow
def test_process_results_from_four_threads_equals_one_thread_with_bad_outputs(utils, docs):
    outputs = [[SURROGATE], [["a", "b"]], ["There is no net.\x00"], []] * 3
    with settings.override(clip_model="none"):
        clear_cache_keeping_models()  # every memo gone; the one-thread pass need not reload the models
        serial = [utils.process_results(d, o)["CESG"] for d, o in zip(docs, outputs)]
        cache.clear()  # the four threads race to load every model again
        with ThreadPoolExecutor(4) as pool:
            threaded = [r["CESG"] for r in pool.map(utils.process_results, docs, outputs)]
    strip = lambda r: (
        {k: v for k, v in r.items() if k != "scores"}
        | {"scores": {k: v for k, v in r["scores"].items() if k != "row_scores_from"}}
    )
    # the same rows, the same reasons, the same scores; the sentence encoder pads each batch
    # to its longest phrase, so float32 embeddings of a phrase differ in the 8th digit with
    # the batch it was embedded in (threads interleave batches differently): not a thread bug
    assert len(serial) == len(threaded)
    for one, four in zip(serial, threaded):
        a, b = strip(one), strip(four)
        assert {k: v for k, v in a.items() if k != "scores"} == {k: v for k, v in b.items() if k != "scores"}
        assert a["scores"].keys() == b["scores"].keys()
        for key, value in a["scores"].items():
            if isinstance(value, float):
                assert b["scores"][key] == pytest.approx(value, abs=1e-6), (a["image_id"], key)
            else:
                assert b["scores"][key] == value, (a["image_id"], key)
    assert sum(r["scored"] is False for r in serial) == 6


@pytest.mark.slow
@needs_java
def test_a_corpus_with_nothing_scored_reports_it_instead_of_failing(utils, docs):
    with settings.override(clip_model="none"):
        items = [utils.process_results(d, [None])["CESG"] for d in docs[:3]]
        rep = utils.snus_report(items)
        assert utils.CESG(items) is None and utils.bleu4(items) is None
    assert "error" not in rep and rep["n"] == 0 and rep["n_rows"] == 3 and rep["n_unscored"] == 3


# -- the commands ----------------------------------------------------------------------------


def test_snus_ac_and_cesg_refuse_ids_that_are_one_id_once_written(tmp_path, capsys):
    refs = tmp_path / "refs.jsonl"
    refs.write_text('{"id": 1, "references": ["There is no rail."]}\n{"id": "1", "references": ["There is no net."]}\n')
    assert cli.main(["snus-ac", "--input", str(refs)]) == 2
    assert "line 2: field 'id': '1' repeats the id 1 of line 1" in capsys.readouterr().err
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(
        '{"id": 1, "prediction": "x", "references": ["y"]}\n{"id": "1", "prediction": "x", "references": ["y"]}\n'
    )
    assert cli.main(["cesg", "--input", str(pairs)]) == 2
    assert "repeats the id 1 of line 1" in capsys.readouterr().err


def test_the_duplicate_id_check_is_one_pass_over_40k_ids():
    from lmms_scene.cli.snus import _unique_ids

    rows = [{"id": f"id-{k}", "_line": k + 1} for k in range(40_000)]
    _unique_ids(
        rows, Path("ids.jsonl")
    )  # 40k distinct ids: accepted (quadratic took 23 s; bench/bench_duplicate_ids.py)
    rows.append({"id": "id-7", "_line": 40_001})
    with pytest.raises(ValueError, match=r"line 40001: field 'id': 'id-7' repeats the id 'id-7' of line 8"):
        _unique_ids(rows, Path("ids.jsonl"))


def _agreement_file(tmp_path, lines) -> Path:
    path = tmp_path / "agree.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_agreement_takes_metric_columns_from_every_row_not_row_0(tmp_path, capsys):
    lines = ['{"image_id": "a", "human": 1.0}'] + [
        json.dumps({"image_id": f"i{k // 2}", "human": float(k % 3), "late": float(k % 3) + 0.1 * (k % 2)})
        for k in range(8)
    ]
    assert cli.main(["agreement", "--input", str(_agreement_file(tmp_path, lines)), "--n-boot", "20", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert list(out["agreement"]["metrics"]) == ["late"] and out["agreement"]["metrics"]["late"]["excluded"] == 1


def test_agreement_refuses_infinity_naming_the_line_and_field(tmp_path, capsys):
    lines = ['{"image_id": "a", "human": 1, "CESG": 0.5}', '{"image_id": "b", "human": 0, "CESG": Infinity}']
    assert cli.main(["agreement", "--input", str(_agreement_file(tmp_path, lines)), "--n-boot", "20"]) == 2
    assert "agree.jsonl, line 2: field 'CESG': inf is not a score" in capsys.readouterr().err


def test_agreement_json_is_strict_json_with_null_for_what_is_not_computed(tmp_path, capsys):
    # a constant metric: no correlation can be computed; scipy's NaN must not reach the JSON
    lines = [json.dumps({"image_id": f"i{k}", "human": float(k), "CESG": 0.5}) for k in range(4)]
    assert cli.main(["agreement", "--input", str(_agreement_file(tmp_path, lines)), "--n-boot", "20", "--json"]) == 0
    text = capsys.readouterr().out
    assert "NaN" not in text and "Infinity" not in text
    entry = json.loads(text)["agreement"]["metrics"]["CESG"]
    assert entry["pearson_r"]["value"] is None and entry["n"] == 4


# -- the harness: a foreign model's lone surrogate no longer empties the samples file ------------


@pytest.mark.e2e
@needs_java
def test_a_replayed_lone_surrogate_keeps_the_samples_file_and_every_metric(run_lmms_eval, tmp_path, docs):
    from conftest import find_samples

    # a samples file as another tool (or a JSON API) writes it: "\ud800" is valid JSON
    saved = tmp_path / "saved"
    saved.mkdir()
    lines = [json.dumps({"doc_id": k, "resps": [[SURROGATE if k == 0 else d["caption"]]]}) for k, d in enumerate(docs)]
    (saved / "2026_samples_snus_sample.jsonl").write_text("\n".join(lines) + "\n")
    assert "\\ud800" in lines[0]
    code, results, out, log = run_lmms_eval(
        ["--model", "scene_from_samples", "--model_args", f"samples={saved}", "--tasks", "snus_sample"],
        env={"LMMS_SCENE_CLIP_MODEL": "none"},
    )
    assert code == 0, log[-3000:]
    assert "Could not save sample results" not in log
    res = results["results"]["snus_sample"]
    assert isinstance(res["CESG,none"], float) and res["snus_report,none"]["n_unscored"] == 0
    rows = find_samples(out, "snus_sample")
    assert len(rows) == 12
    first = next(r for r in rows if r["doc_id"] == 0)
    assert first["CESG"]["output"] == "There is no helmet." and first["CESG"]["output_sanitised"] is True
    # the raw record, made writable (lmms-eval logs it once, as filtered_resps, when the filters changed nothing else)
    assert "There is no helmet.\ufffd" in json.dumps(first.get("resps", first["filtered_resps"]), ensure_ascii=False)
    assert os.path.getsize(next(out.rglob("*_samples_snus_sample.jsonl"))) > 0


@pytest.mark.slow
@needs_java
def test_a_submission_recomputes_and_counts_unscored_rows_as_the_report_does(utils, docs):
    """The leaderboard's check (snus_tables.recompute, row_failures) reads an unscored row
    as the stored report does: left out of the means, counted as unscored."""
    from types import SimpleNamespace

    from lmms_scene.metrics.snus import tables as snus_tables

    with settings.override(clip_model="none"):
        items = [utils.process_results(d, ["There is no net."])["CESG"] for d in docs[:4]]
        items[1] = utils.process_results(docs[1], [["a", "b"]])["CESG"]
        stored = utils.snus_report(items)
    rows = snus_tables.verification_rows(SimpleNamespace(rows=lambda key: items))
    again = snus_tables.recompute(rows)
    assert again["cell"]["CESG"] == pytest.approx(stored["model"]["summary"]["CESG"], abs=1e-9)
    assert again["cell"]["ci95"]["CESG"] == pytest.approx(stored["model"]["summary"]["ci95"]["CESG"], abs=1e-9)
    assert (
        snus_tables.recompute([r for r in rows if r["status"] != "unscored"])["cell"]["CESG"] == again["cell"]["CESG"]
    )
    assert snus_tables.row_failures(rows)["n_unscored"] == 1 == stored["n_unscored"]
