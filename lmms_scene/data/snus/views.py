"""What SNUS's task and blind prior need from rows beyond the row itself."""

from __future__ import annotations

from collections.abc import Iterable

from lmms_scene.nlp.sentences import split_sentences


def negative_statements(captions: Iterable[str]) -> list[str]:
    """Every sentence of the captions (for the blind prior)."""
    return [s for c in captions for s in split_sentences(c)]
