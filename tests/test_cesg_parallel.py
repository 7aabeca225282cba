"""CESG over a corpus in several processes (issue 28, item 4) gives exactly the scores of
one process. No timing here: bench/bench_cesg.py measures the speed."""

from __future__ import annotations

import random
import threading

import pytest

from lmms_scene import cache
from lmms_scene.metrics.cesg import construct, score, score_corpus
from lmms_scene.metrics.cesg.construct import BATCH_TEXTS, fork_workers
from lmms_scene.nlp.encoders import MINILM

pytestmark = pytest.mark.slow


def _corpus(n: int) -> list[tuple[str, str, list[str]]]:
    rng = random.Random(7)
    people = ["worker on the scaffold", "welder at the bench", "painter on the ladder", "driver in the truck"]
    things = ["hard hat", "gloves", "safety harness", "face shield", "safety vest"]
    places = ["guardrail", "fire extinguisher", "warning sign", "safety net"]
    refs = [
        f"The {rng.choice(people)} is not wearing a {rng.choice(things)}. There is no {rng.choice(places)}."
        for _ in range(n // 3)
    ]
    rows = []
    for i in range(n):
        p, t, q = rng.choice(people), rng.choice(things), rng.choice(places)
        style = i % 4
        if style == 0:
            pred = f"The {p} does not appear to be wearing a {t}, and there is no {q} nearby ({i})."
        elif style == 1:
            pred = f"Missing: {t}, {q}. Row {i}."
        elif style == 2:
            pred = f"1. {p.capitalize()}: no {t}\n2. {q.capitalize()}: absent\n3. Note {i}: the floor is not dry."
        else:
            pred = f"I cannot see a {q}, and the {p.split()[0]} lacks a {t}; the ladder is not secured (case {i})."
        rows.append((f"r{i}", pred, [refs[i % len(refs)]]))
    return rows


def _cold() -> None:
    """Nothing built, read or embedded: each path computes its own graphs and vectors."""
    for name in ("cesg.build", "cesg.sentence", f"encoder:{MINILM}"):
        cache.memo_namespace(name).clear()


def test_two_processes_score_exactly_as_one(monkeypatch):
    pairs = _corpus(300)
    assert len({p for _, p, _ in pairs}) > 2 * BATCH_TEXTS  # the build is shared among processes
    _cold()
    one = score_corpus(pairs, workers=1)
    forked, real = [], construct.fork_map

    def spy(fn, shares):
        forked.append((fn.__name__, len(shares)))
        return real(fn, shares)

    monkeypatch.setattr(construct, "fork_map", spy)
    monkeypatch.setattr(score, "fork_map", spy)
    _cold()
    two = score_corpus(pairs, workers=2)
    assert forked == [("_build_share", 2), ("_match_share", 2)]  # both phases ran in two processes
    assert [r["id"] for r in two["rows"]] == [p[0] for p in pairs]
    assert two["rows"] == one["rows"]
    assert two["means"] == one["means"] and two["row_counts"] == one["row_counts"]
    assert any(r["status"] == "scored" for r in one["rows"])


def test_workers_setting_is_checked_and_auto_stays_in_one_process_beside_other_threads():
    for bad in (0, -1, "two", 1.5, True):
        with pytest.raises(ValueError, match="workers"):
            fork_workers(bad, 1000)
    assert fork_workers("auto", 10) == 1  # a small corpus
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)  # a non-daemon thread (e.g. the harness's row threads)
    other.start()
    try:
        assert fork_workers("auto", 10_000) == 1
    finally:
        stop.set()
        other.join()
    with pytest.raises(ValueError, match="workers"):
        score_corpus([("a", "There is no rail.", ["There is no rail."])], workers=0)
