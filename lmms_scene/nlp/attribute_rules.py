"""spaCy's attribute ruler, applied by table lookup instead of its ``Matcher``.

``en_core_web_sm``'s ``attribute_ruler`` maps the tagger's fine tags to coarse parts of
speech and morphology and fixes a few words ("gonna", "ain't", "it" as subject) with 179
rules. spaCy runs them through its general token ``Matcher``, which cost about 15 % of
CESG's time on cold text. Almost every rule is one token long and tests only ``TAG``,
``LOWER``, ``DEP`` and ``IS_SPACE``, so which single-token rules hit a token depends only
on those four values: :class:`FastRuler` computes that once per distinct combination
and keeps it; the few two-token rules are tested at every position. The hits are then
applied exactly as ``AttributeRuler.set_annotations`` applies the ``Matcher``'s (all
matches found on the unchanged doc first, then applied in rule order, later rules
overriding earlier ones, with spaCy's own ``set_token_attrs``), so every token gets the
same tag, part of speech, morphology, lemma and dependency label
(tests/test_nlp.py compares both on every sentence of the test sets).

A ruler with a pattern form this module does not know (another operator, another
attribute, a quantifier) is left as spaCy built it: :func:`install` returns False.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

#: the token attributes the rules may test, read at once with ``Doc.to_array`` (string
#: ids, 0 when unset) and decoded once per distinct combination
_ARRAY = ["TAG", "LOWER", "DEP", "IS_SPACE"]
#: position of each attribute in a token's feature tuple
_FIELD = {name: i for i, name in enumerate(_ARRAY)}


class UnsupportedPattern(ValueError):
    """A rule uses a pattern form :class:`FastRuler` does not reproduce."""


def _predicate(attr: str, value: Any) -> Callable[[tuple], bool]:
    """One token condition of a Matcher pattern, as a test on a feature tuple."""
    if attr not in _FIELD:
        raise UnsupportedPattern(f"attribute {attr!r}")
    i = _FIELD[attr]
    if isinstance(value, dict):
        if len(value) != 1:
            raise UnsupportedPattern(f"{attr}: {value!r}")
        ((op, arg),) = value.items()
        if op == "IN":
            allowed = frozenset(arg)
            return lambda f: f[i] in allowed
        if op == "NOT_IN":
            banned = frozenset(arg)
            return lambda f: f[i] not in banned
        if op == "REGEX":
            regex = re.compile(arg)
            return lambda f: isinstance(f[i], str) and regex.search(f[i]) is not None
        raise UnsupportedPattern(f"{attr}: operator {op!r}")
    if isinstance(value, bool) or isinstance(value, str):
        return lambda f: f[i] == value
    raise UnsupportedPattern(f"{attr}: {value!r}")


def _token_test(spec: dict) -> Callable[[tuple], bool]:
    if not isinstance(spec, dict) or not spec or "OP" in spec:
        raise UnsupportedPattern(repr(spec))
    tests = [_predicate(attr, value) for attr, value in spec.items()]
    return lambda f: all(test(f) for test in tests)


class FastRuler:
    """The ``match`` and ``set_annotations`` of one ``AttributeRuler`` (same results)."""

    def __init__(self, ruler: Any):
        from spacy.tokens._retokenize import set_token_attrs  # deferred: spaCy is heavy to import

        self._set = set_token_attrs
        self.attrs = list(ruler.attrs)
        self.indices = list(ruler.indices)
        self.single: list[tuple[int, Callable[[tuple], bool]]] = []
        self.multi: list[tuple[int, list[Callable[[tuple], bool]]]] = []
        for rule in range(len(self.attrs)):
            _, patterns = ruler.matcher.get(str(rule))
            for pattern in patterns:
                tests = [_token_test(spec) for spec in pattern]
                if not tests:
                    raise UnsupportedPattern(f"rule {rule}: empty pattern")
                if len(tests) == 1:
                    self.single.append((rule, tests[0]))
                else:
                    self.multi.append((rule, tests))
        self.strings = ruler.vocab.strings
        #: per distinct (TAG, LOWER, DEP, IS_SPACE) ids: the single-token rules that hit and
        #: the multi-token rules whose first token matches
        self._hits: dict[tuple, tuple[tuple[int, ...], tuple[int, ...]]] = {}

    def _features(self, ids: tuple) -> tuple:
        tag, lower, dep, space = ids
        text = self.strings
        return (text[tag] if tag else "", text[lower] if lower else "", text[dep] if dep else "", bool(space))

    def _token_hits(self, ids: tuple) -> tuple[tuple[int, ...], tuple[int, ...]]:
        hits = self._hits.get(ids)
        if hits is None:
            f = self._features(ids)
            hits = (
                tuple(sorted({rule for rule, test in self.single if test(f)})),
                tuple(k for k, (_, tests) in enumerate(self.multi) if tests[0](f)),
            )
            if len(self._hits) < 200_000:
                self._hits[ids] = hits
        return hits

    def hits(self, doc: Any) -> list[tuple[int, int]]:
        """``(rule, token index)`` for every rule that matches, in the order the
        ``AttributeRuler`` applies them (rule, then position)."""
        if not len(doc):
            return []
        rows = [tuple(row) for row in doc.to_array(_ARRAY).tolist()]
        found: set[tuple[int, int, int]] = set()  # (rule, start, end), as the Matcher reports
        n = len(rows)
        for start, ids in enumerate(rows):
            single, multi = self._token_hits(ids)
            for rule in single:
                found.add((rule, start, start + 1))
            for k in multi:
                rule, tests = self.multi[k]
                end = start + len(tests)
                if end <= n and all(tests[j](self._features(rows[start + j])) for j in range(1, len(tests))):
                    found.add((rule, start, end))
        out = []
        for rule, start, end in sorted(found):
            index = self.indices[rule]
            at = (start if index >= 0 else end) + index
            if not start <= at < end:
                raise ValueError(f"attribute rule {rule}: index {index} outside the match {start}-{end}")
            out.append((rule, at))
        return out

    def match(self, doc: Any) -> list[tuple[int, int]]:
        return self.hits(doc)

    def set_annotations(self, doc: Any, matches: list[tuple[int, int]]) -> None:
        for rule, at in matches:
            self._set(doc[at], self.attrs[rule])


def install(nlp: Any, name: str = "attribute_ruler") -> bool:
    """Make ``nlp``'s attribute ruler apply its rules through :class:`FastRuler`; False (the
    ruler untouched) when there is none or a rule has a form FastRuler does not know."""
    if name not in nlp.pipe_names:
        return False
    ruler = nlp.get_pipe(name)
    try:
        fast = FastRuler(ruler)
    except UnsupportedPattern:
        return False
    ruler.match = fast.match
    ruler.set_annotations = fast.set_annotations
    return True
