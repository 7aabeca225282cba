"""The dataset card (README.md) of a built SNUS dataset, rendered from
``templates/cards/snus.md.jinja`` (as COOCO's and Layered-VQA's)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lmms_scene.data.card import front_matter
from lmms_scene.prompts import render


def card(dataset: Mapping[str, Any], source: str, notes: Sequence[str] = ()) -> str:
    """The dataset card (source, license, splits, fields) of the splits ``dataset``;
    ``notes``: build decisions to record."""
    head = front_matter(
        license="other",
        source=str(source),
        pretty_name="SNUS",
        splits=list(dataset),
        task_categories=["image-to-text"],
        license_terms="as the original release",
        language=["en"],
    )
    text = render("cards/snus.md.jinja", source=source, splits=[(name, len(ds)) for name, ds in dataset.items()])
    return head + text + "\n" + ("\n## Build notes\n\n" + "\n".join(f"- {n}" for n in notes) + "\n" if notes else "")
