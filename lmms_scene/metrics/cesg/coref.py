"""CESG stage I (Resolution): pronoun coreference, plural pronouns included.

* :class:`RuleCoref` (offline default): on a spaCy parse, each third-person pronoun is
  replaced by the most salient earlier noun phrase that agrees with it: subjects before
  other nouns, nearer before farther; "they/them/their" take plural nouns or coordinated
  groups ("a man and a woman ... they"), "he/she" take person nouns (WordNet
  ``noun.person``), "it" takes non-person singular nouns. Possessives become "X's".
* :class:`FastCoref` (high fidelity, loaded only when asked): LINGMESS through ``fastcoref``
  (paper, stage I), with ``attn_implementation="eager"`` and our spaCy pipeline passed in.

>>> RuleCoref().resolve("Two workers are on the roof. They are not wearing harnesses.")  # doctest: +SKIP
'Two workers are on the roof. The two workers are not wearing harnesses.'
"""

from __future__ import annotations

import re
from typing import Any

from lmms_scene import cache
from lmms_scene.nlp import MissingNLPComponent
from lmms_scene.nlp.spacy_model import spacy_pipeline
from lmms_scene.nlp.wordnet import lexname

_PLURAL = {"they", "them", "their", "theirs", "themselves"}
_PERSON = {"he", "him", "his", "himself", "she", "her", "hers", "herself"}
_THING = {"it", "its", "itself"}
_POSSESSIVE = {"their", "theirs", "his", "hers", "its"}
_PRONOUNS = _PLURAL | _PERSON | _THING
_QUICK = re.compile(r"\b(" + "|".join(sorted(_PRONOUNS)) + r")\b", re.IGNORECASE)
_NOUN = {"NOUN", "PROPN"}


class RuleCoref:
    name = "lmms-scene rule-based pronoun resolution on spaCy"

    def __init__(self, nlp: Any | None = None):
        self._nlp = nlp

    def provenance(self) -> dict[str, Any]:
        return {"coref": self.name}

    @property
    def nlp(self) -> Any:
        if self._nlp is None:
            self._nlp = spacy_pipeline(merge_compounds=True)
        return self._nlp

    def resolve(self, text: str) -> str:
        return self.resolve_many([text])[0]

    def resolve_many(self, texts: list[str]) -> list[str]:
        """Resolve several texts, parsing only those with a pronoun, in one batch."""
        out = list(texts)
        todo = [i for i, t in enumerate(texts) if _QUICK.search(t)]  # most captions have none: no parse
        for i, doc in zip(todo, self.nlp.pipe([texts[i] for i in todo])):
            out[i] = resolve_doc(doc)
        return out


def _is_person(tok: Any) -> bool:
    try:
        return lexname(tok.lemma_.lower()) == "noun.person"
    except Exception:
        return False


def _plural(tok: Any) -> bool:
    return tok.tag_ in ("NNS", "NNPS") or "Plur" in tok.morph.get("Number")


def _phrase(tok: Any) -> str:
    """'the' + the noun phrase of ``tok`` without determiners or trailing modifiers
    (conjuncts kept: "a man and a woman" -> "the man and woman")."""
    words: list[str] = []
    for t in tok.subtree:
        if t.dep_ in ("det", "poss", "predet", "case"):
            continue
        if t.i > tok.i and t.head.i == tok.i and t.dep_ in ("prep", "relcl", "acl", "punct", "appos"):
            break
        words.append(t.text if t.pos_ == "PROPN" else t.text.lower())
    return "the " + " ".join(words)


def antecedents(doc: Any) -> dict[int, Any]:
    """Each resolvable pronoun's token index -> its antecedent token (a noun; a
    coordinated group is represented by its first conjunct)."""
    candidates: list[tuple[Any, bool, bool, bool]] = []  # (token, plural, person, subject)
    found: dict[int, Any] = {}
    for tok in doc:
        low = tok.lower_
        if tok.pos_ == "PRON" and low in _PRONOUNS:
            want_plural = low in _PLURAL
            best = None
            for cand, plural, person, subject in reversed(candidates):
                if plural != want_plural:
                    continue
                if low in _PERSON and not person:
                    continue
                if low in _THING and person:
                    continue
                if best is None or (subject and not best[3]):
                    best = (cand, plural, person, subject)
                    if subject:
                        break  # the nearest agreeing subject wins, else the nearest noun
            if best is not None:
                found[tok.i] = best[0]
            continue
        if tok.pos_ in _NOUN and tok.dep_ not in ("compound", "poss"):
            coordinated = any(c.dep_ == "conj" and c.pos_ in _NOUN for c in tok.children)
            if tok.dep_ == "conj":
                continue  # part of a group registered at its first conjunct
            plural = _plural(tok) or coordinated
            candidates.append((tok, plural, _is_person(tok) or coordinated, tok.dep_ in ("nsubj", "nsubjpass")))
    return found


def render(tokens: Any, found: dict[int, Any]) -> str:
    """The text of ``tokens`` (a Doc or Span) with each resolved pronoun replaced by its
    antecedent's phrase ("their" -> "the workers'")."""
    out: list[str] = []
    first = True
    for tok in tokens:
        if tok.i in found:
            low = tok.lower_
            text = _phrase(found[tok.i])
            if low in _POSSESSIVE or (low == "her" and tok.dep_ == "poss"):
                text += "'" if text.endswith("s") else "'s"
            if first or tok.is_sent_start:
                text = text[0].upper() + text[1:]
            out.append(text + tok.whitespace_)
        else:
            out.append(tok.text_with_ws)
        first = False
    return "".join(out)


def resolve_doc(doc: Any) -> str:
    return render(doc, antecedents(doc))


class FastCoref:
    """LINGMESS via ``fastcoref`` (high fidelity; needs the package and its checkpoint)."""

    name = "LINGMESS (fastcoref)"

    def __init__(self, device: str = "cpu"):
        def load() -> Any:
            try:
                from fastcoref import LingMessCoref  # deferred: optional (fastcoref may not be installed)
            except ImportError as exc:
                raise MissingNLPComponent(
                    "LINGMESS needs `pip install fastcoref` and its checkpoint (biu-nlp/lingmess-coref)"
                ) from exc

            return LingMessCoref(device=device, nlp=spacy_pipeline(disable=()), attn_implementation="eager")

        self._model = cache.cached(("fastcoref", device), load)

    def provenance(self) -> dict[str, Any]:
        return {"coref": self.name}

    def resolve(self, text: str) -> str:
        pred = self._model.predict(texts=[text])[0]
        clusters = pred.get_clusters(as_strings=False)
        replacements: list[tuple[int, int, str]] = []
        for cluster in clusters:
            head_start, head_end = cluster[0]
            head = text[head_start:head_end]
            for start, end in cluster[1:]:
                if text[start:end].lower() in _PRONOUNS:
                    replacements.append((start, end, head))
        for start, end, head in sorted(replacements, reverse=True):
            text = text[:start] + head + text[end:]
        return text
