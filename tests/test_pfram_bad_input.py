"""Pfram under bad input (issue 11, defects 6 and 7, build item 4).

Every probe builds its own input: random images written with PIL, a tiny random CLIP
(``tiny_clip``), and synthetic feature directories. Each test first shows the defect
condition, then checks the clear error (file, image id, value) or the right number.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from lmms_scene.analysis import adapters as A
from lmms_scene.analysis import extract as X
from lmms_scene.analysis import labels as L
from lmms_scene.analysis import pfram as P
from lmms_scene.analysis import pfram_scores
from lmms_scene.analysis import shards as S
from lmms_scene.analysis.extract import (
    FORMAT,
    FORMAT_VERSION,
    FeatureStore,
    ShardError,
    extract_features,
)
from lmms_scene.cli import pfram as pfram_cli

torch.set_num_threads(1)


# ---------------------------------------------------------------------------
# inputs built here
# ---------------------------------------------------------------------------


@pytest.fixture(scope="module")
def images(tmp_path_factory) -> list[Path]:
    """Eight small random JPEGs, two visual groups (so scores are not all ties)."""
    from PIL import Image

    d = tmp_path_factory.mktemp("images")
    rng = np.random.default_rng(0)
    out = []
    for i in range(8):
        base = np.zeros((40, 40, 3)) + (60 if i % 2 else 190)
        arr = np.clip(base + rng.normal(0, 40, size=(40, 40, 3)), 0, 255).astype(np.uint8)
        p = d / f"im{i}.jpg"
        Image.fromarray(arr).save(p, quality=95)
        out.append(p)
    return out


def _labels(path: Path, ids: list[str]) -> Path:
    path.write_text(json.dumps({i: ["a", "b"] if n % 2 else ["a", "c"] for n, i in enumerate(ids)}))
    return path


@pytest.fixture(scope="module")
def extracted(tiny_clip, images, tmp_path_factory) -> Path:
    """A sound 3-shard features directory (8 images, shard size 3), never modified."""
    out = tmp_path_factory.mktemp("feats") / "f"
    return extract_features(str(tiny_clip), images, out, layers="vision.-1", shard_size=3, batch_size=4)


@pytest.fixture
def feats(extracted, tmp_path) -> Path:
    """A private copy of ``extracted`` to damage."""
    return Path(shutil.copytree(extracted, tmp_path / "copy"))


def _shard(d: Path, k: int) -> Path:
    return d / f"shard_{k:05d}.safetensors"


def _knn_at(d: Path, labels: Path) -> float:
    out = pfram_scores.score_features(d, labels, phis=["knn"], ks=[3], ties=["index"])
    return out["rows"][0]["layers"]["vision.2"]


def _write_raw_shard(path: Path, ids: list[str], layer: str, per_image: list[torch.Tensor], *, v1: bool = False):
    """A shard written by hand (bypassing _write_shard's checks), with valid checksums."""
    from safetensors.torch import save_file

    tensors = {
        layer: torch.cat(per_image).half().contiguous(),
        f"{layer}.n_patches": torch.tensor([t.shape[0] for t in per_image], dtype=torch.int64),
    }
    if v1:  # what lmms-scene wrote before shards carried their layers and checksums
        meta = {"image_ids": json.dumps(ids)}
    else:
        record = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "image_ids": ids,
            "layers": [layer],
            "sha256": {n: S._digest(t) for n, t in tensors.items()},
        }
        meta = {S.SHARD_KEY: json.dumps(record)}
    save_file(tensors, str(path), metadata=meta)


def _synthetic_dir(d: Path, ids: list[str], per_image: list[torch.Tensor], *, version: int = FORMAT_VERSION) -> Path:
    d.mkdir(parents=True)
    meta = {
        "format": FORMAT,
        "format_version": version,
        "model": "synthetic",
        "architecture": "test",
        "layers": ["llm.0"],
        "instruction": None,
        "model_dtype": "float32",
        "processor_kwargs": {},
        "stored_dtype": "float16",
        "image_ids": ids,
        "shard_size": 10_000,
        "lmms_scene_version": "test",
    }
    (d / "meta.json").write_text(json.dumps(meta))
    _write_raw_shard(_shard(d, 0), ids, "llm.0", per_image, v1=version == 1)
    return d


# ---------------------------------------------------------------------------
# defect 6 / build item 4: shards carry and check their ids
# ---------------------------------------------------------------------------


def test_shards_record_their_ids_layers_and_checksums(extracted):
    from safetensors import safe_open

    meta = json.loads((extracted / "meta.json").read_text())
    assert meta["format_version"] == FORMAT_VERSION == 2
    for k in range(3):
        with safe_open(str(_shard(extracted, k)), framework="pt") as f:
            record = json.loads(f.metadata()[S.SHARD_KEY])
            assert record["image_ids"] == meta["image_ids"][3 * k : 3 * k + 3]
            assert record["layers"] == ["vision.2"]
            assert record["sha256"]["vision.2"] == S._digest(f.get_tensor("vision.2"))
    assert FeatureStore(extracted).verify() == []


def test_swapped_shards_are_an_error_naming_the_shard(feats, images, tmp_path):
    labels = _labels(tmp_path / "labels.json", [p.name for p in images])
    good = _knn_at(feats, labels)
    a, b = _shard(feats, 0), _shard(feats, 1)
    tmp = feats / "x"
    a.rename(tmp)
    b.rename(a)
    tmp.rename(b)
    with pytest.raises(ShardError, match=r"shard_00000\.safetensors: holds the images of shard 1") as err:
        _knn_at(feats, labels)
    assert "im3.jpg" in str(err.value) and "swapped" in str(err.value) and "re-run" in str(err.value)
    # extract puts them right again: the same score as before the swap
    with pytest.warns(UserWarning, match="re-extracting") as caught:
        _resume(feats, images)
    assert sorted(str(w.message).split(":")[0] for w in caught) == [str(a), str(b)]
    assert _knn_at(feats, labels) == good


def _resume(feats: Path, images: list[Path]) -> None:
    """The same extract command again (the model is recorded in meta.json)."""
    meta = json.loads((feats / "meta.json").read_text())
    extract_features(meta["model"], images, feats, layers="vision.-1", shard_size=3, batch_size=4)


@pytest.mark.parametrize(
    "damage, reason",
    [
        (lambda b: b[: len(b) // 2], "truncated or corrupt"),  # cut in the tensor data
        (lambda b: b[:100], "truncated or corrupt"),  # cut in the header
        (lambda b: b"", "truncated or corrupt"),  # emptied
        (lambda b: b[:-40] + bytes(x ^ 0xFF for x in b[-40:-30]) + b[-30:], "checksum mismatch"),  # bit rot
    ],
)
def test_corrupt_shard_names_the_file_and_extract_repairs_it(feats, images, tmp_path, damage, reason):
    labels = _labels(tmp_path / "labels.json", [p.name for p in images])
    good = _knn_at(feats, labels)
    path = _shard(feats, 1)
    original = path.read_bytes()
    path.write_bytes(damage(original))
    with pytest.raises(ShardError, match=reason) as err:
        FeatureStore(feats).load("vision.2")
    assert err.value.path == path and str(path) in str(err.value) and "re-extracts that shard" in str(err.value)
    assert [e.path for e in FeatureStore(feats).verify()] == [path]
    # before this fix a second extract exited 0 and left the shard corrupt
    with pytest.warns(UserWarning, match=r"shard_00001\.safetensors: .*re-extracting it"):
        _resume(feats, images)
    assert path.read_bytes() == original  # extraction is deterministic: byte-identical again
    assert FeatureStore(feats).verify() == []
    assert _knn_at(feats, labels) == good


def test_duplicated_shard_is_an_error(feats):
    shutil.copy(_shard(feats, 0), _shard(feats, 1))
    with pytest.raises(ShardError, match=r"shard_00001\.safetensors: holds the images of shard 0"):
        FeatureStore(feats).load("vision.2")


def test_shard_with_missing_reordered_or_repeated_ids(feats):
    store = FeatureStore(feats)
    _, f = store.load("vision.2")
    path = _shard(feats, 2)  # meta.json expects im6.jpg, im7.jpg here
    S._write_shard(path, ["im7.jpg", "im6.jpg"], {"vision.2": [f[7], f[6]]})
    with pytest.raises(ShardError, match=r"another order \(position 0: 'im7.jpg', meta.json: 'im6.jpg'\)"):
        store.load("vision.2")
    S._write_shard(path, ["im6.jpg"], {"vision.2": [f[6]]})
    with pytest.raises(ShardError, match=r"missing \['im7.jpg'\]"):
        store.load("vision.2")
    S._write_shard(path, ["im6.jpg", "im6.jpg"], {"vision.2": [f[6], f[6]]})
    with pytest.raises(ShardError, match=r"lists image id\(s\) \['im6.jpg'\] more than once"):
        store.load("vision.2")
    S._write_shard(path, ["im6.jpg", "zzz.jpg"], {"vision.2": [f[6], f[7]]})
    with pytest.raises(ShardError, match=r"not expected here \['zzz.jpg'\]"):
        store.load("vision.2")
    S._write_shard(path, ["im6.jpg", "im7.jpg"], {"vision.0": [f[6], f[7]]})
    with pytest.raises(ShardError, match=r"holds layers \['vision.0'\], meta.json lists \['vision.2'\]"):
        store.load("vision.2")


def test_missing_and_stray_shards(feats):
    extra = _shard(feats, 7)
    shutil.copy(_shard(feats, 0), extra)
    with pytest.raises(ShardError, match=r"shard_00007\.safetensors: not part of this directory.*8 images in 3 shard"):
        FeatureStore(feats).load("vision.2")
    extra.unlink()
    _shard(feats, 1).unlink()
    with pytest.raises(RuntimeError, match=r"incomplete, 1 shard\(s\) missing \(shard_00001\.safetensors\)"):
        FeatureStore(feats).load("vision.2")


def test_bad_meta_json(feats):
    meta_path = feats / "meta.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text("{ not json")
    with pytest.raises(ValueError, match=r"meta\.json: not valid JSON"):
        FeatureStore(feats)
    meta_path.write_text(json.dumps({**meta, "image_ids": meta["image_ids"][:7] + ["im0.jpg"]}))
    with pytest.raises(ValueError, match=r"meta\.json: image id\(s\) listed more than once: \['im0.jpg'\]"):
        FeatureStore(feats)
    meta_path.write_text(json.dumps({**meta, "format_version": 99}))
    with pytest.raises(ValueError, match="format_version 99.*newer"):
        FeatureStore(feats)


def test_old_format_v1_directories_stay_readable(tmp_path, images):
    ids = ["a.jpg", "b.jpg", "c.jpg", "d.jpg"]
    g = torch.Generator().manual_seed(0)
    per = [torch.randn(3, 8, generator=g) for _ in ids]
    old = _synthetic_dir(tmp_path / "v1", ids, per, version=1)
    new = _synthetic_dir(tmp_path / "v2", ids, per)
    got_ids, got = FeatureStore(old).load("llm.0")
    assert got_ids == ids and all(torch.equal(x, y) for x, y in zip(got, FeatureStore(new).load("llm.0")[1]))
    # v1 shards still carry their ids, so order is checked there too
    _write_raw_shard(_shard(old, 0), ids[::-1], "llm.0", per[::-1], v1=True)
    with pytest.raises(ShardError, match="another order"):
        FeatureStore(old).load("llm.0")
    # extract does not add v2 shards to a v1 directory, and says so
    with pytest.raises(ValueError, match=r"older lmms-scene \(features format v1.*still reads it.*new directory"):
        extract_features("synthetic", images[:4], old, image_ids=ids, layers="llm.0", shard_size=10_000)


def test_nan_in_a_stored_shard_names_shard_and_image_id(tmp_path):
    # images 0 and 1 have no labels; --drop-unlabelled used to report the NaN image by its
    # position among the kept images (index 1 here), i.e. the wrong image
    ids = [f"img{i}.jpg" for i in range(6)]
    g = torch.Generator().manual_seed(1)
    per = [torch.randn(3, 8, generator=g) for _ in ids]
    per[3][1, 2] = float("nan")
    d = _synthetic_dir(tmp_path / "f", ids, per)
    labels = tmp_path / "labels.json"
    labels.write_text(json.dumps({i: ["x", "y"] for i in ids[2:]}))
    with pytest.raises(
        ShardError, match=r"shard_00000\.safetensors: layer llm\.0: image 'img3\.jpg' patch 1 holds nan"
    ):
        pfram_scores.score_features(d, labels, phis=["ndcg"], ks=[2], ties=["index"], drop_unlabelled=True)


def test_library_errors_name_image_ids_not_positions():
    g = torch.Generator().manual_seed(2)
    feats = [torch.randn(3, 8, generator=g) for _ in range(5)]
    ids = [f"img{i}.jpg" for i in range(5)]
    feats[4][2, 1] = float("inf")
    with pytest.raises(ValueError, match=r"NaN or inf in image\(s\) \['img4\.jpg'\].*patch 2, value inf"):
        P.image_similarity(feats, ids=ids)
    feats[4][2, 1] = 1.0
    feats[3][0] = 0.0
    with pytest.raises(ValueError, match=r"zero vector .* at image 'img3\.jpg', patch 0"):
        P.image_similarity(feats, ids=ids)
    feats[3][0] = 1.0
    labels = [{"a"}, {"a"}, {"lonely"}, {"a"}, {"a"}]
    with pytest.raises(ValueError, match=r"NDCG undefined for 1 anchor\(s\) \['img2\.jpg'\]"):
        P.pfram(feats, labels, k=2, ids=ids)
    with pytest.raises(ValueError, match=r"no labels \(images \['img1\.jpg'\]\)"):
        P.pfram(feats, [{"a"}, set(), {"a"}, {"a"}, {"a"}], k=2, ids=ids)
    with pytest.raises(ValueError, match="4 image ids for 5 images"):
        P.image_similarity(feats, ids=ids[:4])
    with pytest.warns(UserWarning, match=r"identical features \(e\.g\. \[\('img0\.jpg', 'img1\.jpg'\)\]"):
        P.pfram([feats[0], feats[0], *feats[2:]], [{"a"}] * 5, k=2, ids=ids)


def test_float16_overflow_names_the_images(tmp_path):
    big = torch.full((2, 4), 1e6)
    with pytest.raises(ValueError, match=r"layer llm\.3: image\(s\) \['b\.jpg'\] .*float16.*1e\+06"):
        S._write_shard(tmp_path / "s.safetensors", ["a.jpg", "b.jpg"], {"llm.3": [torch.ones(2, 4), big]})
    assert not (tmp_path / "s.safetensors").exists()


# ---------------------------------------------------------------------------
# defect 7: extract
# ---------------------------------------------------------------------------


def _truncated_copy(images: list[Path], d: Path, which: int = 3) -> list[Path]:
    d.mkdir()
    out = [Path(shutil.copy(p, d / p.name)) for p in images]
    data = out[which].read_bytes()
    out[which].write_bytes(data[: len(data) // 2])
    return out


@pytest.mark.parametrize("lenient_pil", [False, True])
def test_truncated_image_fails_before_the_model_loads(images, tmp_path, monkeypatch, lenient_pil):
    from PIL import ImageFile

    paths = _truncated_copy(images, tmp_path / "imgs")
    # lmms-eval sets LOAD_TRUNCATED_IMAGES on import: such an image would decode as grey
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", lenient_pil)

    def no_model(*a, **k):
        raise AssertionError("the model was loaded before the images were checked")

    monkeypatch.setattr(X, "_load_adapter", no_model)
    with pytest.raises(ValueError, match=r"1 image\(s\) cannot be decoded.*image 'im3\.jpg' \(.*im3\.jpg\).*truncated"):
        extract_features("any", paths, tmp_path / "f", layers="vision.-1")
    assert ImageFile.LOAD_TRUNCATED_IMAGES is lenient_pil  # restored
    assert not (tmp_path / "f").exists()


def test_cli_extract_truncated_image_and_not_an_image(images, tmp_path, capsys):
    paths = _truncated_copy(images, tmp_path / "imgs")
    (paths[5].parent / "im5.jpg").write_text("not an image")
    rc = pfram_cli.main(
        [
            "extract",
            "--model",
            "unused",
            "--images",
            str(paths[0].parent),
            "--out",
            str(tmp_path / "f"),
            "--layers",
            "vision.-1",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "2 image(s) cannot be decoded" in err and "'im3.jpg'" in err and "'im5.jpg'" in err
    assert "Traceback" not in err


def test_unknown_or_unsupported_model(images, tmp_path, capsys):
    from transformers import BertConfig

    rc = pfram_cli.main(
        [
            "extract",
            "--model",
            str(tmp_path / "no-such-model"),
            "--images",
            str(images[0].parent),
            "--out",
            str(tmp_path / "f"),
            "--layers",
            "vision.-1",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "model: cannot load" in err and "no-such-model" in err and "Traceback" not in err
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="has no loadable config.json"):
        extract_features(str(empty), images[:2], tmp_path / "g", layers="vision.-1")
    bert = tmp_path / "bert"
    BertConfig(hidden_size=8, num_hidden_layers=1, num_attention_heads=1, intermediate_size=8).save_pretrained(bert)
    with pytest.raises(ValueError, match=r"architecture 'bert' is not supported"):
        extract_features(str(bert), images[:2], tmp_path / "h", layers="vision.-1")


def test_forward_failure_names_the_images(images, tmp_path, monkeypatch):
    def run(pil, layers):
        raise ValueError("height and width must be > 28")

    monkeypatch.setattr(X, "_load_adapter", lambda *a, **k: A._Adapter("test", 2, None, run))
    with pytest.raises(RuntimeError, match=r"forward pass failed on image\(s\) \['im0\.jpg', 'im1\.jpg'\].*> 28"):
        extract_features("fake", images[:4], tmp_path / "f", layers="vision.-1", batch_size=2)


@pytest.mark.parametrize("lenient_pil", [False, True])
def test_extraction_never_touches_pil_s_global_truncated_flag(images, tmp_path, monkeypatch, lenient_pil):
    """Images are decoded by data/release.decode_image: PIL's global LOAD_TRUNCATED_IMAGES
    (lmms-eval switches it on at import; other threads may be decoding) is neither set nor
    restored, before, during or after the extraction."""
    from PIL import ImageFile

    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", lenient_pil)
    seen = []

    def run(pil, layers):
        seen.append(ImageFile.LOAD_TRUNCATED_IMAGES)
        return {name: [torch.ones(4, 3) for _ in pil] for name in layers}

    monkeypatch.setattr(X, "_load_adapter", lambda *a, **k: A._Adapter("test", 2, None, run))
    out = extract_features("fake", images[:4], tmp_path / "f", layers="vision.-1", batch_size=2)
    assert seen == [lenient_pil, lenient_pil]  # the flag as the caller left it, during the forward passes
    assert ImageFile.LOAD_TRUNCATED_IMAGES is lenient_pil
    assert FeatureStore(out).load("vision.2")[0] == ["im0.jpg", "im1.jpg", "im2.jpg", "im3.jpg"]


def test_cli_extract_warns_when_it_re_extracts(tiny_clip, images, tmp_path, capsys):
    args = [
        "extract",
        "--model",
        str(tiny_clip),
        "--images",
        str(images[0].parent),
        "--out",
        str(tmp_path / "f"),
        "--layers",
        "vision.-1",
        "--shard-size",
        "3",
    ]
    assert pfram_cli.main(args) == 0
    _shard(tmp_path / "f", 2).write_bytes(b"\0" * 10)
    capsys.readouterr()
    assert pfram_cli.main(args) == 0
    err = capsys.readouterr().err
    assert "lmms-scene pfram extract: warning:" in err and "shard_00002.safetensors" in err and "re-extracting" in err
    assert FeatureStore(tmp_path / "f").verify() == []


def test_extract_bad_arguments(images, tmp_path):
    with pytest.raises(ValueError, match=r"duplicate ids \['x'\]"):
        extract_features("m", images[:2], tmp_path / "f", image_ids=["x", "x"])
    with pytest.raises(ValueError, match="shard_size: expected an integer >= 1, got 0"):
        extract_features("m", images[:2], tmp_path / "f", shard_size=0)


# ---------------------------------------------------------------------------
# defect 7: score, labels, descriptions
# ---------------------------------------------------------------------------


def test_malformed_labels_name_the_file(tmp_path):
    bad = tmp_path / "labels.json"
    bad.write_text('{"a.jpg": ["cat"],\n "b.jpg": ["dog"]\n oops}')
    with pytest.raises(ValueError, match=r"labels\.json: not valid JSON: .* at line 3, column 2"):
        L.read_labels(bad)
    bad.write_bytes(b'{"a.jpg": ["caf\xe9"]}')  # latin-1
    with pytest.raises(ValueError, match=r"labels\.json: not UTF-8 text"):
        L.read_labels(bad)
    bad.write_text(json.dumps({"a.jpg": ["cat"], "b.jpg": "dog"}))
    with pytest.raises(ValueError, match=r"labels\.json: image 'b\.jpg': expected .* got 'dog'"):
        L.read_labels(bad)
    bad.write_text(json.dumps([1, 2, 3]))
    with pytest.raises(ValueError, match=r"labels\.json: expected a JSON object .* got a JSON list"):
        L.read_labels(bad)
    bad.write_text(json.dumps([{"id": "x7", "type": "generative", "truth": ["cat"]}]))
    with pytest.raises(ValueError, match=r"AMBER record 0: 'id' must be an integer, got 'x7'"):
        L.read_labels(bad)
    bad.write_text(json.dumps([{"id": 7, "type": "generative", "truth": "cat"}]))
    with pytest.raises(ValueError, match=r"AMBER record 0 \(id 7\): 'truth' must be a list"):
        L.read_labels(bad)
    coco = {
        "images": [{"id": 1, "file_name": "a.jpg"}],
        "categories": [{"id": 1, "name": "cat"}],
        "annotations": [{"image_id": 1, "category_id": 1}, {"image_id": 1, "category_id": 9}],
    }
    bad.write_text(json.dumps(coco))
    with pytest.raises(ValueError, match=r"annotations\[1\] \(image_id 1\): unknown category_id 9"):
        L.read_labels(bad)
    # a UTF-8 BOM (Excel, Notepad) is not an error
    bad.write_bytes(b"\xef\xbb\xbf" + json.dumps({"a.jpg": ["cat"], "b.jpg": [3]}).encode())
    assert L.read_labels(bad) == {"a.jpg": frozenset({"cat"}), "b.jpg": frozenset({"3"})}


def test_cli_score_bad_labels_and_descriptions(extracted, tmp_path, capsys):
    bad = tmp_path / "labels.json"
    bad.write_text("{ oops")
    assert pfram_cli.main(["score", "--features", str(extracted), "--labels", str(bad), "--k", "3"]) == 2
    assert f"{bad}: not valid JSON" in capsys.readouterr().err
    desc = tmp_path / "desc.json"
    desc.write_text(json.dumps({f"im{i}.jpg": "a photo" for i in range(7)} | {"im7.jpg": 3}))
    assert pfram_cli.main(["score", "--features", str(extracted), "--descriptions", str(desc), "--k", "3"]) == 2
    assert f"{desc}: image 'im7.jpg': expected a non-empty description, got 3" in capsys.readouterr().err


def test_cli_score_bad_settings_fail_before_any_feature_is_read(feats, images, tmp_path, capsys):
    labels = _labels(tmp_path / "labels.json", [p.name for p in images])
    _shard(feats, 0).write_bytes(b"")  # would fail if features were read first
    base = ["score", "--features", str(feats), "--labels", str(labels)]
    for extra, message in [
        (["--k", ""], "k: no value given"),
        (["--k", "0"], "k: expected positive integers, got 0"),
        (["--k", "3", "--phi", "ndgc"], "phi: expected one of ndcg, knn, got 'ndgc'"),
        (["--k", "3", "--ties", "random"], "ties: expected one of index, expected, got 'random'"),
        (["--k", "3", "--bootstrap", "-5"], "bootstrap: expected a non-negative integer, got -5"),
        (["--k", "9"], "k: expected an integer in [1, n - 1] = [1, 7] for the 8 images scored"),
    ]:
        assert pfram_cli.main(base + extra) == 2, extra
        assert message in capsys.readouterr().err, extra
    with pytest.raises(SystemExit) as exc:
        pfram_cli.main(base + ["--k", "abc"])
    assert exc.value.code == 2
    assert "argument --k: expected integers separated by commas, got 'abc'" in capsys.readouterr().err


def test_image_selection_errors(images, tmp_path):
    lst = tmp_path / "list.txt"
    lst.write_text("im0.jpg\nim1.jpg\nim0.jpg\n")
    with pytest.raises(ValueError, match=r"list\.txt: image name\(s\) listed more than once: \['im0\.jpg'\]"):
        pfram_scores.select_images(images[0].parent, image_list=lst)
    lst.write_text("\n\n")
    with pytest.raises(ValueError, match="no images selected"):
        pfram_scores.select_images(images[0].parent, image_list=lst)
    with pytest.raises(FileNotFoundError, match="--image-list"):
        pfram_scores.select_images(images[0].parent, image_list=tmp_path / "absent.txt")


# ---------------------------------------------------------------------------
# defect 7: correlate
# ---------------------------------------------------------------------------


def _score_file(path: Path, model: str, value) -> str:
    row = {"phi": "ndcg", "k": 100, "ties": "index", "input": value, "mean": value, "max": value}
    path.write_text(json.dumps({"model": model, "input_layer": "llm.0", "rows": [row]}))
    return str(path)


def test_cli_correlate_bad_files(tmp_path, capsys):
    good = [_score_file(tmp_path / f"s{i}.json", f"m{i}", v) for i, v in enumerate([0.5, 0.6, 0.7])]
    accs = ["0.8", "0.85", "0.9"]
    lst = tmp_path / "list.json"
    lst.write_text("[1, 2]")
    cases = [
        ([str(lst), *good[1:]], accs, f"{lst}: not a `pfram score` output (a JSON list)"),
        (
            [_score_file(tmp_path / "x.json", "mx", "high"), *good[1:]],
            accs,
            "x.json: Pfram_input for phi=ndcg, k=100, ties=index is 'high', not a number in [0, 1]",
        ),
        ([_score_file(tmp_path / "y.json", "my", 1.7), *good[1:]], accs, "is 1.7, not a number in [0, 1]"),
    ]
    broken = tmp_path / "broken.json"
    broken.write_text('{"model": "m", "rows": [')
    cases.append(([str(broken), *good[1:]], accs, f"{broken}: not valid JSON"))
    res_list = tmp_path / "r_list.json"
    res_list.write_text("[]")
    cases.append((good, [str(res_list), *accs[1:]], f"{res_list}: not an lmms-eval results file (a JSON list)"))
    res_na = tmp_path / "r_na.json"
    res_na.write_text(
        json.dumps({"results": {t: {"pope_accuracy,none": "N/A"} for t in pfram_scores.DEFAULT_POPE_TASKS}})
    )
    cases.append((good, [str(res_na), *accs[1:]], "pope_random: 'pope_accuracy,none' is 'N/A', not a number"))
    cases.append((good, ["nan", *accs[1:]], "outside [0, 1]"))
    for scores, pope, message in cases:
        assert pfram_cli.main(["correlate", "--scores", *scores, "--pope", *pope]) == 2, message
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, (message, err)
    with pytest.raises(KeyError, match=r"s0\.json: no row for phi=knn, k=100, ties=index \(has \['phi=ndcg"):
        pfram_scores.correlate([Path(g) for g in good], accs, phi="knn")
    assert pfram_cli.main(["correlate", "--scores", *good, "--pope", *accs]) == 0
    assert json.loads(capsys.readouterr().out)["pearson_r"] == pytest.approx(1.0)
