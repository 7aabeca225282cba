"""The one caption-scorer interface (pycocoevalcap's ``compute_score(gts, res)`` idea).

A scorer declares ``name`` (the column it fills) and ``provenance()``, and scores a whole
corpus: ``score(references: {id: [refs]}, predictions: {id: prediction}) -> CorpusScore``.
A new metric is one new file in this package plus its entry in ``SCORERS``.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from lmms_scene.validation import texts


@dataclass
class CorpusScore:
    """A metric's corpus score and per-item scores (None: not computed for that item, with
    the reason in ``not_computed``)."""

    name: str
    score: float | None
    per_item: dict[Hashable, float | None]
    provenance: dict[str, Any]
    not_computed: dict[Hashable, str] = field(default_factory=dict)
    n_empty: int = 0
    #: anything else the scorer reports (CESG: its components and counts)
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "score": self.score,
            "n": len(self.per_item),
            "n_empty_prediction": self.n_empty,
            "not_computed": {str(k): v for k, v in self.not_computed.items()},
            "provenance": self.provenance,
        }


class CaptionScorer(Protocol):
    name: str

    def provenance(self) -> dict[str, Any]: ...

    def score(self, references: Mapping[Hashable, list[str]], predictions: Mapping[Hashable, str]) -> CorpusScore: ...


def check_corpus(references: Mapping[Hashable, Any], predictions: Mapping[Hashable, Any]) -> tuple[dict, dict]:
    """Validated copies: the same ids on both sides, a list of >= 1 string per reference id,
    a string per prediction; errors name the id and the value."""
    if not isinstance(references, Mapping) or not isinstance(predictions, Mapping):
        raise TypeError("references and predictions: expected mappings {id: [references]} and {id: prediction}")
    if set(references) != set(predictions):
        only_r = sorted(map(str, set(references) - set(predictions)))[:5]
        only_p = sorted(map(str, set(predictions) - set(references)))[:5]
        raise ValueError(
            f"references and predictions have different ids: only in references {only_r}, only in predictions {only_p}"
        )
    refs = {k: texts(v, f"references[{k!r}]", allow_empty=False) for k, v in references.items()}
    preds = {}
    for k, v in predictions.items():
        if not isinstance(v, str):
            raise TypeError(f"predictions[{k!r}]: expected a string, got {type(v).__name__}: {v!r}")
        preds[k] = v
    return refs, preds


def mean_over_items(
    name: str, score_one: Any, references: Mapping[Hashable, Any], predictions: Mapping[Hashable, Any], provenance: Any
) -> CorpusScore:
    """A metric whose corpus score is the mean of per-item scores ``score_one(prediction,
    references)`` (``provenance``: a dict, or a callable giving it)."""
    refs, preds = check_corpus(references, predictions)
    per_item = {k: score_one(preds[k], refs[k]) for k in refs}
    mean = sum(per_item.values()) / len(per_item) if per_item else None
    prov = provenance() if callable(provenance) else provenance
    return CorpusScore(name, mean, per_item, prov, n_empty=sum(not p.strip() for p in preds.values()))
