"""SNUS's text prior for ``scene_blind``: the most frequent negative statements.

Without looking at the image, answer the ``k`` sentences that occur most often in the
captions of the prior's split (ties broken alphabetically, so the answer is
deterministic), ``k`` being the median number of sentences per caption. On the embedded
sample the split is the sample itself (``tasks/snus/sample/snus_sample.parquet``); for
the full dataset it is the release's training split (``prior_from(captions)``).
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


def _sample_prior() -> str:
    import datasets  # deferred: datasets (pyarrow, pandas) is heavy to import

    path = tasks_folder() / SAMPLE_FILE
    if not path.is_file():
        raise FileNotFoundError(f"SNUS sample split not found at {path}; run `lmms-scene build-samples`")
    ds = datasets.load_dataset("parquet", data_files={"train": str(path)}, split="train")
    return prior_from(ds["caption"])


def blind_answer(doc: Mapping[str, Any], prompt: str) -> str:
    """The prior's answer (the same for every doc; the prompt is not used)."""
    return cache.cached(("snus", "blind_prior", "sample"), _sample_prior)
