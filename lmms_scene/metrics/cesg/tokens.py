"""CESG's rule parser, its token tests: what one spaCy token is in a negated sentence
(a quantifier, an idiom, a label, a negated determiner, its entities and conjuncts, its
lemma and qualified name, the antecedent a pronoun stands for). The rules that build the
graphs are :mod:`~lmms_scene.metrics.cesg.parse`."""

from __future__ import annotations

import contextvars
from typing import Any

from lmms_scene import cache
from lmms_scene.metrics.cesg.lexicon import (
    _ABSENT_ADJ,
    _ATTITUDE_NOUNS,
    _DEPICTIONS,
    _DEVOID,
    _EPISTEMIC_ADJ,
    _EVIDENCE,
    _IDIOM_NOUNS,
    _LABEL_NOUNS,
    _LACK_NOUNS,
    _LOST_BEINGS,
    _NEG_DET,
    _NEG_SUBJ_PRON,
    _NOUN,
    _PERCEIVE,
    _PERSON_WORDS,
    _QUALIFYING_PREPS,
    _QUANT_OF,
    _RAISING,
    _UNABLE,
    _UNITS,
)
from lmms_scene.metrics.cesg.negation import lexical_negation
from lmms_scene.nlp.wordnet import physical, synsets


def _is_quantifier(tok: Any) -> bool:
    """ "neither/none/all/one ... of X": the token stands for X."""
    return tok.lower_ in _QUANT_OF and any(c.dep_ == "prep" and c.lower_ == "of" for c in tok.children)


def _is_evidence(tok: Any) -> bool:
    """ "no evidence / sign / trace of X": the token stands for X."""
    return tok.lemma_.lower() in _EVIDENCE and any(c.dep_ == "prep" and c.lower_ == "of" for c in tok.children)


def _is_idiom(tok: Any) -> bool:
    """ "no doubt", "without exception", "in place": not a scene object."""
    low = tok.lemma_.lower()
    if low == "place":
        return tok.head.dep_ == "prep" or tok.head.lower_ == "in"
    if low == "good":  # "up to no good", "no good"
        return any(c.lower_ == "no" for c in tok.children)
    return (low in _IDIOM_NOUNS or low in _ATTITUDE_NOUNS) and not _is_evidence(tok)


def _is_lack(tok: Any) -> bool:
    """ "the lack / absence of X": the token stands for an absent X."""
    return tok.lemma_.lower() in _LACK_NOUNS and any(c.dep_ == "prep" and c.lower_ == "of" for c in tok.children)


def _nounish(tok: Any) -> bool:
    """A noun, or a word the small model could not tag in a noun's place ("a fedora"/X)."""
    return tok.pos_ in _NOUN or (
        tok.pos_ == "X" and tok.dep_ in ("dobj", "pobj", "attr", "nsubj", "nsubjpass", "conj", "appos")
    )


def _lost_being(tok: Any) -> bool:
    """ "a missing persons sign", "a missing young woman": lost people, not an absence."""
    words = [tok, *[c for c in tok.children if c.dep_ == "compound"]]
    return any(
        w.lemma_.lower().split()[-1] in _LOST_BEINGS or w.lower_.split()[-1] in _LOST_BEINGS for w in words if w.lemma_
    )


#: words that open a noun phrase of their own before "no": "a no parking sign" (a label),
#: against "there is no stop sign" (an absent sign)
_OPENERS = {
    "a",
    "an",
    "the",
    "this",
    "that",
    "these",
    "those",
    "its",
    "his",
    "her",
    "their",
    "our",
    "my",
    "your",
    "one",
}


def _label(no: Any, tok: Any) -> bool:
    """ "a 'no parking' sign", "a no smoking sticker": "no X" names a label. Only when the
    "no" is quoted, or sits inside a noun phrase already opened by an article or possessive
    (adjectives between allowed: "a red no entry sign"); "there is no stop sign", "no speed
    limit sign is posted" say the sign is absent."""
    doc = no.doc
    before = doc[no.i - 1] if no.i > 0 else None
    if before is not None and before.text in ("'", '"', "\u201c", "\u2018", "``"):
        return True
    j = no.i - 1
    while j >= 0 and doc[j].pos_ in ("ADJ", "ADV") and doc[j].lower_ not in ("not", "no"):
        j -= 1
    if j < 0 or doc[j].lower_ not in _OPENERS:
        return False
    if tok.lemma_.lower() in _LABEL_NOUNS and any(c.dep_ == "compound" and c.i > no.i for c in tok.children):
        return True  # "a no entry sign": "no" parsed on the sign
    return tok.dep_ in ("compound", "poss", "nmod", "amod") and tok.head.lemma_.lower() in _LABEL_NOUNS


def _lemma(tok: Any) -> str:
    """A noun's lemma (spaCy's), except where WordNet knows the written form as a noun and
    not the lemma ("goggles", "safety glasses" stay plural: there is no noun "goggle")."""
    lemma = tok.lemma_.lower()
    words = tok.lower_.split()
    if tok.pos_ in _NOUN and words and lemma.split() and lemma.split()[-1] != words[-1]:

        def keep_plural() -> bool:
            return not synsets(lemma.split()[-1], "n") and bool(synsets(words[-1], "n"))

        if cache.memo("cesg.keep_plural", (lemma.split()[-1], words[-1]), keep_plural):
            return " ".join([*lemma.split()[:-1], words[-1]])
    return lemma


def _name(tok: Any) -> str:
    if tok.lower_ in _PERSON_WORDS:
        return "person"
    parts = [
        _name(c) if c.lower_ not in _PERSON_WORDS else _lemma(c)
        for c in tok.lefts
        if c.dep_ == "compound" and c.pos_ in _NOUN | {"ADJ", "VERB"} and _lexical(c) is None and c.lower_ != "zero"
    ]  # compounds of compounds too: "speed limit sign", not "limit sign"; "Zero cats" is no kind of cat
    return " ".join([*parts, _lemma(tok)])


def _qualifier(tok: Any) -> tuple[str, ...]:
    """What tells this entity apart from others of its name: where it is ("on scaffold",
    also through "standing on the scaffold") and descriptive adjectives ("young")."""
    out: list[str] = []

    def preps(owner: Any) -> None:
        for prep in owner.children:
            if prep.dep_ == "prep" and prep.lower_ in _QUALIFYING_PREPS:
                for pobj in prep.children:
                    if (
                        pobj.dep_ == "pobj"
                        and pobj.pos_ in _NOUN
                        and not _is_idiom(pobj)
                        and pobj.lemma_.lower() not in _DEPICTIONS
                    ):
                        out.append(f"{prep.lower_} {_name(pobj)}")

    preps(tok)
    for c in tok.children:
        if c.dep_ in ("acl", "relcl") and c.pos_ in ("VERB", "AUX"):
            preps(c)
        elif (
            c.dep_ == "amod"
            and c.lower_ not in _ABSENT_ADJ
            and c.lemma_.lower() not in _EPISTEMIC_ADJ
            and _lexical(c) is None
        ):
            out.append(c.lemma_.lower())
    return tuple(sorted(dict.fromkeys(out)))


def _lexical(tok: Any) -> tuple[str, str] | None:
    if tok.pos_ not in ("ADJ", "VERB", "ADV", "NOUN", "PROPN"):
        return None
    return lexical_negation(tok.lower_)


def _conjuncts(tok: Any) -> list[Any]:
    out = [tok]
    for c in tok.children:
        if (
            c.dep_ == "conj"
            and c.pos_ in _NOUN | {"ADJ", "VERB"}
            and c.pos_ == tok.pos_
            or (c.dep_ == "conj" and c.pos_ in _NOUN and tok.pos_ in _NOUN)
        ):
            out.extend(_conjuncts(c))
    return out


#: pronoun token index -> antecedent token, while one sentence of a resolved doc is parsed
_ANTECEDENTS: contextvars.ContextVar[dict[int, Any]] = contextvars.ContextVar(
    "cesg_antecedents",
    default={},  # noqa: B039 (read-only default; set() replaces it, never mutated)
)


def _entities(tok: Any) -> list[Any]:
    """Noun tokens a token stands for: itself and its conjuncts; "neither of X", "no sign
    of X" -> X; a resolved pronoun -> its antecedent (and the antecedent's conjuncts);
    idioms ("no doubt") -> nothing."""
    antecedent = _ANTECEDENTS.get().get(tok.i)
    if antecedent is not None:
        return _entities(antecedent)
    if _is_quantifier(tok) or _is_evidence(tok) or _is_lack(tok):
        for prep in tok.children:
            if prep.dep_ == "prep" and prep.lower_ == "of":
                for pobj in prep.children:
                    if pobj.dep_ == "pobj":
                        return _entities(pobj)
        return []
    if _nounish(tok):
        return [t for t in _conjuncts(tok) if (_nounish(t) or t.lower_ in _PERSON_WORDS) and not _is_idiom(t)]
    if tok.lower_ in _PERSON_WORDS and tok.pos_ == "PRON":
        return [tok]
    return []


def _not_only(tok: Any) -> bool:
    """ "not only / not just / not merely": additive, not a negation."""
    nxt = tok.doc[tok.i + 1] if tok.i + 1 < len(tok.doc) else None
    return nxt is not None and nxt.lower_ in ("only", "just", "merely")


def _own_neg(tok: Any) -> bool:
    for c in tok.children:
        if c.dep_ == "neg" and not _not_only(c):
            return True
        if c.dep_ in ("aux", "auxpass") and any(g.dep_ == "neg" and not _not_only(g) for g in c.children):
            return True
        if c.dep_ in ("advmod", "preconj", "cc") and c.lower_ in ("never", "no", "neither", "nowhere"):
            return True
        if c.dep_ == "advmod" and c.lower_ == "longer" and any(g.lower_ == "no" for g in c.children):
            return True  # "no longer"
        if c.dep_ == "prep" and c.lower_ in ("in", "on", "within") and any(_in_no_picture(o) for o in c.children):
            return True  # "a cat sits on the sofa in neither of the photos", "... in no picture"
    return False


def _in_no_picture(pobj: Any) -> bool:
    """The object of "in neither of the images", "in none of the photos", "in no picture":
    the clause holds in no picture (said of a scene, the whole clause is negated)."""
    if pobj.dep_ != "pobj":
        return False
    if pobj.lower_ in ("neither", "none"):
        return any(
            p.dep_ == "prep" and p.lower_ == "of" and any(o.lemma_.lower() in _DEPICTIONS for o in p.children)
            for p in pobj.children
        )
    return pobj.lemma_.lower() in _DEPICTIONS and any(
        c.dep_ in ("det", "preconj") and c.lower_ in _NEG_DET for c in pobj.children
    )


def _has_neg(tok: Any) -> bool:
    """Negated itself, or through the verb it complements: "does not appear to be",
    "doesn't seem to have" (raising verbs), "I don't see the worker wearing" (perception)."""
    if _own_neg(tok):
        return True
    head = tok.head
    if head is tok:
        return False
    lemma = head.lemma_.lower()
    if tok.dep_ == "xcomp" and lemma in _RAISING:
        return _has_neg(head)
    if tok.dep_ == "xcomp" and head.lower_ in _UNABLE:
        return True  # "I am unable to see a harness"
    if (
        tok.dep_ in ("advcl", "ccomp")
        and lemma in _RAISING
        and _own_neg(head)
        and any(c.dep_ == "mark" and c.lower_ in ("like", "if", "though") for c in tok.children)
    ):
        return not _own_neg(tok)  # "it does not look like the trench is shored"
    if tok.dep_ in ("ccomp", "xcomp") and (lemma in _PERCEIVE or lemma in _HOLDING_CLAUSE):
        # "neither photo shows a horse drinking", "the dog does not have its tail curled",
        # "it is not true that one image contains a pig standing near a fence"
        return (_has_neg(head) or _subjects(head)[1]) != _denied(head)  # "neither photo shows a horse drinking"
    if (
        tok.dep_ == "acl"
        and head.dep_ == "attr"
        and head.head.lemma_.lower() == "be"
        and not any(c.dep_ in ("expl", "nsubj", "nsubjpass") for c in head.head.children)
    ):
        return _own_neg(head.head)  # "in neither of the photos is a cat sitting on a chair"
    if (
        tok.dep_ in ("acl", "relcl")
        and head.dep_ in ("dobj", "attr")
        and head.head.lemma_.lower() in _PERCEIVE
        and tok.dep_ == "acl"
    ):
        # "I don't see anyone wearing a helmet", "no picture shows a cat sleeping",
        # "it is not true that one picture shows a boy holding a kite"
        seer = head.head
        return (_has_neg(seer) or _subjects(seer)[1]) != _denied(seer)
    return False


#: verbs whose clause complement says what is (not) in the picture or on someone: "does not
#: have its tail curled", "no image contains a pig standing by a fence"
_HOLDING_CLAUSE = {"have", "contain", "include", "feature"}


def _denied(verb: Any) -> bool:
    """ "It is not true that ...", "It is not the case that ...": the clause is denied (a
    double negation flips it). The small model hangs the clause on "case" as a clausal
    modifier (acl, relcl) as often as it makes it a complement (ccomp)."""
    if verb.dep_ not in ("ccomp", "acl", "relcl"):
        return False
    h = verb.head
    if verb.dep_ != "ccomp" and not (
        h.lemma_.lower() == "case" and any(c.dep_ == "mark" and c.lower_ == "that" for c in verb.children)
    ):
        return False
    if h.lemma_.lower() in ("true", "case", "correct"):
        return _own_neg(h) or _own_neg(h.head)
    return (
        h.lemma_.lower() == "be"
        and _own_neg(h)
        and any(c.lemma_.lower() in ("true", "case", "correct") for c in h.children)
    )


def _subject_negates(subj: Any) -> bool:
    if subj.lower_ in _NEG_SUBJ_PRON:
        return True
    if any(
        c.lower_ == "not" and c.dep_ in ("neg", "preconj", "advmod") and c.i < subj.i and not _not_only(c)
        for c in subj.children
    ):
        return True  # "not one of the painters", "not a single worker"
    if any(
        c.lower_ in ("all", "every") and c.dep_ in ("predet", "det") and any(g.dep_ == "neg" for g in c.children)
        for c in subj.children
    ):
        return True  # "not all the birds are on branches": some bird is not
    return any((c.dep_ in ("det", "preconj") and c.lower_ in _NEG_DET) for c in subj.children)


def _misparsed_verb(tok: Any) -> bool:
    """A verb the small model tags as a noun: the sentence's root, with a subject ("The
    roofer never climbs without a harness": "climbs" a plural noun). A noun root has no
    subject in spaCy's scheme (a copular sentence's root is the verb "be")."""
    return (
        tok.pos_ in _NOUN
        and tok.dep_ == "ROOT"
        and tok.tag_ in ("NNS", "VBZ")
        and any(c.dep_ == "nsubj" for c in tok.children)
        and not any(c.dep_ in ("det", "amod", "nummod", "poss") for c in tok.children)  # "a man ... no number"
    )


def _subjects(verb: Any, depth: int = 0) -> tuple[list[Any], bool]:
    """(subject nouns of ``verb``, whether a subject quantifier negates it)."""
    subjs = [c for c in verb.children if c.dep_ in ("nsubj", "nsubjpass")]
    if not subjs:  # the small model sometimes hangs the subject on the auxiliary
        subjs = [
            g
            for c in verb.children
            if c.dep_ in ("aux", "auxpass")
            for g in c.children
            if g.dep_ in ("nsubj", "nsubjpass")
        ]
    if (
        subjs
        and verb.dep_ == "relcl"
        and verb.head.pos_ in _NOUN
        and all(s.tag_ in ("WDT", "WP") or s.lower_ in ("who", "that", "which") for s in subjs)
    ):
        return _entities(verb.head), False  # "the player who is not holding a bat"
    if subjs:
        ents = [e for s in subjs for e in _entities(s)]
        return ents, any(_subject_negates(s) for s in subjs)
    if verb.dep_ in ("acl", "relcl") and verb.head.pos_ in _NOUN:
        return _entities(verb.head), False
    if verb.dep_ in ("conj", "xcomp", "advcl") and verb.head is not verb and depth < 5:
        ents, neg = _subjects(verb.head, depth + 1)
        return ents, (neg if verb.dep_ in ("conj", "xcomp") else False)
    return [], False


def _pobjs(prep: Any) -> list[Any]:
    return [e for c in prep.children if c.dep_ == "pobj" for e in _entities(c)]


def _bracketed(tok: Any) -> bool:
    """``tok`` opens a parenthesis: "(0 Stars)" is a label or a rating, not a count."""
    return tok.i > 0 and tok.doc[tok.i - 1].text in ("(", "[")


def _hyphenated(tok: Any) -> bool:
    """``tok`` begins a hyphenated modifier: "a zero-emission vehicle", "a no-parking zone"
    name a kind of thing, not a count or an absence ("no-one" is still nobody)."""
    doc = tok.doc
    return tok.i + 2 < len(doc) and doc[tok.i + 1].text == "-" and doc[tok.i + 2].lower_ not in ("one", "body")


def _unit(tok: Any) -> bool:
    """``tok`` names a unit or a tally ("0 degrees", "zero percent", "zero points"), not a thing."""
    return tok.lemma_.lower() in _UNITS or tok.lower_ in _UNITS


def _zero_count(zero: Any, tok: Any) -> bool:
    """``zero`` ("zero"/"0" before ``tok``) counts ``tok`` as none: it opens the noun phrase
    ("Coke Zero bottles" is a brand), nothing but adjectives stand between them ("zero gravity
    chamber" is a kind of chamber), it is no rating "(0 Stars)" or hyphenated modifier
    ("zero-emission"), and ``tok`` is a physical thing, not a unit ("zero tolerance", "zero
    visibility", "0 degrees" count nothing absent). Sentence-initial "Zero cats are ..." is
    tagged a proper-noun compound."""
    if not (
        zero.i < tok.i
        and (
            zero.lower_ == "0"
            and zero.dep_ == "nummod"
            or zero.lower_ == "zero"
            and zero.dep_ in ("nummod", "compound", "amod")
        )
    ):
        return False
    if _bracketed(zero) or _hyphenated(zero) or _unit(tok):
        return False
    doc = zero.doc
    if zero.i > 0 and doc[zero.i - 1].pos_ in ("NOUN", "PROPN") and doc[zero.i - 1].head.i in (tok.i, zero.i):
        return False
    if any(t.pos_ in ("NOUN", "PROPN") or not t.is_alpha for t in doc[zero.i + 1 : tok.i]):
        return False
    lemma = tok.lemma_.lower()
    return cache.memo("cesg.zero_counts", lemma, lambda: physical(lemma))


def _det_no(tok: Any) -> bool:
    """ "no X", "zero X", "neither X nor Y", also "no sign of X" said of X."""
    kids = list(tok.children)
    # "no koi fish", "no door knobs": the parser may hang "no" on the compound's first noun
    kids += [g for c in kids if c.dep_ == "compound" and c.i < tok.i for g in c.children if g.i < c.i]
    for c in kids:
        if c.lower_ == "no" and c.i < tok.i and c.dep_ in ("det", "intj", "dep", "neg", "advmod"):
            return not _label(c, tok) and not _hyphenated(c)  # "no X" (a fragment's "No" may be an interjection)
        if _zero_count(c, tok):
            return True  # "zero ladders", "There are 0 boats in the water"
        if c.dep_ in ("preconj", "det", "cc") and c.lower_ == "neither":
            return True
        if (
            c.dep_ == "neg"
            and c.lower_ == "not"
            and c.i < tok.i
            and not _not_only(c)
            and tok.dep_ not in ("nsubj", "nsubjpass", "ROOT")
        ):
            return True  # contrast: "an oven but not a bottle", "a cat, not a dog"
    if tok.lower_ in ("nobody", "noone"):
        return True  # "a wheelchair with nobody in it"
    doc = tok.doc
    k = tok.i - 1
    while k >= 0 and doc[k].dep_ in ("det", "amod", "compound", "nummod") and doc[k].head.i == tok.i:
        k -= 1
    if k >= 0 and doc[k].lower_ == "sans":
        return True  # "two men sans shirts"
    if k > 0 and (doc[k].lower_, doc[k - 1].lower_) in (("than", "rather"), ("of", "instead")):
        return True  # "boots rather than sneakers", "a brush instead of a roller" (however it is parsed)
    prep = tok.head
    if (
        tok.dep_ == "pobj"
        and prep.lower_ == "than"
        and (any(c.lower_ == "rather" for c in prep.children) or (prep.i > 0 and doc[prep.i - 1].lower_ == "rather"))
    ):
        return True  # "sneakers rather than steel-toe boots"
    if (
        tok.dep_ == "pobj"
        and prep.lower_ == "of"
        and (prep.head.lower_ == "instead" or (prep.i > 0 and doc[prep.i - 1].lower_ == "instead"))
    ):
        return True  # "instead of a helmet"
    if (
        tok.dep_ == "pobj"
        and prep.lower_ == "of"
        and prep.head is not prep
        and (_is_lack(prep.head) or prep.head.lemma_.lower() in _DEVOID)
    ):
        return True  # "the lack of lighting", "devoid of customers"
    if tok.dep_ == "pobj" and prep.lower_ == "of" and prep.head is not prep:
        owner = prep.head
        return _is_evidence(owner) and any(c.dep_ == "det" and c.lower_ == "no" for c in owner.children)
    return False
