"""CESG stage II (Transformation): strip negation modifiers to get the affirmative text.

Paper, "Stage II: Transformation": the stripped text may be ungrammatical; the parser
copes. The same function builds the AC (affirmative caption) stress-test baseline.
The cue list is the one the dependency-rule parser reads as negation, so an AC text has
no absent information left for it to find.

>>> strip_negation("The worker isn't wearing a helmet and there is no guardrail.")
'The worker is wearing a helmet and there is guardrail.'
>>> strip_negation("Neither the man nor the woman wears gloves; the ladder lacks feet.")
'Both the man and the woman wears gloves; the ladder has feet.'
"""

from __future__ import annotations

import re

PROVENANCE = {"negation_stripping": "lmms-scene lexical rules (no/not/n't/never/without/neither-nor/none/lack/missing/absent)"}

_NT = {"ca": "can", "wo": "will", "sha": "shall", "ai": "is"}


def _case(src: str, repl: str) -> str:
    return repl[:1].upper() + repl[1:] if src[:1].isupper() and repl else repl


def _sub(pattern: str, repl, text: str) -> str:
    def f(m: re.Match) -> str:
        r = repl(m) if callable(repl) else repl
        return _case(m.group(0), r)

    return re.sub(pattern, f, text, flags=re.IGNORECASE)


_LACK = {"lack": "have", "lacks": "has", "lacked": "had", "lacking": "having"}


def strip_negation(text: str) -> str:
    """The affirmative counterpart of ``text`` (CESG stage II; the AC baseline)."""
    if not isinstance(text, str):
        raise TypeError(f"text: expected a string, got {type(text).__name__}: {text!r}")
    t = text.replace("\u2019", "'")
    t = _sub(r"\b(\w+?)n't\b", lambda m: _NT.get(m.group(1).lower(), m.group(1)), t)
    t = _sub(r"\bcannot\b", "can", t)
    t = _sub(r"\bneither\s+of\b", "both of", t)
    t = _sub(r"\bneither\b", "both", t)
    t = _sub(r"\bnor\b", "and", t)
    t = _sub(r"\bnone\s+of\b", "all of", t)
    t = _sub(r"\bno\s+one\b|\bnobody\b", "someone", t)
    t = _sub(r"\bnothing\b", "something", t)
    t = _sub(r"\bno\s+longer\b", "", t)
    t = _sub(r"\bwithout\b", "with", t)
    t = _sub(r"\b(lack|lacks|lacked|lacking)\b", lambda m: _LACK[m.group(1).lower()], t)
    # "X is missing/absent." -> "X is present."; "is missing a helmet" -> "has a helmet";
    # attributive "a missing guardrail" -> "a guardrail".
    t = _sub(r"\b(missing|absent)\b(?=\s*(?:[.,;:!?)]|$|and\b|or\b|from\b))", "present", t)
    t = _sub(r"\b(is|are|was|were)\s+missing\b", lambda m: {"is": "has", "was": "had"}.get(m.group(1).lower(), "have"), t)
    t = _sub(r"\b(missing|absent)\s+", "", t)
    t = _sub(r"\b(not|never|no)\b\s*", "", t)
    return re.sub(r"[ \t]{2,}", " ", t).replace(" .", ".").strip()
