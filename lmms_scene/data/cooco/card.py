"""The dataset card (README.md) of a built COOCO dataset, rendered from
``templates/cards/cooco.md.jinja``."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from lmms_scene.benchmarks import COOCO_CITATION as CITATION
from lmms_scene.data.card import front_matter
from lmms_scene.data.cooco.schema import CONDITIONS, SPLIT
from lmms_scene.prompts import render

LICENSE_TERMS = (
    "the COOCO release's terms (images derive from COCO 2017 and keep their Flickr licenses; annotations CC BY 4.0)"
)


def card(dataset, source: str, notes: Sequence[str] = ()) -> str:
    """A Hugging Face dataset card for a built COOCO dataset; ``notes`` are extra
    build decisions to record (e.g. rows skipped on request)."""
    counts = Counter(dataset["condition"])
    excluded = Counter(c for c, e in zip(dataset["condition"], dataset["excluded"]) if e)
    n_naming = sum(1 for c, e in zip(dataset["condition"], dataset["excluded"]) if c != "clean" and not e)
    text = render(
        "cards/cooco.md.jinja",
        split=SPLIT,
        source=source,
        n_rows=len(dataset),
        counts=[(c, counts.get(c, 0), excluded.get(c, 0)) for c in CONDITIONS],
        citation=CITATION,
        n_excluded=sum(excluded.values()),
        n_clean=counts.get("clean", 0),
        n_naming=n_naming,
    )
    if notes:
        text += "\n\n## Build notes\n\n" + "\n".join(f"- {n}" for n in notes)
    head = front_matter(
        license="other",
        source=source,
        pretty_name="COOCO (lmms-scene build)",
        splits=[SPLIT],
        task_categories=["image-to-text"],
        license_terms=LICENSE_TERMS,
    )
    return head + text.lstrip("\n") + "\n"
