"""How negation is written, in one place: CESG stage II (stripping negation to get the
affirmative text), the lexical negation lexicon (``unsecured``, ``helmetless``) and the
normalisation of list-style model outputs into sentences.

Paper, "Stage II: Transformation": the stripped text may be ungrammatical; the parser
copes. The same function builds the AC (affirmative caption) stress-test baseline.
The cue list is the one the dependency-rule parser reads as negation, so an AC text has
no absent information left for it to find.

Lists (:func:`normalise_lists`): vision-language models often answer as lists
("Helmet: absent.", "- gloves: not worn", "Missing safety items:" followed by bullets,
"The worker is not wearing:" followed by items). Each line becomes a sentence the parser
reads ("There is no helmet.", "The worker is not wearing gloves.") before stage I.

>>> strip_negation("The worker isn't wearing a helmet and there is no guardrail.")
'The worker is wearing a helmet and there is guardrail.'
>>> strip_negation("Neither the man nor the woman wears gloves; the ladder lacks feet.")
'Both the man and the woman wears gloves; the ladder has feet.'
"""

from __future__ import annotations

import re

from lmms_scene import cache
from lmms_scene.nlp.wordnet import lexname, morphy

PROVENANCE = {
    "negation_stripping": "lmms-scene lexical rules (no/not/n't/never/nowhere/without/sans/devoid of/neither-nor/none/lack/missing/absent/un-X/X-less)",
    "list_normalisation": "lmms-scene rules (item: verdict lines, negative headers, bullets and numbering)",
}

_NT = {"ca": "can", "wo": "will", "sha": "shall", "ai": "is"}


def _case(src: str, repl: str) -> str:
    return repl[:1].upper() + repl[1:] if src[:1].isupper() and repl else repl


def _sub(pattern: str, repl, text: str) -> str:
    def f(m: re.Match) -> str:
        r = repl(m) if callable(repl) else repl
        return _case(m.group(0), r)

    return re.sub(pattern, f, text, flags=re.IGNORECASE)


_LACK = {"lack": "have", "lacks": "has", "lacked": "had", "lacking": "having"}


# -- lexical negation: un-X participles and X-less adjectives ---------------------------

#: -less words that do not state a missing safety item
_LESS_EXCLUDED = frozenset(
    "wireless cordless stainless seamless brushless tubeless keyless bagless strapless sleeveless backless topless "
    "armless legless wingless handless endless countless careless useless harmless regardless unless nevertheless "
    "doubtless fearless flawless spotless timeless".split()
)
#: un- words that are not "not X" ("unit", "under...", "unloading" are not participles anyway)
_UN_EXCLUDED = frozenset("united unrivalled unparalleled unbeknownst".split())


def lexical_negation(word: str) -> tuple[str, str] | None:
    """``("un", verb)`` for a negated participle ("unsecured" -> secure, "unlit" -> light),
    ``("less", noun)`` for an X-less adjective naming a missing artifact ("helmetless" ->
    helmet), else None. Uses WordNet (morphology and lexicographer files); memoised."""
    w = word.lower()
    if len(w) < 5 or not (w.startswith("un") or w.endswith("less")) or not w.isalpha():
        return None

    return cache.memo("cesg.lexical_negation", w, lambda: _lexical(w))


def _lexical(w: str) -> tuple[str, str] | None:
    if w.startswith("un") and w not in _UN_EXCLUDED:
        stem = w[2:]
        verb = morphy(stem, "v")
        # a past participle of a real verb: "secured", "guarded", "lit" (morphy's exceptions)
        if (
            verb
            and verb != stem
            and (
                stem.endswith(("ed", "en", "wn"))
                or stem in ("lit", "shut", "set", "cut", "put", "built", "kept", "held", "tied")
            )
        ):
            return ("un", verb)
        return None
    if w.endswith("less") and w not in _LESS_EXCLUDED:
        stem = w[:-4]
        noun = morphy(stem, "n") or stem
        if lexname(noun) == "noun.artifact":
            return ("less", noun)
    return None


_LEXICAL_WORD = re.compile(r"\b(un[a-z]{4,}|[a-z]{2,}less)\b", re.IGNORECASE)


def _strip_lexical(t: str) -> str:
    def f(m: re.Match) -> str:
        found = lexical_negation(m.group(1))
        if found is None:
            return m.group(0)
        kind, stem = found
        return m.group(1)[2:] if kind == "un" else f"with {stem}"

    return _LEXICAL_WORD.sub(f, t)


def strip_negation(text: str) -> str:
    """The affirmative counterpart of ``text`` (CESG stage II; the AC baseline)."""
    if not isinstance(text, str):
        raise TypeError(f"text: expected a string, got {type(text).__name__}: {text!r}")
    t = text.replace("\u2019", "'")
    t = _strip_lexical(t)
    t = _sub(r"\bnowhere\b", "here", t)
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
    t = _sub(r"\bsans\b", "with", t)
    t = _sub(r"\b(devoid|bereft)\s+of\b", "full of", t)
    t = _sub(r"\b(lack|lacks|lacked|lacking)\b", lambda m: _LACK[m.group(1).lower()], t)
    # "X is missing/absent." -> "X is present."; "is missing a helmet" -> "has a helmet";
    # attributive "a missing guardrail" -> "a guardrail".
    t = _sub(r"\b(missing|absent)\b(?=\s*(?:[.,;:!?)]|$|and\b|or\b|from\b))", "present", t)
    t = _sub(
        r"\b(is|are|was|were)\s+missing\b", lambda m: {"is": "has", "was": "had"}.get(m.group(1).lower(), "have"), t
    )
    t = _sub(r"\b(missing|absent)\s+", "", t)
    t = _sub(r"\b(not|never|no)\b\s*", "", t)
    return re.sub(r"[ \t]{2,}", " ", t).replace(" .", ".").strip()


# -- list-style outputs ------------------------------------------------------------------

#: verdicts after "Item:" that say the item is not there
ABSENT_VERDICTS = frozenset(
    {
        "absent",
        "missing",
        "none",
        "no",
        "lacking",
        "nowhere",
        "not present",
        "not visible",
        "not found",
        "not seen",
        "not detected",
        "not observed",
        "not provided",
        "not available",
        "not installed",
        "not worn",
        "not used",
        "not in place",
        "not fitted",
        "not equipped",
        "not apparent",
        "not evident",
        "not identified",
        "not there",
        "not wearing",
        "not visible anywhere",
        "none visible",
        "none present",
        "none seen",
        "not applicable",
        "x",
        "✗",
        "❌",
    }
)
#: verdicts that say the item is there
PRESENT_VERDICTS = frozenset(
    {
        "present",
        "yes",
        "worn",
        "visible",
        "ok",
        "okay",
        "in place",
        "installed",
        "provided",
        "available",
        "used",
        "fitted",
        "secured",
        "on",
        "seen",
        "detected",
        "observed",
        "there",
        "✓",
        "✔",
        "✅",
        "present and worn",
        "in use",
    }
)
#: words that make a header ("Missing safety items:") announce absent items
_NEGATIVE_HEADER = re.compile(
    r"\b(missing|absent|lacking|lacks|lack|without|not\s+present|not\s+visible|not\s+found|not\s+worn|not\s+provided|"
    r"not\s+available|not\s+installed|not\s+seen|nowhere|no)\b",
    re.IGNORECASE,
)
#: a header ending in one of these continues into its items ("The worker is not wearing:")
_OPEN_ENDINGS = frozenset("of with without has have lacks lack include includes including are is wear wears".split())
_MARKUP = re.compile(r"(\*\*|__|`|^#+\s*)")
_BULLET = re.compile(r"^\s*(?:[-*\u2022\u00b7\u25cf\u25aa>]+|\(?\d{1,3}[.)]|\(?[a-z][.)](?=\s))\s*")
_ITEM_SEP = re.compile(r"^(?P<head>[^:\n]{1,80}?)\s*(?::|\s[-\u2013\u2014]\s|\u2014|\u2013)\s*(?P<rest>.*)$")
_HTML = re.compile(r"<[^<>]{0,200}>")
_APOSTROPHE = re.compile(r"(?<=[A-Za-z])\u2019(?=[A-Za-z])")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_VERBISH = re.compile(
    r"\b(is|are|was|were|be|been|has|have|had|does|do|did|can|cannot|could|will|would|should|wears?|wearing|stands?|standing|works?|working|seems?|appears?)\b",
    re.IGNORECASE,
)


def _verdict(rest: str) -> str | None:
    v = re.sub(r"[.!;]+$", "", rest.strip().lower()).strip()
    v = re.sub(r"^\((.*)\)$", r"\1", v)
    if v in ABSENT_VERDICTS:
        return "absent"
    if v in PRESENT_VERDICTS:
        return "present"
    m = re.fullmatch(r"not\s+([a-z]+(?:ed|en|t))", v)
    if m:
        return "not " + m.group(1)
    return None


def _items(rest: str) -> list[str]:
    parts = re.split(r"\s*(?:,|;|\band\b|\bor\b)\s*", re.sub(r"[.!]+$", "", rest.strip()))
    return [p.strip() for p in parts if p.strip()]


def _sentence(text: str) -> str:
    text = text.strip()
    if not text:
        return ""
    text = text[0].upper() + text[1:]
    return text if text[-1] in ".!?" else text + "."


def _is_bare(item: str) -> bool:
    """A short noun phrase, not a clause ("hard hat", "a safety vest")."""
    return len(item.split()) <= 6 and not _VERBISH.search(item)


def _np(item: str) -> str:
    """The item as a noun phrase after "There is no": article dropped, a capitalised first
    word lowered (list items are capitalised; acronyms such as PPE kept)."""
    item = re.sub(r"^(?:a|an|the|any)\s+", "", item.strip(), flags=re.IGNORECASE)
    first, _, rest = item.partition(" ")
    if first[:1].isupper() and not first.isupper():
        first = first.lower()
    return f"{first} {rest}".strip()


#: prepositions that end the naming part of an entity head ("Man on the left")
_HEAD_PREPS = frozenset(
    "on in at near by beside behind under above below next inside outside from with without wearing holding standing working".split()
)
#: how a per-entity verdict starts: "no hard hat", "not wearing a harness", "lacks gloves"
_ENTITY_NEG = re.compile(
    r"^(?:no|not|isn't|is\s+not|doesn't|does\s+not|lacks|lacking|without|missing|has\s+no|wears\s+no|never)\b",
    re.IGNORECASE,
)


def _entity(head: str) -> str | None:
    """A list head that names a person ("Man on the left", "Worker 1 (on the ladder)",
    "**Left worker**") as a noun phrase with its article ("the man on the left"), else
    None. The head noun (the last word before a preposition or a number) must be a
    WordNet ``noun.person`` noun."""
    h = re.sub(r"\(([^()]{1,60})\)", r" \1 ", head).strip(" *_")
    h = re.sub(r"\s+", " ", h)
    words = h.split()
    if not 1 <= len(words) <= 8 or _NEGATIVE_HEADER.search(h):
        return None
    if words[0].lower() in ("the", "a", "an"):
        words = words[1:]
    naming: list[str] = []
    for w in words:
        if w.lower() in _HEAD_PREPS or w.isdigit() or w.startswith("#"):
            break
        naming.append(w)
    if not naming or not naming[-1].isalpha():
        return None
    noun = morphy(naming[-1].lower(), "n") or naming[-1].lower()
    if lexname(noun) != "noun.person":
        return None
    rest = [w for w in words[len(naming) :] if not (w.isdigit() or w.startswith("#"))]
    return " ".join(["the", *(w.lower() if not w.isupper() else w for w in naming), *rest])


def _entity_sentences(entity: str, rest: str) -> list[str]:
    """Per-entity verdicts as sentences the parser reads with their subject ("the man on
    the left" + "no hard hat, no vest" -> "The man on the left has no hard hat. The man on
    the left has no vest."), so the list keeps its relations."""
    rest = re.sub(r"[.!;]+$", "", rest.strip())
    low = rest[0].lower() + rest[1:]
    parts = [
        p.strip()
        for p in re.split(r"\s*[,;]\s*(?=no\b|not\b|without\b|missing\b|lacks\b)", low, flags=re.IGNORECASE)
        if p.strip()
    ]
    out = []
    for part in parts:
        if re.match(r"^(no|never)\b", part, re.IGNORECASE):
            out.append(_sentence(f"{entity} has {part}"))
        elif re.match(r"^(not|without|missing)\b", part, re.IGNORECASE):
            out.append(_sentence(f"{entity} is {part}"))
        else:  # "isn't wearing", "does not have", "lacks gloves", "has no"
            out.append(_sentence(f"{entity} {part}"))
    return out


#: a sentence boundary inside one line ("The worker is sanding. Missing: mask, ladder.")
_IN_LINE_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z*])")


def normalise_lists(text: str) -> str:
    """``text`` with list-style lines turned into sentences (see the module docstring);
    prose passes through unchanged (HTML tags and control characters become spaces, the
    typographic apostrophe U+2019 a straight one).

    >>> normalise_lists("Missing safety items:\\n- helmet: absent\\n- gloves")
    'There is no helmet. There is no gloves.'
    >>> normalise_lists("The worker is not wearing:\\n1. a hard hat\\n2. goggles")
    'The worker is not wearing a hard hat. The worker is not wearing goggles.'
    """
    if not isinstance(text, str):
        raise TypeError(f"text: expected a string, got {type(text).__name__}: {text!r}")
    t = _CONTROL.sub(" ", text)
    if "\u2019" in t:  # "isn’t": spaCy tags the typographic "n’t" a negation, the rules read "n't"
        t = _APOSTROPHE.sub("'", t)  # only between letters: a closing quote ’ stays
    if "<" in t:
        t = _HTML.sub(" ", t)
    if (
        "\n" not in t
        and ":" not in t
        and "\u2014" not in t
        and " - " not in t
        and "\u2013" not in t
        and not _BULLET.match(t)
    ):
        return t
    out: list[str] = []
    context: str | None = None  # None, "absent" (a negative header), "prefix:<header>" or "entity:<the man ...>"
    for raw in t.splitlines():
        bulleted = bool(_BULLET.match(raw))
        line = _MARKUP.sub("", _BULLET.sub("", raw, count=1)).strip()
        if not line:
            context = None if not raw.strip() else context
            continue
        # a line may hold prose and then a list line ("... the wall. Missing: mask, ladder.")
        chunks = _IN_LINE_SENTENCE.split(line) if ":" in line or " - " in line else [line]
        for n, chunk in enumerate(chunks):
            context = _line(chunk.strip(), bulleted and n == 0, context, out)
    return " ".join(s for s in out if s)


def _line(line: str, bulleted: bool, context: str | None, out: list[str]) -> str | None:
    """Append the sentences of one list line to ``out``; return the context for the next."""
    m = _ITEM_SEP.match(line)
    if m and (":" in line or bulleted or _verdict(m.group("rest")) is not None or _entity(m.group("head")) is not None):
        head, rest = m.group("head").strip(), m.group("rest").strip()
        entity = _entity(head)
        if not rest:  # a header
            words = head.lower().split()
            if (
                len(words) >= 3
                and (words[-1] in _OPEN_ENDINGS or words[-1].endswith("ing"))
                and words[-1] not in ("missing", "lacking")
            ):
                return "prefix:" + head
            if entity is not None:
                return "entity:" + entity  # "Man on the left:" then "- no hard hat"
            return "absent" if _NEGATIVE_HEADER.search(head) else None
        verdict = _verdict(rest)
        if verdict == "absent":
            out.append(f"There is no {_np(head)}.")
        elif verdict == "present":
            out.append(f"There is a {_np(head)}.")
        elif verdict is not None:  # "Ladder: not secured"
            out.append(f"The {_np(head)} is {verdict}.")
        elif entity is not None and _ENTITY_NEG.match(rest):
            out.extend(_entity_sentences(entity, rest))  # "1. Man on the left: no hard hat"
        elif _NEGATIVE_HEADER.search(head) and all(_is_bare(i) for i in _items(rest)):
            out.extend(f"There is no {_np(i)}." for i in _items(rest))  # "PPE missing: hard hat, gloves"
        else:
            out.append(_sentence(rest if len(head.split()) <= 3 else line))  # "Note: the worker ..."
        return context
    if context and context.startswith("prefix:") and (bulleted or _is_bare(line)):
        out.append(_sentence(f"{context[7:]} {line[0].lower() + line[1:]}"))
    elif context and context.startswith("entity:") and _ENTITY_NEG.match(line):
        out.extend(_entity_sentences(context[7:], line))
    elif context == "absent" and _is_bare(line):
        out.append(f"There is no {_np(re.sub(r'[.!;]+$', '', line))}.")
    else:
        out.append(_sentence(line))
    return context
