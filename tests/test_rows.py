"""The shared row machinery: dedup by declared ids, breakdowns, clustered bootstrap
intervals (checked against a direct resampling implementation) and the corpus memo."""

from __future__ import annotations

import random
import threading

import numpy as np
import pytest
from conftest import clear_cache_keeping_models

from lmms_scene.metrics import rows as R


def direct_bootstrap(values, clusters, n_boot, seed, level=0.95):
    """Straight from the definition: draw clusters with replacement, pool the computed
    values of the drawn clusters (a cluster drawn twice counts twice), take the mean."""
    ids = list(dict.fromkeys(clusters))
    members = {c: [v for v, k in zip(values, clusters) if k == c and v is not None] for c in ids}
    draws = np.random.default_rng(seed).integers(0, len(ids), size=(n_boot, len(ids)))
    means = []
    for row in draws:
        pooled = [v for j in row for v in members[ids[j]]]
        if pooled:
            means.append(sum(pooled) / len(pooled))
    tail = (1 - level) / 2 * 100
    return [float(x) for x in np.percentile(means, [tail, 100 - tail])]


def clustered_data(seed=1, n_clusters=40):
    rng = random.Random(seed)
    values, clusters = [], []
    for c in range(n_clusters):
        base = rng.random()
        for _ in range(rng.randint(1, 6)):  # unequal cluster sizes
            values.append(None if rng.random() < 0.1 else base + rng.gauss(0, 0.05))
            clusters.append(f"img{c}")
    return values, clusters


def test_interval_equals_direct_resampling_with_the_same_draws():
    values, clusters = clustered_data()
    got = R.bootstrap_interval(values, clusters, n_boot=300, seed=7)
    assert got == pytest.approx(direct_bootstrap(values, clusters, 300, 7), abs=1e-12)
    # chunked draws give the same resamples as one draw
    old = R._CHUNK_ELEMENTS
    try:
        R._CHUNK_ELEMENTS = 50
        assert R.bootstrap_interval(values, clusters, n_boot=300, seed=7) == pytest.approx(got, abs=1e-12)
    finally:
        R._CHUNK_ELEMENTS = old


def test_interval_agrees_with_independent_resampling_and_theory():
    rng = np.random.default_rng(3)
    values = list(rng.normal(0.4, 0.2, size=400))
    got = R.bootstrap_interval(values, n_boot=2000, seed=0)
    other = direct_bootstrap(values, list(range(400)), 2000, seed=12345)
    assert got == pytest.approx(other, abs=0.006)
    half = 1.96 * np.std(values, ddof=1) / np.sqrt(400)
    assert got[0] == pytest.approx(np.mean(values) - half, abs=0.006)
    assert got[1] == pytest.approx(np.mean(values) + half, abs=0.006)


def test_clustering_widens_the_interval_of_correlated_rows():
    values, clusters = [], []
    for c in range(30):
        v = float(c % 2)  # each image's six rows agree with each other
        values += [v] * 6
        clusters += [c] * 6
    naive = R.bootstrap_interval(values, n_boot=1000)
    clustered = R.bootstrap_interval(values, clusters, n_boot=1000)
    assert (clustered[1] - clustered[0]) > 1.8 * (naive[1] - naive[0])


def test_interval_is_seeded_and_none_without_spread():
    values, clusters = clustered_data()
    assert R.bootstrap_interval(values, clusters, seed=1) == R.bootstrap_interval(values, clusters, seed=1)
    assert R.bootstrap_interval(values, clusters, seed=1) != R.bootstrap_interval(values, clusters, seed=2)
    assert R.bootstrap_interval([0.5, None], ["a", "b"]) is None  # one computed cluster
    assert R.bootstrap_interval([0.5, 0.7], ["a", "a"]) is None
    with pytest.raises(ValueError, match="3 cluster ids for 2 values"):
        R.bootstrap_interval([0.5, 0.7], ["a", "b", "c"])
    with pytest.raises(TypeError, match="values: expected a sequence of numbers, got str"):
        R.bootstrap_interval("0.5")


def test_dedupe_counts_duplicates_and_rejects_conflicts():
    rows = [
        {"scene": "s1", "q": 1, "output": "a"},
        {"scene": "s2", "q": 1, "output": "b"},
        {"scene": "s1", "q": 1.0, "output": "a"},
    ]
    kept = R.dedupe(rows, ["scene", "q"])
    assert kept.n_duplicates == 1 and [r["scene"] for r in kept.rows] == ["s1", "s2"]
    with pytest.raises(R.DuplicateRowError, match=r"\{'scene': 's1', 'q': 1.0\}.*'a' vs 'c'"):
        R.dedupe([*rows, {"scene": "s1", "q": 1, "output": "c"}], ["scene", "q"])
    with pytest.raises(KeyError, match="row has no id field 'q'"):
        R.dedupe([{"scene": "s1"}], ["scene", "q"])
    # a lone field name is one field, never its characters
    assert R.dedupe(rows, "scene").n_duplicates == 1


def test_cell_counts_not_computed_and_skips_not_applicable():
    rows = [{"img": i, "a": v, "b": (None if i == 0 else 1.0), "c": i} for i, v in enumerate([1.0, 0.0, None, 1.0])]
    cell = R.cell(
        rows, {"a": "a", "b": "b", "odd": lambda r: r["c"] if r["c"] % 2 else R.NOT_APPLICABLE}, cluster="img"
    )
    assert cell["n"] == 4 and cell["a"] == pytest.approx(2 / 3) and cell["b"] == 1.0 and cell["odd"] == 2.0
    assert cell["not_computed"] == {"a": 1, "b": 1}  # "odd" rows that do not apply are not counted
    assert set(cell["ci95"]) == {"a", "b", "odd"}
    lo, hi = cell["ci95"]["a"]
    assert 0.0 <= lo <= cell["a"] <= hi <= 1.0


def test_breakdown_groups_by_any_fields_in_declared_order():
    rows = [
        {"cond": c, "lvl": lv, "img": f"{c}{k}", "acc": float(k % 2)}
        for c in ("low", "original", "high")
        for lv in (0.0, 1.0)
        for k in range(4)
    ]
    out = R.breakdown(
        rows,
        ["cond", "lvl"],
        ["acc"],
        cluster="img",
        order={"cond": ["original", "high", "low"]},
        key=lambda f, v: f"{v:g}" if f == "lvl" else v,
    )
    assert list(out) == ["original", "high", "low"] and list(out["low"]) == ["0", "1"]
    assert out["high"]["1"]["n"] == 4 and out["high"]["1"]["acc"] == 0.5


def test_corpus_value_computes_once_per_corpus_from_any_thread_and_order():
    clear_cache_keeping_models()  # the memos: what this test counts
    calls = []

    def compute(rows):
        calls.append([r["id"] for r in rows])
        return {"score": sum(len(r["output"]) for r in rows)}

    rows = [{"id": i, "output": "x" * i} for i in range(50)]
    results, barrier = [], threading.Barrier(4)

    def worker(order):
        barrier.wait()
        results.append(R.corpus_value("toy", order, compute, id_fields=["id"]))

    orders = [rows, rows[::-1], rows + rows[:5], random.Random(0).sample(rows, len(rows))]
    threads = [threading.Thread(target=worker, args=(o,)) for o in orders]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and calls[0] == list(range(50))  # once, on deduplicated rows sorted by id
    assert all(r is results[0] for r in results)
    # another output is another corpus
    changed = [dict(r) for r in rows]
    changed[3]["output"] = "different"
    assert R.corpus_value("toy", changed, compute, id_fields=["id"])["score"] != results[0]["score"]
    assert len(calls) == 2
