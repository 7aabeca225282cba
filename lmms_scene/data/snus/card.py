"""The dataset card (README.md) of a built SNUS dataset."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lmms_scene.data.card import front_matter


def card(dataset: Mapping[str, Any], source: str, notes: Sequence[str] = ()) -> str:
    """The dataset card (source, license, splits, fields) of the splits ``dataset``;
    ``notes``: build decisions to record."""
    splits = "\n".join(f"| {name} | {len(ds)} |" for name, ds in dataset.items())
    head = front_matter(
        license="other",
        source=str(source),
        pretty_name="SNUS",
        splits=list(dataset),
        task_categories=["image-to-text"],
        license_terms="as the original release",
        language=["en"],
    )
    return (
        head
        + f"""# SNUS (Scene Negation Understanding under Safety cognition)

Converted by `lmms-scene build snus` from {source}.
Paper: Jiang et al., "Benchmarking MLLMs via Cognitive Expected Scene Graph for
Safety-Critical Visual Negation Understanding". License: as the original release.

| split | rows |
|---|---|
{splits}

Fields: `image_id`, `image`, `caption` (the negative caption), `missing_objects`,
`missing_attributes` (object, attribute), `missing_relations` (subject, relation, object), `scene`.
"""
        + ("\n## Build notes\n\n" + "\n".join(f"- {n}" for n in notes) + "\n" if notes else "")
    )
