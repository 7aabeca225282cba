"""What computed a score: every score lmms-scene writes carries one of these records,
so that two runs can be compared honestly."""

from __future__ import annotations

from typing import Any

from lmms_scene import __version__


def scorer(name: str, **details: Any) -> dict[str, Any]:
    """A provenance record for a score.

    >>> scorer("refclipscore", clip_model="openai/clip-vit-base-patch32")["scorer"]
    'refclipscore'
    """
    return {"scorer": name, "lmms_scene_version": __version__, **details}
