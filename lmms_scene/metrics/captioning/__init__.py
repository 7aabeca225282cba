"""Caption baselines behind one interface (:mod:`~lmms_scene.metrics.captioning.base`):
BLEU-4, METEOR (Java jar), ROUGE-L, CIDEr-D (pycocoevalcap corpus scores), METEOR as
NLTK computes it (the SNUS paper's MET), a SPICE-style tuple F1 reimplementation, a
CAPTURE-style score, and CESG itself (:mod:`~lmms_scene.metrics.captioning.cesg_scorer`). ``SCORERS`` maps each column name to its scorer class;
:func:`score_all` computes them once over a corpus. Importing loads nothing.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

from lmms_scene.benchmarks import resolve
from lmms_scene.metrics.captioning.base import CaptionScorer, CorpusScore, check_corpus

#: column name -> "module:Class" (one file per metric)
SCORERS: dict[str, str] = {
    "rouge_l": "lmms_scene.metrics.captioning.coco:RougeL",
    "meteor_nltk": "lmms_scene.metrics.captioning.meteor_nltk:MeteorNltk",
    "meteor_java": "lmms_scene.metrics.captioning.coco:MeteorJava",
    "cider": "lmms_scene.metrics.captioning.coco:CiderD",
    "bleu4": "lmms_scene.metrics.captioning.coco:Bleu4",
    "capture_style": "lmms_scene.metrics.captioning.capture_style:CaptureStyle",
    "spice_style": "lmms_scene.metrics.captioning.spice_style:SpiceStyle",
    "cesg": "lmms_scene.metrics.captioning.cesg_scorer:CesgScorer",
}


def get(name: str) -> CaptionScorer:
    if name not in SCORERS:
        raise KeyError(f"unknown caption metric {name!r}; known: {', '.join(SCORERS)}")
    return resolve(SCORERS[name])()


def score_all(
    references: Mapping[Hashable, list[str]], predictions: Mapping[Hashable, str], metrics: Sequence[str] | None = None
) -> dict[str, CorpusScore]:
    """Every requested metric over one corpus."""
    check_corpus(references, predictions)
    return {name: get(name).score(references, predictions) for name in (metrics or SCORERS)}


__all__ = ["SCORERS", "CaptionScorer", "CorpusScore", "check_corpus", "get", "score_all"]
