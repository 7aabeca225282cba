"""METEOR as NLTK computes it (``nltk.translate.meteor_score.meteor_score``): the SNUS
paper's MET column. Its AC value (90.04) is NLTK's METEOR (90.52 on our AC sample), not
pycocoevalcap's Java METEOR (54.42 on the same sample, the jar's corpus aggregate), so the Table 2 column ``MET`` is
this one and the Java jar is kept as ``meteor_java``.

Per image: NLTK's ``meteor_score`` (alpha 0.9, beta 3, gamma 0.5; exact, stem and WordNet
synonym matching with our WordNet reader) of the prediction against its references (the
best reference); the corpus score is the mean over images. Tokens: lower case, words and
punctuation apart (``re.findall(r"\\w+|[^\\w\\s]")``; NLTK's ``word_tokenize`` needs the
Punkt download). An empty prediction scores 0 and is counted.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Mapping
from importlib.metadata import version
from typing import Any

from lmms_scene import provenance
from lmms_scene.metrics.captioning.base import CorpusScore, mean_over_items
from lmms_scene.nlp import wordnet as wn_module

_TOKEN = re.compile(r"\w+|[^\w\s]")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def meteor_nltk(prediction: str, references: list[str]) -> float:
    """NLTK METEOR of one prediction (0 for an empty one)."""
    from nltk.translate.meteor_score import meteor_score  # deferred: NLTK is heavy to import

    hyp = tokens(prediction)
    refs = [tokens(r) for r in references]
    if not hyp or not any(refs):
        return 0.0
    reader = wn_module.wordnet()
    with wn_module.locked():  # NLTK's WordNet reader reads its files lazily: one thread at a time
        return float(meteor_score([r for r in refs if r], hyp, wordnet=reader))


class MeteorNltk:
    name = "meteor_nltk"

    def provenance(self) -> dict[str, Any]:
        return provenance.scorer(
            self.name,
            implementation=f"nltk {version('nltk')} nltk.translate.meteor_score.meteor_score (the SNUS paper's MET)",
            parameters={"alpha": 0.9, "beta": 3, "gamma": 0.5},
            tokenizer="lower case, words and punctuation (regex \\w+|[^\\w\\s])",
            corpus="mean over images",
            wordnet="WordNet 3.0 (Debian wordnet-base) via nltk",
        )

    def score(self, references: Mapping[Hashable, list[str]], predictions: Mapping[Hashable, str]) -> CorpusScore:
        return mean_over_items(self.name, meteor_nltk, references, predictions, self.provenance)
