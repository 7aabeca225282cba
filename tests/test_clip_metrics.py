"""CLIPScore, RefCLIPScore and text similarity (lmms_scene.metrics.clip) on a tiny CLIP,
checked against the formulas computed independently with transformers."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch
from PIL import Image

from lmms_scene import cache
from lmms_scene.metrics import clip


def images(n: int = 4) -> list[Image.Image]:
    rng = np.random.default_rng(0)
    noise = Image.fromarray(rng.integers(0, 256, (20, 64, 3), dtype=np.uint8))
    solid = [
        Image.new("RGB", size, colour)
        for size, colour in [((40, 30), (255, 0, 0)), ((30, 50), (0, 0, 255)), ((32, 32), (255, 255, 255))]
    ]
    return (solid + [noise])[:n]


# chosen so that the random tiny CLIP gives positive and negative image-text cosines
CANDIDATES = ["A photo depicts a cup", "A photo depicts a laptop", "blue", "A photo depicts a ham"]
REFERENCES = [
    ["A photo depicts a cup"],
    ["A photo depicts a bowl", "A photo depicts a laptop"],
    ["A photo depicts a chair", "blue sky"],
    ["A photo depicts a car"],
]


@pytest.fixture(scope="module")
def reference_model(tiny_clip):
    from transformers import CLIPModel, CLIPProcessor

    return CLIPModel.from_pretrained(tiny_clip).eval(), CLIPProcessor.from_pretrained(tiny_clip)


def independent_embeddings(reference_model, imgs, texts):
    model, processor = reference_model
    with torch.no_grad():
        out = model(**processor(text=texts, images=imgs, return_tensors="pt", padding=True))
    # CLIPModel.forward returns L2-normalised embeddings
    return out.image_embeds, out.text_embeds


def test_clip_score_matches_formula(tiny_clip, reference_model):
    imgs = images()
    # Random weights: give each image the pool text it matches best (as the RefCLIP test
    # does), plus the fixed candidates, so both branches of max(cos, 0) are exercised.
    img, pool = independent_embeddings(reference_model, imgs, POOL)
    best = [POOL[int(j)] for j in (img @ pool.T).argmax(dim=1)]
    candidates = best + CANDIDATES
    pairs = imgs + imgs
    ours = clip.clip_score(pairs, candidates, model=str(tiny_clip))
    img, txt = independent_embeddings(reference_model, pairs, candidates)
    cos = (img * txt).sum(-1)
    expected = [2.5 * max(float(c), 0.0) for c in cos]
    assert ours == pytest.approx(expected, abs=1e-5)
    # the non-zero branch is really tested: at least two distinct positive cosines
    assert len({round(float(c), 6) for c in cos if c > 0}) >= 2


POOL = [
    "A photo depicts a cup",
    "A photo depicts a laptop",
    "blue",
    "A photo depicts a ham",
    "kitchen",
    "a red car",
    "the dog",
    "A photo depicts an oven",
]


def test_ref_clip_score_matches_formula(tiny_clip, reference_model):
    imgs = images()
    # Random weights: give each image the pool text it matches best, so that some
    # CLIP-S values are positive and the formula is exercised beyond its zero branch.
    img, pool = independent_embeddings(reference_model, imgs, POOL)
    candidates = [POOL[int(j)] for j in (img @ pool.T).argmax(dim=1)]
    references = [refs + [c] if i % 2 else refs for i, (refs, c) in enumerate(zip(REFERENCES, candidates))]
    parts = clip.ref_clip_components(imgs, candidates, references, model=str(tiny_clip))
    img, cand = independent_embeddings(reference_model, imgs, candidates)
    expected = []
    for i, refs in enumerate(references):
        _, ref = independent_embeddings(reference_model, imgs[:1], refs)
        clip_s = 2.5 * max(float(img[i] @ cand[i]), 0.0)
        best = max(float(r @ cand[i]) for r in ref)
        r = max(best, 0.0)
        expected.append(0.0 if clip_s <= 0 or r <= 0 else 2 * clip_s * r / (clip_s + r))
        assert parts.reference_similarity[i] == pytest.approx(best, abs=1e-5)
    assert parts.ref_clip_score == pytest.approx(expected, abs=1e-5)
    assert clip.ref_clip_score(imgs, candidates, references, model=str(tiny_clip)) == parts.ref_clip_score
    # the check means something only if some scores are neither 0 nor equal
    assert len({round(v, 6) for v in expected if v > 0}) >= 2


def test_harmonic_mean_is_zero_when_either_side_is_not_positive():
    assert clip._harmonic(0.0, 0.9) == 0.0
    assert clip._harmonic(0.5, -0.1) == 0.0
    assert clip._harmonic(0.5, 0.5) == pytest.approx(0.5)


def test_text_similarity(tiny_clip, reference_model):
    a = ["A photo depicts a cup", "A photo depicts a cup", "kitchen"]
    b = ["A photo depicts a cup", "A photo depicts a ham", "office"]
    ours = clip.text_similarity(a, b, model=str(tiny_clip))
    assert ours[0] == pytest.approx(1.0, abs=1e-5)
    _, ta = independent_embeddings(reference_model, images(1), a)
    _, tb = independent_embeddings(reference_model, images(1), b)
    assert ours == pytest.approx([float(x) for x in (ta * tb).sum(-1)], abs=1e-5)


def test_repeated_texts_are_embedded_once(tiny_clip, monkeypatch):
    enc = clip.encoder(str(tiny_clip))
    texts = ["a unique label 1", "a unique label 2", "a unique label 1"]
    clip.text_similarity(texts, texts, model=str(tiny_clip))
    calls = []
    original = enc.model.get_text_features
    monkeypatch.setattr(enc.model, "get_text_features", lambda **kw: calls.append(kw) or original(**kw))
    clip.text_similarity(texts, ["a unique label 2"] * 3, model=str(tiny_clip))
    assert calls == []  # all cached
    clip.text_similarity(["a new label"], ["a new label"], model=str(tiny_clip))
    assert len(calls) == 1 and calls[0]["input_ids"].shape[0] == 1


def test_long_text_is_truncated_keeping_end_of_text(tiny_clip, reference_model):
    enc = clip.encoder(str(tiny_clip))
    long_text = " ".join(["laptop kitchen office"] * 300)
    batch = enc.tokenize([long_text, "cup"])
    ids = batch["input_ids"]
    assert ids.shape[1] == 77
    assert int(ids[0, -1]) == enc.tokenizer.eos_token_id
    # independent: first 76 tokens of the untruncated encoding, then end-of-text
    model, processor = reference_model
    full = processor.tokenizer(long_text, truncation=False)["input_ids"]
    assert len(full) > 77
    manual = torch.tensor([full[:76] + [processor.tokenizer.eos_token_id]])
    with torch.no_grad():
        out = model.get_text_features(input_ids=manual)
    expected = out if torch.is_tensor(out) else out.pooler_output
    expected = expected / expected.norm(dim=-1, keepdim=True)
    assert torch.allclose(enc.embed_texts([long_text]), expected, atol=1e-5)


def test_results_are_the_same_from_several_threads(tiny_clip):
    imgs = images()
    serial = clip.ref_clip_score(imgs, CANDIDATES, REFERENCES, model=str(tiny_clip))
    results, errors = {}, []

    def work(i):
        try:
            texts = [c + f" number {i}" for c in CANDIDATES]  # forces concurrent tokenizer use
            clip.text_similarity(texts, CANDIDATES, model=str(tiny_clip))
            results[i] = clip.ref_clip_score(imgs, CANDIDATES, REFERENCES, model=str(tiny_clip))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert all(r == pytest.approx(serial, abs=1e-6) for r in results.values())


def test_checkpoint_comes_from_argument_then_env_then_default(monkeypatch):
    monkeypatch.delenv(clip.CLIP_MODEL_ENV, raising=False)
    assert clip.resolve_model() == "openai/clip-vit-base-patch32"
    monkeypatch.setenv(clip.CLIP_MODEL_ENV, "/models/clip")
    assert clip.resolve_model() == "/models/clip"
    assert clip.resolve_model("other") == "other"


def test_missing_checkpoint_fails_with_instructions(tmp_path):
    with pytest.raises(clip.ClipModelUnavailable, match="LMMS_SCENE_CLIP_MODEL") as info:
        clip.clip_score(images(1), ["A photo depicts a cup"], model=str(tmp_path / "no-such-clip"))
    assert "no fallback" in str(info.value)
    assert ("clip", str(tmp_path / "no-such-clip"), "cpu") not in cache.loaded_keys()


def test_inputs_are_validated_at_the_door(tiny_clip):
    with pytest.raises(ValueError, match="lengths differ"):
        clip.clip_score(images(2), ["one"], model=str(tiny_clip))
    with pytest.raises(ValueError, match="at least one reference"):
        clip.ref_clip_score(images(1), ["one"], [[]], model=str(tiny_clip))
    assert clip.clip_score([], [], model=str(tiny_clip)) == []


def test_named_images_are_encoded_once(tiny_clip, monkeypatch):
    enc = clip.encoder(str(tiny_clip))
    imgs = images(2)
    keys = [("test-crop", 1), ("test-crop", 2)]
    first = clip.clip_score(imgs, CANDIDATES[:2], model=str(tiny_clip), image_keys=keys)
    calls = []
    original = enc.model.get_image_features
    monkeypatch.setattr(enc.model, "get_image_features", lambda **kw: calls.append(kw) or original(**kw))
    again = clip.clip_score(imgs[::-1], CANDIDATES[:2][::-1], model=str(tiny_clip), image_keys=keys[::-1])
    assert calls == [] and again == pytest.approx(first[::-1], abs=1e-6)
    unnamed = clip.clip_score(imgs, CANDIDATES[:2], model=str(tiny_clip))
    assert len(calls) == 1 and unnamed == pytest.approx(first, abs=1e-5)
    with pytest.raises(ValueError, match="keys"):
        enc.embed_images(imgs, keys=keys[:1])
