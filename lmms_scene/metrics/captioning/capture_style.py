"""CAPTURE-style score (Dong et al. 2024), as the ``capture-metric`` package defines it,
reimplemented to run on the CPU offline (the package hard-codes CUDA and downloads data).

Objects, attributes and relations of each caption (polarity-blind, from lmms-scene's
dependency-rule parser; CAPTURE uses the FACTUAL parser); per type: exact matches, then
synonym matches (substring, or overlapping WordNet lemma sets, word by word; an empty
string never matches), then soft matching of the rest (sentence-encoder cosine: sum of
row maxima for precision, column maxima for recall, no threshold). Score =
(0.5 F1_o + 0.5 F1_a + 0.2 F1_r) / 1.2, averaged over references. CAPTURE's soft-match
model is all-mpnet-base-v2; the offline default here is all-MiniLM-L6-v2 and the
provenance says which one computed the score.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np

from lmms_scene import provenance
from lmms_scene.metrics.captioning.base import CorpusScore, mean_over_items
from lmms_scene.metrics.captioning.tuples import factual_graph, parser_provenance
from lmms_scene.nlp.encoders import sentence_encoder
from lmms_scene.nlp.wordnet import lemma_names

#: CAPTURE's weights alpha, beta, gamma (capture_metric/capture.py)
WEIGHTS = {"o": 0.5, "a": 0.5, "r": 0.2}
CAPTURE_MODEL = "all-mpnet-base-v2"


def _phrases(text: str) -> dict[str, list[tuple[str, ...]]]:
    g = factual_graph(text)
    return {"o": [(o,) for o in g.objects], "a": list(g.attributes), "r": list(g.relations)}


def _word_syn(a: str, b: str) -> bool:
    if not a or not b:
        return False
    return a in b or b in a or bool(lemma_names(a) & lemma_names(b))


def _f1(cand: list[tuple[str, ...]], ref: list[tuple[str, ...]], encoder: Any) -> float:
    if not cand or not ref:
        return 1.0 if not cand and not ref else 0.0
    left_c, left_r = list(range(len(cand))), list(range(len(ref)))
    matched = 0
    for test in (lambda x, y: x == y, lambda x, y: len(x) == len(y) and all(_word_syn(a, b) for a, b in zip(x, y))):
        for i in list(left_c):
            for j in left_r:
                if test(cand[i], ref[j]):
                    left_c.remove(i)
                    left_r.remove(j)
                    matched += 1
                    break
    soft_p = soft_r = 0.0
    if left_c and left_r and encoder is not None:
        sim = np.clip(encoder.similarity([" ".join(cand[i]) for i in left_c], [" ".join(ref[j]) for j in left_r]), 0, 1)
        soft_p, soft_r = float(sim.max(axis=1).sum()), float(sim.max(axis=0).sum())
    p, r = (matched + soft_p) / len(cand), (matched + soft_r) / len(ref)
    return 2 * p * r / (p + r) if p + r else 0.0


class CaptureStyle:
    name = "capture_style"

    def __init__(self, encoder: str | None = None):
        self.encoder_name = encoder

    @property
    def encoder(self) -> Any:
        return sentence_encoder(self.encoder_name)

    def provenance(self) -> dict[str, Any]:
        enc = self.encoder.provenance
        offline = enc["similarity_model"].split("/")[-1] != CAPTURE_MODEL
        return provenance.scorer(
            self.name,
            implementation="lmms-scene reimplementation of CAPTURE (capture-metric 0.1.13 scoring)",
            weights=WEIGHTS,
            soft_match_model=enc["similarity_model"],
            soft_match_note=f"offline default instead of CAPTURE's {CAPTURE_MODEL}" if offline else "CAPTURE's model",
            **parser_provenance(),
        )

    def score_one(self, prediction: str, references: list[str]) -> float:
        enc = self.encoder
        cand = _phrases(prediction)
        per_ref = []
        for ref in references:
            r = _phrases(ref)
            f = {t: _f1(cand[t], r[t], enc) for t in WEIGHTS}
            # CAPTURE = (alpha F1_o + beta F1_a + gamma F1_r) / (alpha + beta + gamma)
            per_ref.append(sum(WEIGHTS[t] * f[t] for t in WEIGHTS) / sum(WEIGHTS.values()))
        return sum(per_ref) / len(per_ref)

    def score(self, references: Mapping[Hashable, list[str]], predictions: Mapping[Hashable, str]) -> CorpusScore:
        return mean_over_items(
            self.name, lambda p, r: self.score_one(p, r) if p.strip() else 0.0, references, predictions, self.provenance
        )
