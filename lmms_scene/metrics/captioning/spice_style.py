"""SPICE-style tuple F1, a reimplementation (not SPICE).

Java SPICE needs a Stanford CoreNLP download that is impossible offline. This follows
SPICE's scoring as FACTUAL's ``spice_evaluation.py`` reimplements it: the caption's
objects, (object, attribute) and (subject, relation, object) tuples; the references'
tuples merged into one set; greedy one-to-one matching, exact word sets first, then
WordNet synonym sets; P = m / |candidate|, R = m / |reference|, F1 (0 when a side is
empty). Tuples come from lmms-scene's dependency-rule parser, polarity-blind as SPICE's
parser is. Every results row names it ``spice_style`` with this provenance.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from lmms_scene import provenance
from lmms_scene.metrics.captioning.base import CorpusScore, mean_over_items
from lmms_scene.metrics.captioning.tuples import factual_graph, parser_provenance
from lmms_scene.nlp.wordnet import lemma_names


def _tuples(text: str) -> list[tuple[str, ...]]:
    g = factual_graph(text)
    return [(o,) for o in g.objects] + list(g.attributes) + list(g.relations)


def _synsets(word: str) -> frozenset[str]:
    return frozenset(lemma_names(word))


def _match(cand: list[tuple[str, ...]], refs: list[tuple[str, ...]]) -> int:
    used = [False] * len(refs)
    matched = 0
    rest = []
    for c in cand:  # exact first
        for j, r in enumerate(refs):
            if not used[j] and c == r:
                used[j] = True
                matched += 1
                break
        else:
            rest.append(c)
    for c in rest:  # then synonyms: every position shares a WordNet lemma
        for j, r in enumerate(refs):
            if not used[j] and len(c) == len(r) and all(a == b or _synsets(a) & _synsets(b) for a, b in zip(c, r)):
                used[j] = True
                matched += 1
                break
    return matched


def spice_style_f1(prediction: str, references: list[str]) -> float:
    cand = list(dict.fromkeys(_tuples(prediction)))
    refs = list(dict.fromkeys(t for r in references for t in _tuples(r)))
    if not cand or not refs:
        return 0.0
    m = _match(cand, refs)
    p, r = m / len(cand), m / len(refs)
    return 2 * p * r / (p + r) if p + r else 0.0


class SpiceStyle:
    name = "spice_style"

    def provenance(self) -> dict[str, Any]:
        return provenance.scorer(
            self.name,
            implementation="lmms-scene reimplementation of SPICE's tuple F1 (not Java SPICE)",
            matching="greedy one-to-one: exact, then WordNet synonyms",
            **parser_provenance(),
        )

    def score(self, references: Mapping[Hashable, list[str]], predictions: Mapping[Hashable, str]) -> CorpusScore:
        return mean_over_items(self.name, spice_style_f1, references, predictions, self.provenance)
