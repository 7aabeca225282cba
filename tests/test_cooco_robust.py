"""COOCO's task path under bad input and load: rows are never raised or silently zero,
outputs are sanitised, process_results is thread-safe, and batch pre-scoring gives the
per-row numbers."""

from __future__ import annotations

import importlib
import math
from concurrent.futures import ThreadPoolExecutor

import datasets
import pytest
from conftest import REPO, clear_cache_keeping_jvm, clear_cache_keeping_models

from lmms_scene import settings
from lmms_scene.data import cooco
from lmms_scene.metrics import clip
from lmms_scene.metrics.cooco import scoring

SAMPLE = REPO / "tasks" / "cooco" / cooco.SAMPLE_FILE


@pytest.fixture
def utils(tiny_clip, monkeypatch):
    monkeypatch.setenv("LMMS_SCENE_CLIP_MODEL", str(tiny_clip))
    return importlib.import_module("lmms_scene.tasks.cooco.utils")


@pytest.fixture(scope="module")
def raw():
    return datasets.load_dataset("parquet", data_files={"test": str(SAMPLE)})["test"]


def answers(docs):
    return [[d["gold_label"] if k % 3 else d["target"]] for k, d in enumerate(docs)]


def _same(a, b):
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=0, abs_tol=1e-6)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return a == b


def test_process_results_from_four_threads_equals_one_thread(utils, raw):
    docs = list(utils.process_docs_noise(raw))
    outs = answers(docs)
    clear_cache_keeping_jvm()  # COOCO loads no JVM: keep it for the next SNUS test
    serial = [utils.process_results(d, o) for d, o in zip(docs, outs)]
    clear_cache_keeping_jvm()
    with ThreadPoolExecutor(4) as pool:
        threaded = list(pool.map(utils.process_results, docs, outs))
    assert len(serial) == len(docs) == 174
    assert all(_same(a, b) for a, b in zip(serial, threaded))


def test_batch_prescoring_gives_the_per_row_numbers_and_is_used(utils, raw, monkeypatch):
    docs = list(utils.process_docs_noise(raw))
    outs = answers(docs)
    clear_cache_keeping_jvm()
    per_row = [utils.process_results(d, o) for d, o in zip(docs, outs)]
    clear_cache_keeping_jvm()
    assert utils.prescore([(d, o[0]) for d, o in zip(docs, outs)]) == len(docs)
    calls = []
    monkeypatch.setattr(scoring, "score_rows", lambda *a, **k: calls.append(a) or [])
    ahead = [utils.process_results(d, o) for d, o in zip(docs, outs)]
    assert calls == []  # every row came from the batch pass
    assert all(_same(a, b) for a, b in zip(per_row, ahead))


def test_no_output_is_recorded_unscored_not_zero(utils, raw):
    doc, other = list(utils.process_docs(raw))[:2]
    entries = utils.process_results(doc, [])
    row = entries[scoring.BREAKDOWN_KEY]
    assert row["scored"] is False and "no model output" in row["unscored_reason"]
    assert row["accuracy"] is None and row["levenshtein_accuracy"] is None and row["refclipscore"] is None
    assert "score" not in entries["accuracy"]  # left out of the headline mean, not counted as 0
    report = scoring.report([row, scoring.score_doc(other, other["gold_label"])])
    assert report["output_statistics"]["n_unscored"] == 1
    assert report["output_statistics"]["unscored"][0]["image_id"] == doc["image_id"]
    assert report["overall"]["accuracy"] == 1.0 and report["overall"]["not_computed"]["accuracy"] == 1


def test_a_bad_image_is_recorded_with_its_reason(utils, raw):
    doc = dict(next(iter(utils.process_docs(raw))))
    doc["width"] += 7  # the stored size no longer matches the pixels
    row = utils.process_results(doc, ["cup"])[scoring.BREAKDOWN_KEY]
    assert row["scored"] is False
    assert doc["image_id"] in row["unscored_reason"] and "decoded image is" in row["unscored_reason"]
    assert row["refclipscore"] is None and row["output"] == "cup"


@pytest.mark.parametrize(
    "output, clean",
    [("\udcff\udcfecup", "cup"), ("cu\x00p", "cu p"), ("mug\x1b[0m", "mug [0m"), ("tea\u0085pot", "tea pot")],
)
def test_unsafe_outputs_are_sanitised_scored_and_flagged(utils, raw, output, clean):
    doc = next(iter(utils.process_docs(raw)))
    row = utils.process_results(doc, [output])[scoring.BREAKDOWN_KEY]
    assert row["scored"] is True and row["output_sanitised"] is True and row["output"] == clean
    assert row["refclipscore"] is not None
    row.get("output").encode("utf-8")  # writable as UTF-8 (a lone surrogate is not)
    assert scoring.report([row])["output_statistics"]["n_sanitised"] == 1


def test_a_missing_clip_stops_when_the_task_is_built(raw, tmp_path, monkeypatch):
    utils = importlib.import_module("lmms_scene.tasks.cooco.utils")
    clear_cache_keeping_models()
    with settings.override(clip_model=str(tmp_path / "no-such-clip")):
        with pytest.raises(
            clip.ClipModelUnavailable, match="Could not load the CLIP checkpoint .*no-such-clip.*hf download"
        ):
            utils.process_docs(raw)
        with pytest.raises(clip.ClipModelUnavailable):
            utils.process_docs_noise(raw)
    with settings.override(clip_model="none"):
        assert len(utils.process_docs(raw)) == 29  # metrics switched off on purpose: nothing to load


def test_clip_functions_validate_their_arguments(tiny_clip):
    from PIL import Image

    image = Image.new("RGB", (16, 16), (10, 200, 30))
    # a bare string is one text, never its characters
    one = clip.ref_clip_components([image], ["A photo depicts a cup"], ["A photo depicts a mug"], model=str(tiny_clip))
    two = clip.ref_clip_components(
        [image], ["A photo depicts a cup"], [["A photo depicts a mug"]], model=str(tiny_clip)
    )
    assert one == two
    assert clip.text_similarity("cup", "mug", model=str(tiny_clip)) == clip.text_similarity(
        ["cup"], ["mug"], model=str(tiny_clip)
    )
    assert len(clip.text_similarity("cup", "mug", model=str(tiny_clip))) == 1
    with pytest.raises(TypeError, match=r"references: expected one reference list per item, got a single string"):
        clip.ref_clip_components([image, image], ["a", "b"], "A photo depicts a mug", model=str(tiny_clip))
    with pytest.raises(TypeError, match=r"candidates\[1\]: expected a string, got int: 3"):
        clip.clip_score([image, image], ["a", 3], model=str(tiny_clip))
    with pytest.raises(ValueError, match=r"batch lengths differ: \{'a': 2, 'b': 1\}"):
        clip.text_similarity(["a", "b"], ["c"], model=str(tiny_clip))


def test_a_registered_clip_is_found_on_the_device_encoder_uses(tiny_clip, monkeypatch):
    from transformers import AutoImageProcessor, AutoTokenizer, CLIPModel

    clear_cache_keeping_models()
    monkeypatch.setattr(clip, "torch_device", lambda requested=None: requested or "cpu-as-if-gpu")
    model = CLIPModel.from_pretrained(str(tiny_clip))
    model.to = lambda *a, **k: model  # the fake device name cannot be moved to
    registered = clip.use_loaded(
        "in-memory",
        model,
        AutoTokenizer.from_pretrained(str(tiny_clip)),
        AutoImageProcessor.from_pretrained(str(tiny_clip)),
    )
    assert registered.device == "cpu-as-if-gpu"
    assert clip.encoder("in-memory") is registered  # no attempt to load "in-memory" from disk
    clear_cache_keeping_models()


def test_aggregations_record_a_failure_instead_of_losing_the_run(utils, raw):
    doc = next(iter(utils.process_docs(raw)))
    a, b = utils.process_results(doc, ["cup"]), utils.process_results(doc, ["mug"])  # one id, two answers
    report = utils.breakdown([a[scoring.BREAKDOWN_KEY], b[scoring.BREAKDOWN_KEY]])
    assert "DuplicateRowError" in report["error"] and "'cup' vs 'mug'" in report["error"]
    assert utils.mean_score([a["accuracy"], b["accuracy"]]) is None


@pytest.mark.slow
def test_an_extreme_image_warns_once_with_its_size():
    from PIL import Image

    clear_cache_keeping_jvm()
    doc = {
        "image": Image.new("RGB", (5000, 40), (90, 90, 90)),
        "image_id": "wide",
        "width": 5000,
        "height": 40,
        "target_bbox": [10.0, 5.0, 20.0, 20.0],
        "noise_area": "target",
        "noise_level": 0.5,
    }
    with pytest.warns(UserWarning, match=r"COOCO wide: 5000x40 image .*padded to a 5000x5000 square"):
        cooco.visual(doc)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        cooco.visual(doc)  # once per image, not once per view
    assert cooco.warn_if_costly({**doc, "image_id": "small", "width": 64, "height": 48}) is None


def test_a_full_embedding_cache_never_loses_this_calls_hits(tiny_clip, monkeypatch):
    from PIL import Image

    clear_cache_keeping_models()
    enc = clip.encoder(str(tiny_clip))
    monkeypatch.setattr(enc._texts, "max_entries", 3)
    monkeypatch.setattr(enc._images, "max_entries", 2)
    first = enc.embed_texts(["a", "b", "c"])
    # "a" is the oldest entry; the three new texts evict it while this call still needs it
    mixed = enc.embed_texts(["a", "d", "e", "f"])
    assert mixed.shape[0] == 4 and float((mixed[0] - first[0]).abs().max()) < 1e-6
    images = [Image.new("RGB", (12, 12), (k * 40, 10, 10)) for k in range(4)]
    base = enc.embed_images(images[:2], keys=["i0", "i1"])
    again = enc.embed_images(images, keys=["i0", "i1", "i2", "i3"])
    assert again.shape[0] == 4 and float((again[0] - base[0]).abs().max()) < 1e-6
    clear_cache_keeping_models()
