"""SNUS's text prior for ``scene_blind``: the most frequent negative statements.

Without looking at the image, answer the ``k`` sentences that occur most often in the
captions of the prior's split (ties broken alphabetically, so the answer is
deterministic), ``k`` being the median number of sentences per caption. The split is the
embedded sample (``tasks/snus/sample/snus_sample.parquet``) **without the scored image**:
a doc of the sample itself is answered from the other images' captions (leave one out),
so the prior never holds the reference it is scored against; a doc of any other data
(a full build) is answered from the whole sample, which it does not contain
(:data:`PRIOR_SOURCE`; ``prior_from(captions)`` builds one from any captions).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from lmms_scene import cache
from lmms_scene.data.snus import SAMPLE_FILE, tasks_folder
from lmms_scene.nlp.sentences import split_sentences


def prior_from(captions: Iterable[str]) -> str:
    """The blind answer built from ``captions``."""
    per_caption = [split_sentences(c) for c in captions if isinstance(c, str) and c.strip()]
    if not per_caption:
        raise ValueError("the SNUS blind prior needs at least one non-empty caption")
    counts = Counter(s for sentences in per_caption for s in sentences)
    k = max(1, int(statistics.median(len(s) for s in per_caption)))
    ranked = sorted(counts, key=lambda s: (-counts[s], s))
    return " ".join(ranked[:k])


#: where the answers come from, in a sentence (``show``, the report and the demo print it)
PRIOR_SOURCE = (
    "the most frequent negative statements of the embedded sample's captions, the scored image's own "
    "caption left out (leave one out on the sample; the whole sample for any other data)"
)


def _sample_captions() -> list[tuple[str, str]]:
    import pyarrow.parquet as pq  # deferred: pyarrow is heavy to import

    path = tasks_folder() / SAMPLE_FILE
    if not path.is_file():
        raise FileNotFoundError(f"SNUS sample split not found at {path}; run `lmms-scene build-samples`")
    table = pq.read_table(path, columns=["image_id", "caption"]).to_pylist()
    return [(str(row["image_id"]), row["caption"]) for row in table]


def blind_answer(doc: Mapping[str, Any], prompt: str) -> str:
    """The prior's answer for ``doc`` (the prompt is not used): the sample's most frequent
    statements, counted without ``doc``'s own image when the sample holds it."""
    captions = cache.cached(("snus", "blind_prior", "captions"), _sample_captions)
    image = str(doc.get("image_id")) if isinstance(doc, Mapping) and doc.get("image_id") is not None else None
    left_out = image if image in {i for i, _ in captions} else None
    return cache.cached(
        ("snus", "blind_prior", "without", left_out), lambda: prior_from(c for i, c in captions if i != left_out)
    )
