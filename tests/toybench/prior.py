"""ToyBench's blind prior: what ``scene_blind`` answers without the image."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def blind_answer(doc: Mapping[str, Any], prompt: str) -> str:
    """Always "Yes." (the question names a colour; a blind guess says it is there)."""
    return "Yes."
