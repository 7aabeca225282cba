"""CESG behind the caption-scorer interface (``score({id: [refs]}, {id: prediction})``),
so it is scored, listed and compared like the baselines it must beat.

``CorpusScore.score`` is the corpus CESG in the paper's convention
(:func:`lmms_scene.metrics.cesg.score.corpus_scores`), ``per_item`` the per-row CESG
(None for a reference without absent information, with the reason in ``not_computed``),
and ``details`` the whole :func:`~lmms_scene.metrics.cesg.score_corpus` result (rows with
every component, corpus P/R/F1 with the rows behind each mean, counts).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from lmms_scene.metrics.captioning.base import CorpusScore, check_corpus
from lmms_scene.metrics.cesg import configuration, score_corpus


class CesgScorer:
    name = "cesg"

    def __init__(self, **options: Any):
        self.options = dict(options)

    def provenance(self) -> dict[str, Any]:
        return configuration(**self.options)

    def score(self, references: Mapping[Hashable, list[str]], predictions: Mapping[Hashable, str]) -> CorpusScore:
        refs, preds = check_corpus(references, predictions)
        out = score_corpus([(k, preds[k], refs[k]) for k in refs], **self.options)
        per_item = {r["id"]: r["CESG"] for r in out["rows"]}
        not_computed = {r["id"]: r["status"] for r in out["rows"] if r["CESG"] is None}
        n_empty = out["n_empty_prediction"]
        return CorpusScore(
            self.name, out["means"]["CESG"], per_item, out["provenance"], not_computed, n_empty, details=out
        )
