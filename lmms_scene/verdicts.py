"""The one verdict parser of an LLM judge's reply (:func:`parse_verdict`, :func:`read_verdict`),
used by every judge provider (:mod:`lmms_scene.judges`) and CESG's judges; a numeric grade
is read only against the pass mark our prompt template names (:func:`score_threshold`).
Standard library only: nothing here asks a model.

>>> parse_verdict("Yes."), parse_verdict("Not correct."), parse_verdict("Score: 0/10")
(True, False, None)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

# -- the strict verdict parser ---------------------------------------------------------
#
# A judge is asked for one word, yes or no, so the verdict's position is the start of the
# reply. parse_verdict reads it there (after markup and a "Verdict:"-style label), as a
# verdict word standing alone: followed by the end, punctuation, or a new clause ("Yes, it
# is", "No the model ..."), never by a word it qualifies ("Correct answer: red",
# "No doubt", "Right answer would be", "Yes and no", "yes/no"). The rest of the reply may
# explain, never contradict. A reply that does not start with a verdict is read only when
# a sentence states one about the model's answer ("It's correct.", "The model answer is
# wrong.", "The gold answer is not the same as the model answer.", "The right answer would
# be red.") or is a verdict alone ("... Verdict: no."). Anything else, a hedge ("partly",
# "probably", "I think") in the verdict's sentence, or signals both ways is None: counted as
# unparsed, never guessed.

_TAGS = re.compile(r"</?[a-z_]+>")
_MARKUP = re.compile(r"[*_`#>\"“”«»]+")
_LABEL = re.compile(
    r"^(?:(?:final|my|the|overall)\s+)?(?:verdict|answer|judgement|judgment|decision|result|grade|output|response|"
    r"evaluation|assessment|reply|conclusion)(?:\s+is)?\s*[:\-=]\s*"
)
#: verdict words, longest first (a no before its yes: "not correct" before "correct")
_NO_WORDS = r"not\s+correct|not\s+right|not\s+true|not\s+the\s+same|not\s+equivalent|incorrect|wrong|false|different|no"
_YES_WORDS = r"yes|correct|right|true|the\s+same|same|equivalent"
_WORD = rf"(?P<word>{_NO_WORDS}|{_YES_WORDS})"
#: what may follow a verdict word that stands alone: the end, punctuation, a new line, or a new clause
_ALONE = r"(?=\s*$|\s*[.!,;:()\[\]\n\-–—]|\s+(?:it|it's|that|that's|this|the|they|both|because|since|which|so|its|model|there|here|as\s+the|at\s+all)\b)"
_EMPHASIS = (
    r"(?:absolutely|definitely|certainly|clearly|totally|completely|entirely|fully|perfectly|quite|indeed|surely)"
)
_HEAD = re.compile(rf"^(?:{_EMPHASIS}\s+)?{_WORD}{_ALONE}|^{_EMPHASIS}\s+(?P<no>not){_ALONE}")
#: a sentence, or its last clause, that is nothing but a verdict ("Yes." "Verdict: no." "..., so no.")
_ONLY = re.compile(
    r"^(?:(?:so|therefore|thus|hence|overall|in\s+conclusion|in\s+short|i\s+would\s+say|i'd\s+say|i\s+say)[,:]?\s+)?"
    rf"(?:(?:my|the|final)\s+(?:verdict|judgement|judgment)\s+is\s*:?\s*|my\s+answer\s+is\s*:?\s*)?{_WORD}\s*[.!]*$"
)
#: after a yes, what contradicts it or takes it back: a negated or negative verdict term, a reservation
_CONTRA_YES = re.compile(
    r"\b(?:not|never|n't|no\s+longer)\s+(?:\w+\s+){0,2}?(?:correct|right|true|accurate|the\s+same|equivalent|a\s+match|match(?:es|ing)?)\b"
    r"|n't\s+(?:\w+\s+){0,2}?(?:correct|right|true|accurate|the\s+same|equivalent|a\s+match|match(?:es|ing)?)\b"
    r"|\b(?:incorrect|wrong|false|inaccurate|mistaken|mismatch(?:ed)?)\b"
)
#: after a yes, a reservation in the same sentence as the verdict takes it back ("Yes, but ...");
#: in a later sentence it explains ("Yes, the candidate is correct. However, the reference also ...")
_RESERVATION = re.compile(r"\b(?:but|however|although|though|except|different|differs?)\b")
#: "partially correct" is neither yes nor no, wherever it stands
_PARTIAL = re.compile(r"\b(?:partially|partly|half|somewhat|mostly)\s+(?:correct|right|accurate|true|matches|match)\b")
#: a hedge in the verdict's own sentence
_HEDGE = re.compile(
    r"\b(?:partially|partly|mostly|somewhat|half|probably|possibly|perhaps|maybe|might|likely|unlikely|arguably|"
    r"almost|nearly|roughly|approximately|unsure|unclear|if|unless|depends|seems?|appears?|kind\s+of|sort\s+of|"
    r"more\s+or\s+less|not\s+sure|i\s+think|i\s+believe|i\s+guess|can't\s+tell|cannot\s+tell|hard\s+to\s+say)\b"
)
# statements about the model's answer: subject, verb, predicate. A pronoun subject only
# where a clause starts ("No doubt, it's correct"), never "the shape that is correct".
_CLAUSE = r"(?:^|(?<=[,;:(]\s)|(?<=[,;:(])|(?<=\bbut\s)|(?<=\band\s)|(?<=\bso\s)|(?<=\byet\s))"
_WORD_START = r"(?:^|(?<=[\s,;:(]))"
_QUOTED = r"(?:\s+(?:of\s+)?'[^']{0,60}'|\s+\([^)]{0,60}\))?"
_MODEL_NOUN = (
    r"(?:(?:the|this|that|its)\s+)?(?:model'?s?|predicted|candidate'?s?|given|provided|generated)\s+(?:answer|prediction|response|reply)"
    r"|the\s+candidate|the\s+response|the\s+prediction"
    r"|(?:the|this|that)\s+(?:answer|prediction|response|reply)(?:\s+(?:given|provided|generated)(?:\s+by\s+the\s+model)?)?"
    r"|(?:the|this|that)\s+(?:claim|statement)|the\s+model"
)
_ANY_NOUN = (
    r"(?:(?:the|this|that)\s+)?(?:(?:gold|reference|correct|expected|true|model'?s?|predicted|candidate|given|provided|generated)\s+)?"
    r"(?:answers?|predictions?|responses?)|both\s+answers|the\s+two(?:\s+answers)?|a\s+and\s+b"
)
_MODEL = rf"(?:{_WORD_START}(?:{_MODEL_NOUN}){_QUOTED}|{_CLAUSE}(?:it|this|that))"
_ANY = rf"(?:{_WORD_START}(?:{_ANY_NOUN}){_QUOTED}|{_CLAUSE}(?:it|this|that|they|both))"
_BE = r"(?:'s|\s+is|\s+was|\s+are|\s+were)"
_BE_NOT = r"(?:'s\s+not|\s+(?:is|was|are|were)\s+not|\s+(?:isn't|wasn't|aren't|weren't))"
_ADV = r"(?:\s+(?:absolutely|entirely|completely|fully|definitely|indeed|clearly|totally|perfectly|exactly|also|still|actually))?"
_GOOD = r"(?:correct|right|true|accurate|valid|acceptable|(?:the\s+)?(?:correct|right)\s+(?:answer|one))"
_BAD = r"(?:incorrect|wrong|false|inaccurate|invalid|mistaken)"
_SAME = r"(?:the\s+same|equivalent|identical|consistent\s+with|in\s+agreement|a\s+match)"
_END = r"(?=$|[\s.,!;:)\]])"
_YES_STATEMENTS = re.compile(
    rf"{_MODEL}{_BE}{_ADV}\s+{_GOOD}{_END}"
    rf"|{_ANY}{_BE}{_ADV}\s+{_SAME}{_END}"
    rf"|{_ANY}\s+(?:match(?:es)?|agrees?\s+with|means?\s+the\s+same|correspond(?:s)?\s+to){_END}"
    rf"|{_WORD_START}the\s+model\s+(?:answered|responded|got\s+it)\s+(?:correctly|right){_END}"
)
_NO_STATEMENTS = re.compile(
    rf"{_MODEL}{_BE_NOT}{_ADV}\s+{_GOOD}{_END}"
    rf"|{_MODEL}{_BE}{_ADV}\s+{_BAD}{_END}"
    rf"|{_ANY}{_BE_NOT}{_ADV}\s+{_SAME}{_END}"
    rf"|{_ANY}{_BE}{_ADV}\s+(?:different|distinct){_END}"
    rf"|{_ANY}\s+(?:does\s+not|doesn't|do\s+not|don't)\s+(?:match|agree|mean\s+the\s+same|correspond){_END}"
    rf"|{_ANY}\s+differs?{_END}"
    rf"|{_WORD_START}the\s+model\s+(?:answered|responded|got\s+it)\s+(?:incorrectly|wrong|wrongly){_END}"
    rf"|{_MODEL}\s+(?:does\s+not|doesn't|did\s+not|didn't)\s+(?:provide|give|contain|offer|state|reach|identify)\s+(?:a|the|any)\s+(?:correct|right|accurate|valid)\b"
    rf"|{_MODEL}\s+(?:fails|failed|fail)\s+to\b"
    rf"|{_MODEL}{_BE}{_ADV}\s+(?:incorrect|wrong)\s+(?:because|since|as)\b"
    # a correction: what the answer would or should have been
    rf"|{_WORD_START}(?:the\s+)?(?:correct|right|actual|real|true)\s+answer\s+(?:would|should)\s+(?:be|have\s+been){_END}"
)
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")


@dataclass(frozen=True)
class Verdict:
    """What :func:`read_verdict` read: ``value`` (True, False or None) and the rule that
    decided (``head``, ``statement``, ``alone``, or why there is none)."""

    value: bool | None
    rule: str


def _normalise(text: str) -> str:
    text = _TAGS.sub(" ", text.lower().replace("’", "'").replace("‘", "'"))
    lines = (" ".join(_MARKUP.sub(" ", line).split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def _is_no(word: str) -> bool:
    return re.fullmatch(_NO_WORDS, " ".join(word.split())) is not None


def _evidence(sentences: list[str]) -> tuple[list[str], list[str]]:
    """The sentences stating yes and those stating no (questions skipped)."""
    yes, no = [], []
    for s in sentences:
        if s.endswith("?"):
            continue
        only = _ONLY.match(_LABEL.sub("", s, count=1)) or _ONLY.match(s.rsplit(",", 1)[-1].strip())
        if only:
            (no if _is_no(only.group("word")) else yes).append(s)
            continue
        if _YES_STATEMENTS.search(s):
            yes.append(s)
        if _NO_STATEMENTS.search(s):
            no.append(s)
    return yes, no


_SCORE_ASKED = re.compile(r"\b(?:scores?|rates?|ratings?|grades?|points?)\b", re.IGNORECASE)
_THRESHOLD = (
    (
        re.compile(
            r"(?:score|rating|grade|points?)s?\s+(?:of\s+)?(?:>=|≥|at\s+least|of\s+at\s+least|greater\s+than\s+or\s+equal\s+to|or\s+more\s+than)\s*(\d+(?:\.\d+)?)",
            re.IGNORECASE,
        ),
        False,
    ),
    (re.compile(r"(\d+(?:\.\d+)?)\s+or\s+(?:above|higher|more|greater)", re.IGNORECASE), False),
    (
        re.compile(
            r"(?:score|rating|grade|points?)s?\s+(?:>|above|greater\s+than|over|higher\s+than)\s*(\d+(?:\.\d+)?)",
            re.IGNORECASE,
        ),
        True,
    ),
    (re.compile(r"\bthreshold\s*(?:of|is|=|:)?\s*(\d+(?:\.\d+)?)", re.IGNORECASE), False),
    (
        re.compile(
            r"\b(1(?:\.0)?)\s+(?:if|for|when)\s+(?:it\s+is\s+|the\s+\w+\s+is\s+)?(?:correct|right)\b", re.IGNORECASE
        ),
        False,
    ),
)
_GRADE = re.compile(
    r"\[\[\s*(\d+(?:\.\d+)?)\s*\]\]"
    r"|^(?:(?:final\s+)?(?:score|rating|grade)\s*[:=]?\s*)?(\d+(?:\.\d+)?)\s*(?:/\s*\d+(?:\.\d+)?|out\s+of\s+\d+)?\s*[.!]?$"
    r"|\b(?:final\s+)?(?:score|rating|grade)\s*[:=]\s*(\d+(?:\.\d+)?)"
)


def score_threshold(prompt: str | None) -> tuple[float, bool] | None:
    """The pass mark a judge prompt names for a numeric grade, as (threshold, strict):
    "a score of at least 0.5 counts as correct" -> (0.5, False), "scores above 7" -> (7, True),
    "1 if correct, 0 otherwise" -> (1, False). None when the prompt asks for no score or
    names no threshold (then a numeric reply stays unparsed: no threshold is guessed)."""
    if (
        not isinstance(prompt, str)
        or not _SCORE_ASKED.search(prompt)
        and not re.search(r"\b1\s+(?:if|for|when)\b", prompt)
    ):
        return None
    for pattern, strict in _THRESHOLD:
        m = pattern.search(prompt)
        if m:
            return float(m.group(1)), strict
    return None


def _numeric_grade(norm: str) -> float | None:
    """The one number a reply grades with ("1.0", "Score: 0.5", "[[8]]", "7/10"), or None
    (no grade, or several different ones)."""
    found = []
    for line in norm.splitlines():
        for m in _GRADE.finditer(line.strip()):
            found.append(float(next(g for g in m.groups() if g is not None)))
    return found[-1] if found and len(set(found)) == 1 else None


def read_verdict(text: Any, rubric: str | None = None) -> Verdict:
    """A judge's reply read strictly (see the comment above); :func:`parse_verdict` is its
    ``value``. A numeric grade ("1.0", "Score: 0.5", "[[8]]") is read only when ``rubric``
    (our judge prompt's instructions, before any outside text is filled in) asked for a
    score and named its pass mark (:func:`score_threshold`); otherwise it is unparsed.
    "Partially correct" is never yes or no."""
    if not isinstance(text, str):
        return Verdict(None, "not text")
    norm = _normalise(text)
    if _PARTIAL.search(norm):
        return Verdict(None, "partially correct")
    grade, rule = _numeric_grade(norm), score_threshold(rubric)
    if grade is not None and rule is not None:
        threshold, strict = rule
        passed = grade > threshold if strict else grade >= threshold
        words = _read_words(norm)
        if words.value is not None and words.value is not passed:
            return Verdict(None, f"score {grade:g} and words disagree")
        return Verdict(passed, f"score {grade:g} against {'>' if strict else '>='} {threshold:g}")
    verdict = _read_words(norm)
    if verdict.value is None and grade is not None:
        return Verdict(
            None, "a score the rubric named no pass mark for" if rubric else "a score with no rubric that asked for one"
        )
    return verdict


def _read_words(norm: str) -> Verdict:
    norm = _LABEL.sub("", norm, count=1).strip()
    if not norm:
        return Verdict(None, "empty")
    sentences = [s.strip() for s in _SENTENCE.split(norm) if s.strip()]
    head = _HEAD.match(norm)
    if head is not None:
        verdict = head.group("no") is None and not _is_no(head.group("word"))
        first = sentences[0] if sentences else norm
        # a hedge in the verdict's sentence; after a yes, anywhere
        if _HEDGE.search(first) or (verdict and _HEDGE.search(norm)):
            return Verdict(None, "hedged")
        rest = norm[head.end() :]
        yes, no = _evidence(_SENTENCE.split(rest.strip()) if rest.strip() else [])
        # after a yes: a contradiction anywhere, or a reservation in the verdict's own sentence,
        # takes it back; a later "However, the reference also ..." explains
        if verdict and (
            _CONTRA_YES.search(rest)
            or no
            or _RESERVATION.search(first[head.end() :] if len(first) >= head.end() else "")
        ):
            return Verdict(None, "yes, then a contradiction")
        if not verdict and (re.search(r"\byes\b", rest) or yes):
            return Verdict(None, "no, then a contradiction")
        return Verdict(verdict, "head")
    yes, no = _evidence(sentences)
    if yes and no:
        return Verdict(None, "both ways")
    if not yes and not no:
        return Verdict(None, "no verdict")
    found = yes or no
    if any(_HEDGE.search(s) for s in found):
        return Verdict(None, "hedged")
    if yes and any(_CONTRA_YES.search(s) or _RESERVATION.search(s) for s in yes):
        return Verdict(None, "yes, then a contradiction")
    return Verdict(bool(yes), "statement")


def parse_verdict(text: Any, rubric: str | None = None) -> bool | None:
    """A judge's reply read strictly: True for an unambiguous yes/correct, False for an
    unambiguous no/incorrect, None for anything else (hedged, scored, empty, both ways,
    no verdict at all). The one verdict parser: every judge provider's reply goes
    through it (:func:`ask`).

    >>> [parse_verdict(t) for t in ("Correct", "**No**", "The answer is correct.", "1", "Yes and no")]
    [True, False, True, None, None]
    >>> [parse_verdict(t) for t in ("Correct answer: red. The model answered blue.", "No doubt, it's correct.")]
    [None, True]
    """
    return read_verdict(text, rubric).value
