"""Pfram core: similarity, NDCG, mutual k-NN, ties, bad input, labels readers, CLI.

The reference values come from straightforward loop implementations written
here independently of lmms_scene.analysis.pfram (per-pair similarity, python
``sorted`` rankings, explicit sets, and Monte Carlo tie-breaking).
"""

from __future__ import annotations

import math
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from lmms_scene.analysis import pfram as P

torch.set_num_threads(1)

FIXTURES = Path(__file__).resolve().parents[1] / ".." / "shared" / "fixtures"
AMBER = FIXTURES / "amber" / "annotations.json"
COCO = FIXTURES / "tiny_coco" / "annotations" / "instances_val2017.json"


# ---------------------------------------------------------------------------
# independent reference implementations
# ---------------------------------------------------------------------------


def loop_similarity(feats: list[np.ndarray]) -> np.ndarray:
    n = len(feats)
    out = np.zeros((n, n))
    unit = [f / np.linalg.norm(f, axis=1, keepdims=True) for f in feats]
    for a in range(n):
        for b in range(n):
            best = []
            for va in unit[a]:
                best.append(max(float(va @ vb) for vb in unit[b]))
            out[a, b] = sum(best) / len(best)
    return out


def ranked(scores: np.ndarray, anchor: int) -> list[int]:
    cands = [j for j in range(len(scores)) if j != anchor]
    return sorted(cands, key=lambda j: (-scores[j], j))


def ref_ndcg(sim: np.ndarray, rel: np.ndarray, k: int) -> list[float]:
    out = []
    for a in range(len(sim)):
        order = ranked(sim[a], a)
        dcg = sum(rel[a, j] / math.log2(pos + 2) for pos, j in enumerate(order[:k]))
        ideal = sorted((rel[a, j] for j in range(len(sim)) if j != a), reverse=True)
        idcg = sum(g / math.log2(pos + 2) for pos, g in enumerate(ideal[:k]))
        out.append(dcg / idcg)
    return out


def ref_knn(sim: np.ndarray, rel: np.ndarray, k: int) -> list[float]:
    return [len(set(ranked(sim[a], a)[:k]) & set(ranked(rel[a], a)[:k])) / k for a in range(len(sim))]


def mc_random_ties(sim: np.ndarray, rel: np.ndarray, k: int, phi: str, draws: int, seed: int) -> np.ndarray:
    """Average score over random tie-breaks (a random permutation decides among equals)."""
    rng = random.Random(seed)
    n = len(sim)
    total = np.zeros(n)
    for _ in range(draws):
        for a in range(n):
            cands = [j for j in range(n) if j != a]
            kf = {j: rng.random() for j in cands}
            kg = {j: rng.random() for j in cands}
            of = sorted(cands, key=lambda j: (-sim[a, j], kf[j]))
            og = sorted(cands, key=lambda j: (-rel[a, j], kg[j]))
            if phi == "knn":
                total[a] += len(set(of[:k]) & set(og[:k])) / k
            else:
                dcg = sum(rel[a, j] / math.log2(p + 2) for p, j in enumerate(of[:k]))
                idcg = sum(rel[a, j] / math.log2(p + 2) for p, j in enumerate(og[:k]))
                total[a] += dcg / idcg
    return total / draws


def planted(n: int = 40, n_patch: int = 6, d: int = 16, n_labels: int = 10, seed: int = 0):
    """Images whose patches are noisy copies of their objects' prototype vectors."""
    rng = np.random.default_rng(seed)
    protos = rng.normal(size=(n_labels, d))
    labels, feats = [], []
    for _ in range(n):
        objs = sorted(rng.choice(n_labels, size=int(rng.integers(1, 5)), replace=False).tolist())
        labels.append({f"obj{o}" for o in objs})
        idx = rng.choice(objs, size=n_patch)
        feats.append(protos[idx] + 0.8 * rng.normal(size=(n_patch, d)))
    return np.stack(feats).astype(np.float32), labels


def shared_counts(labels):
    n = len(labels)
    return np.array([[len(labels[a] & labels[b]) for b in range(n)] for a in range(n)], dtype=float)


# ---------------------------------------------------------------------------
# similarity
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("block_bytes", [1, 5_000, P.DEFAULT_BLOCK_BYTES])
def test_similarity_matches_per_pair_loop(block_bytes):
    feats, _ = planted(n=23, n_patch=5, d=12, seed=1)
    got = P.image_similarity(torch.from_numpy(feats), block_bytes=block_bytes).numpy()
    want = loop_similarity(list(feats.astype(np.float64)))
    assert got.shape == (23, 23)
    np.testing.assert_allclose(got, want, atol=2e-6)
    # asymmetric: rows are anchors
    assert not np.allclose(got, got.T)


def test_similarity_with_different_patch_counts_matches_loop():
    rng = np.random.default_rng(3)
    # negative-only cosines would expose unmasked zero padding (0 > every true cosine)
    feats = [rng.normal(size=(int(rng.integers(1, 8)), 10)).astype(np.float32) for _ in range(17)]
    got = P.image_similarity([torch.from_numpy(f) for f in feats], block_bytes=3_000).numpy()
    want = loop_similarity([f.astype(np.float64) for f in feats])
    np.testing.assert_allclose(got, want, atol=2e-6)


def test_similarity_padding_is_masked_when_all_cosines_negative():
    a = np.array([[1.0, 0.0]], dtype=np.float32)
    b = np.array([[-1.0, 0.1], [-1.0, -0.1]], dtype=np.float32)
    got = P.image_similarity([a, b, a]).numpy()
    want = loop_similarity([a, b, a])
    assert want[0, 1] < 0
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_similarity_half_precision_input_accumulates_in_fp32():
    feats, _ = planted(n=12, seed=2)
    half = torch.from_numpy(feats).half()
    got = P.image_similarity(half)
    want = loop_similarity(list(half.double().numpy()))
    assert got.dtype == torch.float32
    np.testing.assert_allclose(got.numpy(), want, atol=2e-6)


@pytest.mark.parametrize(
    "mutate, match",
    [
        (lambda f: f.__setitem__((3, 1, 2), float("nan")), "NaN or inf"),
        (lambda f: f.__setitem__((2, 0, 0), float("inf")), "NaN or inf"),
        (lambda f: f.__setitem__((4, 2), 0.0), "zero vector.*image 4, patch 2"),
    ],
)
def test_similarity_rejects_bad_values(mutate, match):
    feats, _ = planted(n=8, seed=4)
    mutate(feats)
    with pytest.raises(ValueError, match=match):
        P.image_similarity(feats)


def test_similarity_rejects_bad_shapes():
    with pytest.raises(ValueError, match=r"\[n, N, d\]"):
        P.image_similarity(np.zeros((3, 4), dtype=np.float32) + 1)
    with pytest.raises(ValueError, match="same hidden size"):
        P.image_similarity([np.ones((2, 3)), np.ones((2, 4))])
    with pytest.raises(ValueError, match="at least 2 images"):
        P.image_similarity(np.ones((1, 2, 3)))


# ---------------------------------------------------------------------------
# phi against the reference implementations
# ---------------------------------------------------------------------------


@pytest.mark.parametrize("k", [1, 5, 20, 39])
def test_ndcg_and_knn_match_reference(k):
    feats, labels = planted()
    sim = loop_similarity(list(feats.astype(np.float64)))
    rel = shared_counts(labels)
    got_ndcg = P.pfram_per_anchor(torch.from_numpy(feats), labels, phi="ndcg", k=k)
    got_knn = P.pfram_per_anchor(torch.from_numpy(feats), labels, phi="knn", k=k)
    np.testing.assert_allclose(got_ndcg, ref_ndcg(sim, rel, k), atol=1e-9)
    np.testing.assert_allclose(got_knn, ref_knn(sim, rel, k), atol=1e-9)
    assert P.pfram(sim, labels, phi="ndcg", k=k) == pytest.approx(np.mean(ref_ndcg(sim, rel, k)))


def test_planted_structure_scores_above_shuffled_features():
    feats, labels = planted(n=60, seed=5)
    good = P.pfram(feats, labels, phi="ndcg", k=10)
    perm = np.random.default_rng(0).permutation(60)
    shuffled = P.pfram(feats[perm], labels, phi="ndcg", k=10)
    assert good > shuffled + 0.1


def test_perfect_features_give_one():
    _, labels = planted(n=30, seed=6)
    rel = shared_counts(labels)
    # relevance itself as the similarity: both rankings coincide
    assert P.pfram(rel + 0.0, rel, gold="relevance", phi="ndcg", k=10) == pytest.approx(1.0)
    assert P.pfram(rel + 0.0, rel, gold="relevance", phi="knn", k=10) == pytest.approx(1.0)


def test_multi_hot_and_label_sets_agree():
    feats, labels = planted(n=25, seed=7)
    vocab = sorted({x for s in labels for x in s})
    multi_hot = np.array([[1.0 if v in s else 0.0 for v in vocab] for s in labels])
    a = P.pfram(feats, labels, phi="knn", k=5)
    b = P.pfram(feats, multi_hot, phi="knn", k=5)
    c = P.pfram(feats, shared_counts(labels), phi="knn", k=5, gold="relevance")
    assert a == b == c


# ---------------------------------------------------------------------------
# ties
# ---------------------------------------------------------------------------


def tied_data(n=14, seed=8):
    rng = np.random.default_rng(seed)
    # coarse values: many exact ties on both sides
    sim = rng.integers(0, 3, size=(n, n)).astype(float)
    labels = [set(rng.choice(4, size=int(rng.integers(1, 3)), replace=False).tolist()) for _ in range(n)]
    return sim, labels, shared_counts(labels)


@pytest.mark.parametrize("k", [2, 5])
def test_index_tie_break_matches_stable_reference(k):
    sim, labels, rel = tied_data()
    np.testing.assert_allclose(P.pfram_per_anchor(sim, labels, phi="knn", k=k), ref_knn(sim, rel, k), atol=1e-12)
    np.testing.assert_allclose(P.pfram_per_anchor(sim, labels, phi="ndcg", k=k), ref_ndcg(sim, rel, k), atol=1e-12)


@pytest.mark.parametrize("phi", ["knn", "ndcg"])
def test_expected_ties_match_monte_carlo(phi):
    sim, labels, rel = tied_data()
    got = P.pfram_per_anchor(sim, labels, phi=phi, k=4, ties="expected")
    mc = mc_random_ties(sim, rel, 4, phi, draws=3000, seed=0)
    # 3000 draws of a [0, 1] score: standard error < 0.01 per anchor; fixed seed
    np.testing.assert_allclose(got, mc, atol=0.03)
    # and the index policy is a different, deterministic number on this data
    assert not np.allclose(got, P.pfram_per_anchor(sim, labels, phi=phi, k=4, ties="index"))


def test_expected_equals_index_without_ties():
    feats, _ = planted(n=30, seed=9)
    sim = P.image_similarity(feats).numpy()
    rel = sim.T @ sim + np.arange(30 * 30).reshape(30, 30) * 1e-6  # no ties in the gold either
    for phi in ("knn", "ndcg"):
        a = P.pfram_per_anchor(sim, rel, phi=phi, k=7, gold="relevance")
        b = P.pfram_per_anchor(sim, rel, phi=phi, k=7, gold="relevance", ties="expected")
        np.testing.assert_allclose(a, b, atol=1e-12)


def test_expected_knn_exact_small_case():
    # anchor 0; candidates 1..4. F: 1 > {2,3,4} tied; G: {1,2} tied > {3,4} tied. k = 2.
    sim = np.zeros((5, 5))
    sim[0] = [9, 5, 1, 1, 1]
    rel = np.zeros((5, 5))
    rel[0] = [9, 2, 2, 1, 1]
    rel[1:, 1:] = 1 + np.eye(4)
    sim[1:, 1:] = 1 + np.eye(4)
    got = P.pfram_per_anchor(sim, rel, phi="knn", k=2, ties="expected", gold="relevance")[0]
    # P_F = [1, 1/3, 1/3, 1/3], P_G = [1, 1, 0, 0] -> E overlap = 1 + 1/3
    assert got == pytest.approx((1 + 1 / 3) / 2)
    idx = P.pfram_per_anchor(sim, rel, phi="knn", k=2, gold="relevance")[0]
    assert idx == pytest.approx(1.0)  # index policy picks 1, 2 on both sides


# ---------------------------------------------------------------------------
# bad input and summaries
# ---------------------------------------------------------------------------


def test_k_out_of_range():
    feats, labels = planted(n=10)
    for k in (0, 10, 11):
        with pytest.raises(ValueError, match=r"k: expected an integer in \[1, n - 1\]"):
            P.pfram(feats, labels, k=k)


def test_image_without_labels_is_an_error():
    feats, labels = planted(n=10)
    labels[3] = set()
    with pytest.raises(ValueError, match=r"no labels \(indices \[3\]\)"):
        P.pfram(feats, labels, k=3)


def test_undefined_ndcg_raises_or_skips():
    feats, labels = planted(n=10)
    labels = [s | {"common"} for s in labels]
    labels[2] = {"lonely"}  # shares nothing: ideal DCG is 0
    with pytest.raises(ValueError, match=r"NDCG undefined for 1 anchor\(s\) \[2\]"):
        P.pfram(feats, labels, k=3)
    per = P.pfram_per_anchor(feats, labels, k=3, on_undefined="skip")
    assert np.isnan(per[2]) and np.isfinite(np.delete(per, 2)).all()
    assert P.pfram(feats, labels, k=3, on_undefined="skip") == pytest.approx(np.nanmean(per))


def test_ambiguous_gold_and_bad_args():
    feats, _ = planted(n=6)
    with pytest.raises(ValueError, match="pass gold="):
        P.pfram(feats, np.eye(6), k=2)
    with pytest.raises(ValueError, match="phi"):
        P.pfram(feats, np.ones((6, 2)), phi="map", k=2)
    with pytest.raises(ValueError, match="ties"):
        P.pfram(feats, np.ones((6, 2)), ties="random", k=2)
    with pytest.raises(TypeError, match="string"):
        P.pfram(feats, ["cat"] * 6, k=2)


def test_duplicates_are_reported_and_scored():
    feats, labels = planted(n=12)
    feats[5] = feats[2]
    with pytest.warns(UserWarning, match="identical features"):
        # planted(n=12) has an anchor sharing no label (undefined for k-NN too): leave it out
        score = P.pfram(feats, labels, phi="knn", k=3, on_undefined="skip")
    assert 0.0 <= score <= 1.0
    assert P.find_duplicates(P.image_similarity(feats)) == [(2, 5)]


def test_bootstrap_and_layer_summary():
    per = np.linspace(0.2, 0.8, 50)
    lo, hi = P.bootstrap_interval(per, n_resamples=500)
    assert lo < per.mean() < hi
    assert P.bootstrap_interval(per, seed=1) == P.bootstrap_interval(per, seed=1)
    s = P.layer_summary({"llm.0": 0.5, "llm.4": 0.7, "llm.8": 0.6})
    assert s == {"input": 0.5, "mean": pytest.approx(0.6), "max": 0.7}
    assert P.layer_summary({"vision.3": 0.4})["input"] is None


def test_description_relevance():
    e = np.array([[1.0, 0.0], [0.0, 2.0], [-1.0, 0.0]])
    r = P.description_relevance(e)
    assert r[0, 1] == pytest.approx(0.0) and r[0, 2] == 0.0 and r[1, 1] == pytest.approx(1.0)
    assert P.description_relevance(e, clip_negative=False)[0, 2] == pytest.approx(-1.0)


def test_tied_top_k_share():
    feats, _ = planted(n=20, seed=10)
    sim = P.image_similarity(feats)
    assert P.tied_top_k_share(sim, 5) == 0.0  # continuous scores: no ties
    # anchor 0: candidates 1..4 all tied, k = 2 -> both top-2 members depend on tie-breaking
    s = np.ones((5, 5))
    assert P.tied_top_k_share(s, 2) == 1.0


def test_amber_gold_has_many_boundary_ties():
    path = FIXTURES / "amber" / "annotations.json"
    if not path.is_file():
        pytest.skip(f"shared fixture {path} is absent")
    from lmms_scene.analysis.labels import read_amber

    rel = P.object_relevance(list(read_amber(path).values()))
    assert rel.shape == (638, 638)
    # a large share of AMBER's gold top-100 is decided by tie-breaking
    assert 0.3 < P.tied_top_k_share(rel, 100) < 0.6


def test_similarity_block_images_override():
    feats, _ = planted(n=13, seed=11)
    want = loop_similarity(list(feats.astype(np.float64)))
    for b in (1, 4, 13, 50):
        np.testing.assert_allclose(P.image_similarity(feats, block_images=b).numpy(), want, atol=2e-6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device on this machine")
def test_similarity_on_cuda_matches_loop():
    feats, _ = planted(n=30, seed=12)
    want = loop_similarity(list(feats.astype(np.float64)))
    got = P.image_similarity(torch.from_numpy(feats), device="cuda", block_bytes=200_000)
    np.testing.assert_allclose(got.numpy(), want, atol=1e-5)


@pytest.mark.slow
def test_imports_load_no_model_library():
    import subprocess
    import sys

    code = (
        "import sys, lmms_scene.analysis.pfram, lmms_scene.analysis.labels, lmms_scene.analysis.extract, "
        "lmms_scene.analysis.attention, lmms_scene.analysis.pfram_scores, lmms_scene.cli.pfram; "
        "print(sorted(m for m in ('transformers', 'sentence_transformers', 'scipy') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_undefined_zero_matches_reference_convention():
    feats, labels = planted(n=10)
    labels = [s | {"common"} for s in labels]
    labels[2] = {"lonely"}
    per = P.pfram_per_anchor(feats, labels, k=3, on_undefined="zero")
    skip = P.pfram_per_anchor(feats, labels, k=3, on_undefined="skip")
    assert per[2] == 0.0
    np.testing.assert_allclose(np.delete(per, 2), np.delete(skip, 2))


def test_undefined_knn_anchor_raises_skips_or_zeroes():
    feats, labels = planted(n=10)
    labels = [s | {"common"} for s in labels]
    labels[2] = {"lonely"}  # shares nothing: its gold top-k would be an arbitrary all-tied pick
    for ties in ("index", "expected"):
        with pytest.raises(ValueError, match=r"mutual k-NN undefined for 1 anchor\(s\) \[2\]"):
            P.pfram_per_anchor(feats, labels, phi="knn", k=3, ties=ties)
        skip = P.pfram_per_anchor(feats, labels, phi="knn", k=3, ties=ties, on_undefined="skip")
        zero = P.pfram_per_anchor(feats, labels, phi="knn", k=3, ties=ties, on_undefined="zero")
        assert np.isnan(skip[2]) and np.isfinite(np.delete(skip, 2)).all() and zero[2] == 0.0
        np.testing.assert_allclose(np.delete(zero, 2), np.delete(skip, 2))
        assert P.pfram(feats, labels, phi="knn", k=3, ties=ties, on_undefined="skip") == pytest.approx(np.nanmean(skip))
    # the other anchors keep the reference scores
    sim = P.image_similarity(feats).double().numpy()
    want = ref_knn(sim, shared_counts(labels), 3)
    got = P.pfram_per_anchor(sim, labels, phi="knn", k=3, on_undefined="skip")
    np.testing.assert_allclose(np.delete(got, 2), np.delete(want, 2))


def test_two_d_input_is_a_similarity_and_must_be_square():
    rng = np.random.default_rng(0)
    vecs = rng.normal(size=(8, 5)).astype(np.float32)  # one vector per image, [n, d]
    labels = [{f"l{i % 3}"} for i in range(8)]
    with pytest.raises(
        ValueError,
        match=r"a 2-D input is a precomputed \[n, n\] similarity, got shape \(8, 5\)"
        r".*\[n, 1, d\]",
    ):
        P.pfram(vecs, labels, k=2)
    with pytest.raises(ValueError, match=r"\[n, 1, d\]"):
        P.pfram(torch.from_numpy(vecs), labels, k=2, first="similarity")
    # [n, 1, d] and first="features" are the same thing
    a = P.pfram_per_anchor(vecs[:, None, :], labels, k=2)
    b = P.pfram_per_anchor(vecs, labels, k=2, first="features")
    np.testing.assert_allclose(a, b)
    # n == d: read as a similarity by default, as features only when asked
    sq = rng.normal(size=(8, 8)).astype(np.float32)
    as_sim = P.pfram_per_anchor(sq, labels, k=2)
    np.testing.assert_allclose(as_sim, P.pfram_per_anchor(sq, labels, k=2, first="similarity"))
    np.testing.assert_allclose(
        P.pfram_per_anchor(sq, labels, k=2, first="features"), P.pfram_per_anchor(sq[:, None, :], labels, k=2)
    )
    with pytest.raises(ValueError, match="first"):
        P.pfram(sq, labels, k=2, first="vectors")


def test_pfram_interval_is_the_one_bootstrap_over_defined_anchors():
    from lmms_scene.metrics import rows as R

    per = np.array([0.3, np.nan, 0.9, 0.1, 0.5, np.nan, 0.7])
    defined = [0.3, 0.9, 0.1, 0.5, 0.7]
    got = P.bootstrap_interval(per, n_resamples=300, confidence=0.9, seed=4)
    assert got == tuple(R.bootstrap_interval(defined, n_boot=300, seed=4, level=0.9))
    assert P.bootstrap_interval([0.4, np.nan]) == (0.4, 0.4)  # one anchor: every resample is it
    with pytest.raises(ValueError, match="no defined scores"):
        P.bootstrap_interval([np.nan])
