"""The dataset card (README.md) of a built Layered-VQA dataset, rendered from
``templates/layered_vqa/card.md.jinja``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from lmms_scene.data.card import front_matter
from lmms_scene.data.layered_vqa.schema import COLUMNS
from lmms_scene.prompts import render


def card(
    dataset: Sequence[Mapping[str, Any]],
    source: str,
    notes: Sequence[str] = (),
    *,
    max_difference: int = 0,
    tolerance: int = 0,
    license: str = "see the release",
    license_id: str = "other",
) -> str:
    """The dataset card of the items ``dataset``: where the data came from, license
    (``license_id`` the hub's identifier, ``license`` in words), split, counts, features, how
    far the layers recompose the composite (``max_difference`` at ``tolerance``); ``notes``:
    build decisions to record."""
    items = dataset
    text = render(
        "layered_vqa/card.md.jinja",
        source=source,
        license=license,
        rows=len(items),
        scenes=len({i["scene_id"] for i in items}),
        types=sorted(Counter(i["question_type"] for i in items).items()),
        depths=sorted(Counter(len(i["layers"]) for i in items).items()),
        max_difference=max_difference,
        tolerance=tolerance,
        features=list(COLUMNS),
    )

    head = front_matter(
        license=license_id,
        source=source,
        pretty_name="Layered-VQA",
        splits=["test"],
        task_categories=["visual-question-answering"],
        license_terms=license,
    )
    if notes:
        text = text.rstrip("\n") + "\n\n## Build notes\n\n" + "\n".join(f"- {n}" for n in notes)
    return head + text.lstrip("\n") + "\n"
