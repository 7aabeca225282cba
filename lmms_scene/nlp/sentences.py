"""Sentence splitting (CESG stage III).

The paper uses NLTK's Punkt, whose trained model (``punkt_tab``) is a download that is
not available offline. ``nupunkt``'s bundled model was tried and rejected: it keeps
"... to the wall. A welder is ..." as one sentence (it reads "A" after a period as an
initial), which is common in captions. So the offline default is a rule splitter: a
sentence ends at ``.``, ``!`` or ``?`` (plus closing quotes/brackets) followed by
whitespace and an upper-case letter, digit or opening quote, unless the word before
the period is a known abbreviation or a single-letter initial.

>>> split_sentences("There is no guardrail. A worker is not wearing a helmet.")
['There is no guardrail.', 'A worker is not wearing a helmet.']
>>> split_sentences("Mr. Smith is on the U.S. site! J. Doe has no vest.")
['Mr. Smith is on the U.S. site!', 'J. Doe has no vest.']
"""

from __future__ import annotations

import re

PROVENANCE = {"sentence_splitter": "lmms-scene rule splitter (terminal punctuation + capital; abbreviations kept)"}

ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st sr jr inc ltd co corp vs etc e.g i.e u.s u.k no approx dept fig est min max mt ave rd".split()
)
_BOUNDARY = re.compile(r"([.!?]+[\"')\]\u201d\u2019]*)(\s+)(?=[\"'(\[\u201c\u2018]?[A-Z0-9])")


def split_sentences(text: str) -> list[str]:
    """The sentences of ``text``, stripped, empty ones dropped."""
    if not isinstance(text, str):
        raise TypeError(f"text: expected a string, got {type(text).__name__}: {text!r}")
    out: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        before = text[start : m.start(1)].split()
        word = before[-1].lower().rstrip(".") if before else ""
        if m.group(1).startswith(".") and (word in ABBREVIATIONS or (len(word) == 1 and word.isalpha())):
            continue
        out.append(text[start : m.end(1)])
        start = m.end(2)
    out.append(text[start:])
    return [s.strip() for s in out if s.strip()]
