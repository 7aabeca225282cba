"""CESG stage IV (Parse): sentence-level scene-graph parsers.

A parser turns aligned (negative sentence, affirmative sentence) pairs into pairs of
factual :class:`~lmms_scene.metrics.cesg.graph.SceneGraph`; stage V compares them.

* :class:`RuleParser` (offline default): dependency rules on spaCy ``en_core_web_sm``.
  It reads negation scope itself (spaCy's ``neg`` label covers only not/n't, so "no",
  "without", "neither ... nor", "lacks", "missing" are rules here), which lets it derive
  both graphs from one parse of the negative sentence: the factual graph keeps what is
  asserted, the affirmative graph keeps everything. That halves parsing time and gives
  the same graphs as parsing the stripped text for the cues it knows.
* :class:`FactualT5Parser` (high fidelity, loaded only when asked): the FACTUAL T5 parser
  ``lizhuang144/flan-t5-base-VG-factual-sg`` through transformers, batched, parsing the
  negative and the affirmative sentences independently, as the paper does with its parser.
"""

from __future__ import annotations

import contextvars
import re
from collections.abc import Sequence
from typing import Any

from lmms_scene import cache
from lmms_scene.metrics.cesg.graph import SceneGraph
from lmms_scene.metrics.cesg.negation import lexical_negation
from lmms_scene.nlp import MissingNLPComponent
from lmms_scene.nlp.spacy_model import provenance, spacy_pipeline
from lmms_scene.nlp.wordnet import synsets

#: words whose presence marks a verb or noun phrase as negated (beyond spaCy's `neg`)
_NEG_DET = {"no", "neither"}
_NEG_SUBJ_PRON = {"none", "neither", "nobody", "nothing", "noone"}
_QUANT_OF = {
    "none",
    "neither",
    "all",
    "both",
    "each",
    "either",
    "some",
    "any",
    "most",
    "many",
    "several",
    "one",
    "two",
    "three",
}
_LACK = {"lack", "miss"}
#: verbs whose negation means the object is not there ("not wearing a helmet"); for other
#: verbs only the relation is negated ("nobody is holding the ladder": the ladder is there)
_POSSESSION = {
    "have",
    "wear",
    "carry",
    "use",
    "own",
    "bring",
    "don",
    "put",
    "contain",
    "include",
    "get",
    "keep",
    "feature",
    "involve",
}
_ABSENT_ADJ = {"missing", "absent", "lacking", "unavailable", "gone"}
#: predicates that only state existence: "no sign is visible" == "there is no sign"
_EXIST = {
    "visible",
    "present",
    "available",
    "provide",
    "install",
    "see",
    "evident",
    "exist",
    "place",
    "there",
    "find",
    "detect",
    "notice",
    "spot",
    "observe",
    "identify",
    "locate",
    "apparent",
}
#: perception verbs: "I don't see a helmet" / "I cannot find any sign" says the object is
#: absent; the perceiver (the narrator, the image) is no scene node
_PERCEIVE = {
    "see",
    "notice",
    "observe",
    "spot",
    "find",
    "detect",
    "identify",
    "locate",
    "show",
    "depict",
    "spy",
    "discern",
    "recognize",
    "recognise",
}
#: raising verbs whose negation belongs to their complement ("does not appear to be")
_RAISING = {"appear", "seem", "look", "happen", "tend"}
#: adjectives whose complement is not done: "unable to see", "impossible to find"
_UNABLE = {"unable", "impossible"}
#: modifiers that say how something is seen or judged, not what it is ("no visible X")
_EPISTEMIC_ADJ = {
    "visible",
    "apparent",
    "evident",
    "obvious",
    "noticeable",
    "discernible",
    "observable",
    "identifiable",
    "detectable",
    "present",
    "available",
    "proper",
    "adequate",
    "required",
    "necessary",
    "appropriate",
    "suitable",
    "sufficient",
    "any",
    "additional",
    "single",
    "clear",
}
#: abstract nouns after "no"/"without" that are idioms, not absent objects ("no doubt")
_IDIOM_NOUNS = {
    "doubt",
    "question",
    "problem",
    "issue",
    "concern",
    "need",
    "way",
    "reason",
    "exception",
    "denying",
    "time",
    "chance",
    "matter",
    "difference",
    "longer",
    "hesitation",
    "fail",
    "sign_of",
    "evidence",
    "indication",
    "trace",
}
#: attitudes after "no"/"without" ("pays no attention", "without interest"): not absent objects
_ATTITUDE_NOUNS = {
    "attention",
    "heed",
    "interest",
    "intention",
    "idea",
    "mind",
    "regard",
    "respect",
    "mercy",
    "effort",
    "attempt",
}
#: "the lack of lighting", "in the absence of a rail": the "of" object is absent
_LACK_NOUNS = {"lack", "absence"}
#: "devoid of customers", "bereft of leaves": the "of" object is absent
_DEVOID = {"devoid", "bereft"}
#: heads that make a quoted or named "no X" a label, not an absence ("a no parking sign")
_LABEL_NOUNS = {
    "sign",
    "signage",
    "sticker",
    "label",
    "banner",
    "poster",
    "notice",
    "symbol",
    "zone",
    "placard",
    "plate",
    "board",
    "tape",
    "text",
    "writing",
    "message",
}
#: people and animals: "a missing person", "a poster of a missing woman" say lost, not absent
_LOST_BEINGS = {
    "person",
    "people",
    "man",
    "woman",
    "child",
    "children",
    "kid",
    "girl",
    "boy",
    "dog",
    "cat",
    "pet",
    "teen",
    "teenager",
    "student",
    "hiker",
}
#: "no X" said of X: "no sign of X", "no evidence of X": X is what is absent
_EVIDENCE = {"evidence", "sign", "indication", "trace", "hint", "presence"}
#: narrators and depictions: never scene nodes of a perception verb
_PERCEIVERS = {
    "i",
    "we",
    "you",
    "one",
    "image",
    "picture",
    "photo",
    "photograph",
    "scene",
    "frame",
    "view",
    "camera",
    "it",
}
#: the scene itself as a subject: "the site lacks a fire extinguisher" == "there is no
#: fire extinguisher" (no relation with the site); depictions as prepositional objects
_SCENE_NOUNS = {
    "site",
    "scene",
    "area",
    "image",
    "picture",
    "photo",
    "photograph",
    "frame",
    "view",
    "workplace",
    "workspace",
    "setting",
    "environment",
    "premises",
    "location",
    "worksite",
    "jobsite",
    "shot",
    "footage",
}
_DEPICTIONS = {"image", "picture", "photo", "photograph", "frame", "scene", "view", "shot", "footage"}
#: passive verbs whose "with" object is what is (not) there: "not equipped with harnesses"
_WITH_VERBS = {"equip", "provide", "fit", "supply", "furnish", "outfit"}
#: indefinite people: "no one", "nobody" -> a person node
_PERSON_WORDS = {"one", "nobody", "noone", "someone", "anyone", "everyone", "somebody", "anybody", "everybody"}
_NOUN = {"NOUN", "PROPN"}
#: prepositions whose object tells two entities of one name apart ("the worker on the
#: scaffold" vs "the worker on the ground"); with/without/of state parts and possessions
_QUALIFYING_PREPS = {
    "on",
    "in",
    "at",
    "near",
    "beside",
    "by",
    "behind",
    "under",
    "above",
    "below",
    "next",
    "inside",
    "outside",
    "from",
    "atop",
    "underneath",
    "beneath",
    "around",
    "along",
    "across",
    "over",
    "between",
    "left",
    "right",
}


class RuleParser:
    """Dependency-rule scene-graph parser on spaCy (see the module docstring)."""

    name = "lmms-scene dependency rules on spaCy en_core_web_sm"
    one_parse = True

    def __init__(self, nlp: Any | None = None):
        self._nlp = nlp

    @property
    def nlp(self) -> Any:
        if self._nlp is None:
            self._nlp = spacy_pipeline(merge_compounds=True)
        return self._nlp

    def provenance(self) -> dict[str, Any]:
        return {"parser": self.name, **provenance()}

    def parse_pairs(
        self, negative: Sequence[str], affirmative: Sequence[str]
    ) -> list[tuple[SceneGraph, SceneGraph] | Exception]:
        """One (factual graph of the negative sentence, graph of its affirmative) per pair;
        an exception object in place of a pair whose sentence failed to parse."""
        out: list[tuple[SceneGraph, SceneGraph] | Exception] = []
        for doc in self.nlp.pipe(list(negative)):
            try:
                out.append(graphs_from_doc(doc))
            except Exception as exc:  # a rule bug on one sentence loses only that sentence
                out.append(exc)
        return out


# -- dependency rules -------------------------------------------------------------------


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
        if c.dep_ == "compound" and c.pos_ in _NOUN | {"ADJ", "VERB"} and _lexical(c) is None
    ]  # compounds of compounds too: "speed limit sign", not "limit sign"
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
    return False


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
    if tok.dep_ in ("ccomp", "xcomp") and lemma in _PERCEIVE:
        return _has_neg(head)
    if (
        tok.dep_ in ("acl", "relcl")
        and head.dep_ in ("dobj", "attr")
        and head.head.lemma_.lower() in _PERCEIVE
        and tok.dep_ == "acl"
    ):
        return _has_neg(head.head)  # "I don't see anyone wearing a helmet"
    return False


def _denied(verb: Any) -> bool:
    """ "It is not true that ...": the clause is denied (a double negation flips it)."""
    if verb.dep_ != "ccomp":
        return False
    h = verb.head
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
    return any((c.dep_ in ("det", "preconj") and c.lower_ in _NEG_DET) for c in subj.children)


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


def _det_no(tok: Any) -> bool:
    """ "no X", "neither X nor Y", also "no sign of X" said of X."""
    for c in tok.children:
        if c.lower_ == "no" and c.i < tok.i and c.dep_ in ("det", "intj", "dep", "neg", "advmod"):
            return not _label(c, tok)  # "no X" (a fragment's "No" may be tagged an interjection)
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


class _Builder:
    def __init__(self) -> None:
        self.absent: dict[int, bool] = {}
        self.names: dict[int, str] = {}
        self.quals: dict[int, tuple[str, ...]] = {}
        self.attrs: list[tuple[int, str, bool]] = []
        self.rels: list[tuple[int, str, int, bool]] = []
        self._synthetic = 0

    def node(self, tok: Any, absent: bool = False) -> int:
        if tok.i not in self.names:
            self.names[tok.i] = _name(tok)
            self.quals[tok.i] = _qualifier(tok)
        self.absent[tok.i] = self.absent.get(tok.i, False) or absent
        return tok.i

    def synthetic(self, name: str, absent: bool) -> int:
        """A node no token stands for ("helmetless": the helmet)."""
        self._synthetic -= 1
        i = self._synthetic
        self.names[i], self.quals[i], self.absent[i] = name, (), absent
        return i

    def graphs(self) -> tuple[SceneGraph, SceneGraph]:
        order = sorted(self.names)
        name: dict[int, Any] = dict(self.names)
        # An absent object's modifiers describe the absent thing ("no hard hat"): they
        # join its description instead of becoming negated attributes of their own.
        folded = {i for i, a, _ in self.attrs if self.absent.get(i)}
        for i in folded:
            mods = [a for j, a, neg in self.attrs if j == i and not neg]
            name[i] = " ".join([*dict.fromkeys(mods), name[i]])
        for i in order:
            # a present node's description tells it apart ("worker", ("on scaffold",));
            # an absent node's location is a (negated) relation of its own
            if not self.absent[i] and self.quals.get(i):
                name[i] = (name[i], self.quals[i])
        attrs = [(i, a, neg) for i, a, neg in self.attrs if i not in folded or neg]
        factual = SceneGraph(
            objects=tuple(name[i] for i in order if not self.absent[i]),
            attributes=tuple((name[i], a) for i, a, neg in attrs if not neg and not self.absent[i]),
            relations=tuple(
                (name[s], p, name[o])
                for s, p, o, neg in self.rels
                if not neg and not self.absent[s] and not self.absent[o]
            ),
        )
        affirmative = SceneGraph(
            objects=tuple(name[i] for i in order),
            attributes=tuple((name[i], a) for i, a, _ in attrs),
            relations=tuple((name[s], p, name[o]) for s, p, o, _ in self.rels),
        )
        return factual, affirmative


def _prep_relations(b: _Builder, heads: list[Any], owner: Any, base: str, neg: bool) -> None:
    """Relations from the prepositions under ``owner``: (head, base+prep, pobj)."""
    for prep in owner.children:
        if prep.dep_ != "prep":
            continue
        word = prep.lower_
        objs = [
            o for o in _pobjs(prep) if not (word in ("in", "on", "from", "within") and o.lemma_.lower() in _DEPICTIONS)
        ]
        if (word == "as" and prep.i > 0 and prep.doc[prep.i - 1].lower_ == "such") or word == "including":
            for o in objs:  # "eye protection such as safety glasses": examples share the head's absence
                b.node(o, absent=any(b.absent.get(h.i, False) for h in heads))
            continue
        if word == "without":
            for o in objs:
                # "never without a harness", "no worker is without a helmet": a double negation
                b.node(o, absent=not neg)
                for h in heads:
                    b.rels.append((b.node(h), "with" if not base else f"{base} with", o.i, not neg))
            continue
        for o in objs:
            det_no = _det_no(o)
            b.node(o, absent=det_no)
            for h in heads:
                b.rels.append((b.node(h), f"{base} {word}".strip(), o.i, neg or det_no))


def _lexical_negations(b: _Builder, doc: Any) -> None:
    """ "unsecured", "an unguarded blade" (negated attributes secure, guard), "helmetless"
    (an absent helmet and a negated "with" relation); "not unsecured" is affirmative."""
    for tok in doc:
        found = _lexical(tok)
        if found is None:
            continue
        kind, stem = found
        nxt = tok.doc[tok.i + 1] if tok.i + 1 < len(tok.doc) else None
        if tok.dep_ in ("amod", "compound") and tok.head.pos_ in _NOUN:
            anchors, neg = _entities(tok.head) or [tok.head], False
        elif tok.pos_ in _NOUN and nxt is not None and nxt.pos_ in _NOUN:
            anchors, neg = _entities(nxt) or [nxt], False  # a misparsed modifier: "a helmetless roofer"
        elif (
            tok.dep_ in ("acomp", "oprd", "attr", "xcomp", "advcl", "conj", "advmod", "npadvmod")
            or tok.dep_ == "ROOT"
            or (
                kind == "less" and tok.dep_ == "dobj"  # "riding helmetless": a misparsed manner modifier
            )
        ):
            verb = tok if tok.dep_ == "ROOT" or tok.head.pos_ not in ("VERB", "AUX") else tok.head
            anchors, subject_neg = _subjects(verb)
            neg = _has_neg(verb) or subject_neg
        else:
            continue
        for a in anchors:
            b.node(a)
            if kind == "un":
                b.attrs.append((a.i, stem, not neg))
            elif not neg:
                o = b.synthetic(stem, absent=True)
                b.rels.append((a.i, "with", o, True))


def graphs_from_doc(doc: Any, antecedents: dict[int, Any] | None = None) -> tuple[SceneGraph, SceneGraph]:
    """(factual graph, affirmative graph) of one parsed sentence (a Doc or a sentence Span;
    ``antecedents`` maps resolved pronouns to their antecedent tokens in the same Doc)."""
    if antecedents:
        token = _ANTECEDENTS.set(antecedents)
        try:
            return graphs_from_doc(doc)
        finally:
            _ANTECEDENTS.reset(token)
    b = _Builder()
    for tok in doc:
        if (
            (_nounish(tok) or (tok.pos_ == "PRON" and tok.lower_ in _PERSON_WORDS))
            and tok.dep_ != "compound"
            and not _is_quantifier(tok)
            and not _is_evidence(tok)
            and not _is_idiom(tok)
            and not _is_lack(tok)
            and tok.lower_ != "sans"
            and _lexical(tok) is None
        ):
            det_no = _det_no(tok)
            head = tok.head
            # "no" on the subject of a transitive verb negates the verb, not the subject;
            # "no worker is without a helmet" is a double negation
            transitive_subject = tok.dep_ == "nsubj" and any(c.dep_ == "dobj" for c in head.children)
            double = tok.dep_ in ("nsubj", "nsubjpass") and any(
                c.dep_ == "prep" and c.lower_ == "without" for c in head.children
            )
            missing_mod = any(c.dep_ == "amod" and c.lower_ in _ABSENT_ADJ for c in tok.children) and not _lost_being(
                tok
            )
            perceiver = tok.dep_ == "nsubj" and tok.lower_ in _PERCEIVERS and head.lemma_.lower() in _PERCEIVE
            if perceiver:
                continue
            sans = (
                tok.i > 0 and tok.doc[tok.i - 1].lower_ == "sans"
            )  # "two men sans shirts" (the small model misparses "sans")
            b.node(tok, absent=(det_no and not transitive_subject and not double) or missing_mod or sans)
            for c in tok.children:
                if c.dep_ == "amod" and any(g.dep_ == "cc" for g in c.children) and c.i < tok.i:
                    b.node(c)  # a misparsed contrast: "an oven but not a bottle" ("oven" tagged a modifier)
                elif (
                    c.dep_ == "amod"
                    and c.lower_ not in _ABSENT_ADJ
                    and c.lemma_.lower() not in _EPISTEMIC_ADJ
                    and _lexical(c) is None
                ):
                    for adj in _conjuncts(c):
                        if _lexical(adj) is None:
                            b.attrs.append((tok.i, adj.lemma_.lower(), False))
                elif c.dep_ == "poss" and c.pos_ in _NOUN:
                    b.rels.append((b.node(c), "have", tok.i, False))
            _prep_relations(b, [tok], tok, "", False)
        elif tok.pos_ in ("VERB", "AUX") and tok.dep_ not in ("aux", "auxpass") and _lexical(tok) is None:
            _verb(b, tok)
            _ellipsis(b, tok)
        if (
            not _nounish(tok)
            and tok.pos_ in ("ADV", "ADJ", "VERB", "X")
            and not _is_idiom(tok)
            and any(c.dep_ == "det" and c.lower_ == "no" and c.i < tok.i for c in tok.children)
        ):
            b.node(tok, absent=True)  # "there is no talking", "no scoreboard" tagged an adverb
    _negated_modifiers(b, doc)
    _lexical_negations(b, doc)
    _unread_cues(b, doc)
    # conjoined nouns share absence ("no helmet or gloves", "without a shield or gloves")
    for tok in doc:
        if tok.i in b.names and tok.dep_ == "conj" and tok.head.i in b.names and b.absent.get(tok.head.i):
            b.absent[tok.i] = True
    return b.graphs()


def _verb(b: _Builder, verb: Any) -> None:
    lemma = verb.lemma_.lower()
    subjects, subject_neg = _subjects(verb)
    neg = _has_neg(verb) or subject_neg
    if _denied(verb):
        neg = not neg
    passive = any(c.dep_ == "auxpass" for c in verb.children)
    if lemma in _RAISING and any(c.dep_ == "xcomp" for c in verb.children):
        return  # "does not appear to be ...": its complement carries the statement
    if lemma != "be" and not passive:
        subjects = [s for s in subjects if s.lemma_.lower() not in _SCENE_NOUNS]
    for s in subjects:
        b.node(s)
    if lemma in _PERCEIVE and not passive:
        _perceive(b, verb, subjects, neg)
        return
    if (
        lemma == "be"
        or (lemma in _EXIST | {"miss"} and passive)
        or (lemma in _LACK and not any(c.dep_ == "dobj" for c in verb.children))
    ):
        if lemma != "be":
            # "the guardrail is not installed", "the extinguisher is missing", "signage is lacking"
            gone = (not neg) if lemma in _LACK else neg
            for s in subjects:
                b.node(s, absent=gone)
            _prep_relations(b, subjects, verb, "", neg)
            return
        head = verb.head
        expl = any(c.dep_ == "expl" for c in verb.children) or (
            verb.dep_ == "xcomp" and head.lemma_.lower() in _RAISING and any(c.dep_ == "expl" for c in head.children)
        )
        if any(c.dep_ == "advmod" and c.lower_ == "nowhere" for c in verb.children):
            for s in subjects:  # "the hard hat is nowhere to be seen"
                b.node(s, absent=True)
        for c in verb.children:
            if c.dep_ == "attr" and c.pos_ in _NOUN | {"PRON"}:
                ents = _entities(c)
                if expl:  # "there is (no) X"
                    for e in ents:
                        b.node(e, absent=neg or _det_no(e))
                else:
                    for e in ents:
                        for s in subjects:
                            b.attrs.append((s.i, e.lemma_.lower(), neg))
            elif c.dep_ == "acomp" and _lexical(c) is None:
                for adj in _conjuncts(c):
                    word = adj.lemma_.lower()
                    if _lexical(adj) is not None:
                        continue
                    if word in _ABSENT_ADJ or adj.lower_ in _ABSENT_ADJ:
                        for s in subjects:
                            b.node(s, absent=not neg)
                    elif word in _EXIST:
                        for s in subjects:
                            b.node(s, absent=neg)
                    else:
                        for s in subjects:
                            b.attrs.append((s.i, word, neg))
                    _prep_relations(b, subjects, adj, word, neg)
            elif c.dep_ == "prep" and c.lower_ == "in" and any(p.lemma_.lower() == "place" for p in c.children):
                for s in subjects:  # "the guard is (not) in place"
                    b.node(s, absent=neg)
        _prep_relations(b, subjects, verb, "", neg)
        return
    with_objects = [o for c in verb.children if c.dep_ == "prep" and c.lower_ == "with" for o in _pobjs(c)]
    if passive and lemma in _WITH_VERBS and with_objects:
        # "the workers are not equipped with harnesses": the harnesses are absent
        for o in with_objects:
            b.node(o, absent=neg or _det_no(o))
            for s in subjects:
                b.rels.append((s.i, "with", o.i, neg or _det_no(o)))
        return
    if passive:
        # "the eyes are not protected", "the ladder is not secured to the wall"
        for s in subjects:
            b.attrs.append((s.i, lemma, neg))
        _prep_relations(b, subjects, verb, lemma, neg)
        return
    predicate, rel_neg, objects_absent = lemma, neg, neg and lemma in _POSSESSION
    failed = (
        lemma == "miss"
        and verb.tag_ in ("VBD", "VBN")
        and not any(c.lower_ in ("is", "are", "'s", "'re") for c in verb.children)
    )
    if (
        lemma in _LACK and not failed
    ):  # "lacks a guardrail" == "does not have a guardrail"; "missed the ball" is a failed action
        predicate, rel_neg, objects_absent = "have", not neg, not neg
    objects = [e for c in verb.children if c.dep_ in ("dobj", "attr", "oprd") for e in _entities(c)]
    for o in objects:
        det_no = _det_no(o)
        b.node(o, absent=objects_absent or det_no)
        for s in subjects:
            b.rels.append((s.i, predicate, o.i, rel_neg or det_no))
    actions = (
        [c for c in verb.children if c.dep_ in ("xcomp", "dobj") and c.tag_ == "VBG"] if lemma in _POSSESSION else []
    )
    for a in actions:  # "the clip does not feature baking": a missing action
        b.node(a, absent=neg)
    _prep_relations(b, subjects, verb, predicate, rel_neg)
    if (
        neg
        and not objects
        and not actions
        and verb.pos_ == "VERB"
        and lemma not in _LACK
        and not any(c.dep_ in ("prep", "xcomp", "ccomp", "advcl", "dative", "prt", "acomp") for c in verb.children)
    ):
        for s in subjects:  # "a giraffe that is not eating": a negated action
            b.attrs.append((s.i, lemma, True))


def _negated_modifiers(b: _Builder, doc: Any) -> None:
    """ "the elephant not in the water", "a bicycle not near the wall": a "not" the parser
    hangs on the noun negates the modifier after it (a negated relation or attribute)."""
    for t in doc:
        if (
            t.dep_ == "neg"
            and t.head.dep_ == "prep"
            and t.head.i > t.i
            and _nounish(t.head.head)
            and t.head.head.i < t.i
        ):
            head, nxt = t.head.head, t.head  # "the elephant not in the water" ("not" on the preposition)
        elif t.dep_ == "neg" and t.head.i < t.i and _nounish(t.head) and t.i + 1 < len(doc):
            head, nxt = t.head, doc[t.i + 1]
        else:
            continue
        if nxt.lower_ in ("only", "just", "merely"):
            continue
        if nxt.dep_ == "prep" or nxt.pos_ == "ADP":
            objs = [o for o in _pobjs(nxt) if o.lemma_.lower() not in _DEPICTIONS]
            for o in objs:
                b.node(o)
                b.rels.append((b.node(head), nxt.lower_, o.i, True))
        elif nxt.pos_ in ("ADJ", "VERB") and nxt.lemma_.lower() not in _EPISTEMIC_ADJ:
            b.attrs.append((b.node(head), nxt.lemma_.lower(), True))


#: predicates of being seen: "its head not visible", "whose face is not showing" say the
#: head, the face is not in view (absent from the image)
_VISIBLE = {"visible", "see", "show", "evident", "apparent", "present", "capture", "shown"}
#: "not fully in the photo": only part of it is in view (a negated "fully visible")
_DEGREE = {"fully", "entirely", "completely", "totally", "wholly", "all", "quite", "whole"}
#: verbs that introduce a display's words: "a bus displaying not in service"
_SHOWN_TEXT = {"display", "read", "say", "write", "spell", "flash"}
_SKIP_BEFORE = {"is", "are", "was", "were", "'s", "'re", "be", "been", "that", "which", "who", "whose", "does", "do"}


def _negated_tokens(b: _Builder) -> set[int]:
    """Token indices that take part in something negated the rules have read."""
    out = {i for i, a in b.absent.items() if a}
    out |= {i for i, _, neg in b.attrs if neg}
    out |= {i for s, _, o, neg in b.rels if neg for i in (s, o)}
    return out


def _misparsed_noun(tok: Any) -> bool:
    """A noun the small model tagged an adjective ("the elenphant", "a urinal")."""
    return tok.pos_ == "ADJ" and tok.dep_ in ("ROOT", "pobj") and any(c.dep_ == "det" for c in tok.children)


def _owner(cue: Any, verb: bool = False) -> list[Any]:
    """The entities a cue left unread is about: the noun it hangs on, the subjects of a
    negated verb (``verb``), else the nearest noun before it ("a zebra with its head not
    visible": the head)."""
    h = cue.head
    while h.pos_ == "ADP" and h.head is not h and h.head.i < h.i:
        h = h.head  # "behind a tree and not under a bush": the prepositions' owner
    if (_nounish(h) or _misparsed_noun(h)) and h.i < cue.i:
        return _entities(h) or [h]
    if verb and h.pos_ in ("VERB", "AUX"):
        subjects, _ = _subjects(h)
        if subjects:
            return subjects
    doc = cue.doc
    k = cue.i - 1
    while k >= cue.sent.start and (doc[k].lower_ in _SKIP_BEFORE or doc[k].pos_ in ("PUNCT", "ADV", "CCONJ", "AUX")):
        k -= 1
    if k >= cue.sent.start and _nounish(doc[k]):
        return _entities(doc[k]) or [doc[k]]
    if h.pos_ in ("VERB", "AUX", "ADJ"):
        subjects, _ = _subjects(h)
        if subjects:
            return subjects
    return []


def _unread_cues(b: _Builder, doc: Any) -> None:
    """Negation cues the rules above left unread, as crowd-written referring expressions
    use them: contrast ("the cat, not its reflection": the reflection), a negated
    preposition ("beside a divider, not in a corner"), not being in view ("its head not
    visible", "not fully in the photo"), a negated verb ("not looking at the dog",
    "not eating"), "without" before a gerund ("without eating grass"). A cue counts as
    read when something negated was built from the word it negates or its subtree."""
    done = _negated_tokens(b)
    for t in doc:
        full = t.doc  # token indices are the Doc's, also when ``doc`` is one sentence's Span
        if t.lower_ == "without" and t.dep_ == "prep":
            if any(o.i in done for o in _pobjs(t)):
                continue
            if not (_nounish(t.head) or t.head.pos_ in ("VERB", "AUX")):
                for o in _pobjs(t):
                    b.node(o, absent=True)  # "a bear, without a party hat" (hung on an adjective)
            for pc in (c for c in t.children if c.dep_ == "pcomp"):
                subj = [e for c in pc.children if c.dep_ in ("nsubj", "nsubjpass") for e in _entities(c)]
                if subj:  # "a boy without glasses holding a bear" (misparsed as a clause)
                    for e in subj:
                        b.node(e, absent=True)
                else:
                    b.node(pc, absent=True)  # "without eating grass": a missing action
            continue
        if t.dep_ != "neg" or t.lower_ not in ("not", "n't", "never") or _not_only(t):
            continue
        h = t.head
        if h.i in done or any(x.i in done for x in h.subtree):
            continue
        if h.lemma_.lower() in _LACK | _ABSENT_ADJ or any(
            x.lower_ in ("without", "no", "nobody", "nothing", "lack", "lacks", "missing", "absent") for x in h.subtree
        ):
            continue  # "is not missing", "never works without a harness": double negations the rules read
        before = full[t.i - 1] if t.i > t.sent.start else None
        if before is not None and (
            before.lemma_.lower() in _SHOWN_TEXT
            or (before.lower_ == "do" and t.i > 1 and full[t.i - 2].pos_ == "DET")
            or any(x.text in (":", '"', "\u201c") for x in full[t.sent.start : t.i])
        ):
            continue  # a sign's or a display's words: "displaying not in service", "the do not walk"
        j = t.i + 1
        degree = False
        while j < t.sent.end and full[j].pos_ == "ADV" and full[j].dep_ != "neg":
            degree = degree or full[j].lower_ in _DEGREE
            j += 1
        nxt = full[j] if j < t.sent.end else None
        if nxt is None:
            continue
        if nxt.pos_ == "ADP" or nxt.dep_ == "prep":
            objs = _pobjs(nxt)
            owners = _owner(t, verb=True)
            if objs and all(o.lemma_.lower() in _DEPICTIONS for o in objs):
                for x in owners:  # "not fully in the photo", "not in the picture"
                    if degree:
                        b.attrs.append((b.node(x), "fully visible", True))
                    else:
                        b.node(x, absent=True)
                continue
            ids = [b.node(x) for x in owners if x.lemma_.lower() not in _DEPICTIONS]
            for o in objs:
                b.node(o)
                for x in ids or [b.synthetic("something", absent=False)]:
                    if x != o.i:
                        b.rels.append((x, nxt.lower_, o.i, True))
            continue
        k = j
        while k < t.sent.end and (
            full[k].pos_ in ("DET", "NUM", "ADJ") or full[k].dep_ in ("poss", "compound", "case")
        ):
            k += 1
        if k < t.sent.end and k > j - 1 and _nounish(full[k]) and full[k].dep_ not in ("nsubj", "nsubjpass"):
            if full[k].lower_ not in ("only", "single", "all", "every", "one"):
                for e in _entities(full[k]) or [full[k]]:
                    b.node(e, absent=True)  # contrast: "the cat, not the reflection"
                continue
        if h.lemma_.lower() in _VISIBLE or nxt.lemma_.lower() in _VISIBLE:
            for x in _owner(t):
                b.node(x, absent=True)  # "its head not visible", "front not seen"
            continue
        verb = nxt if nxt.pos_ == "VERB" else h if h.pos_ in ("VERB", "ADJ") else None
        if verb is None:
            continue
        owners = [x for x in _owner(t, verb=True) if x.lemma_.lower() not in _DEPICTIONS]
        if any(c.dep_ in ("nsubj", "nsubjpass") and c.lemma_.lower() in _DEPICTIONS for c in verb.children):
            continue  # "image did not load": about the picture, not the scene
        objects = [e for c in verb.children if c.dep_ in ("dobj", "attr") for e in _entities(c)]
        if not owners:
            b.node(verb, absent=True)  # a negated action with nobody named doing it
            continue
        for x in owners:
            if objects:
                for o in objects:
                    b.rels.append((b.node(x), verb.lemma_.lower(), b.node(o), True))
            else:
                b.attrs.append((b.node(x), verb.lemma_.lower(), True))  # "not eating"


def _ellipsis(b: _Builder, aux: Any) -> None:
    """ "one is wearing a hard hat and the other is not", "one wearing a shirt, one isn't":
    a bare negated auxiliary repeats the nearest earlier verb's objects for its own subject."""
    if aux.lemma_.lower() not in ("be", "do", "have") or not any(c.dep_ == "neg" for c in aux.children):
        return
    if any(c.dep_ in ("attr", "acomp", "dobj", "xcomp", "prep", "ccomp", "oprd", "advmod") for c in aux.children):
        return
    subj = next((c for c in aux.children if c.dep_ in ("nsubj", "nsubjpass")), None)
    if subj is None:
        return
    if aux.dep_ == "conj" and aux.head.pos_ == "VERB":
        ante = aux.head
    else:
        ante = next((t for t in reversed(list(aux.doc[: aux.i])) if t.pos_ == "VERB"), None)
    if ante is None:
        return
    objects = [e for c in ante.children if c.dep_ == "dobj" for e in _entities(c)]
    if not objects and ante.dep_ == "amod":
        objects = _entities(ante.head)  # "one wearing gloves, one isn't" ("wearing" parsed a modifier of gloves)
    if not objects:
        return
    s = b.node(subj) if _nounish(subj) else b.synthetic("person", absent=False)
    for o in objects:
        gone = b.synthetic(_name(o), absent=ante.lemma_.lower() in _POSSESSION)
        b.rels.append((s, ante.lemma_.lower(), gone, True))


def _perceive(b: _Builder, verb: Any, subjects: list[Any], neg: bool) -> None:
    """ "I don't see a helmet", "the image shows no guardrail": what is not perceived is
    absent, unless a clause says what is not the case ("I don't see the worker wearing a
    helmet": the worker is there, the wearing is negated, read from that clause). A scene
    subject ("the driver does not see the cone") is an ordinary negated relation."""
    scene_subjects = [s for s in subjects if s.lower_ not in _PERCEIVERS]
    objects = [e for c in verb.children if c.dep_ in ("dobj", "attr") for e in _entities(c)]
    embedded = any(c.dep_ in ("ccomp", "xcomp") for c in verb.children) or any(
        c.dep_ in ("acl", "relcl") for o in objects for c in o.children
    )
    for o in objects:
        b.node(o, absent=_det_no(o) or (neg and not embedded and not scene_subjects))
        for s in scene_subjects:
            b.rels.append((s.i, verb.lemma_.lower(), o.i, neg or _det_no(o)))
    if scene_subjects:
        _prep_relations(b, scene_subjects, verb, verb.lemma_.lower(), neg)


# -- FACTUAL T5 (high fidelity) ---------------------------------------------------------

FACTUAL_MODEL = "lizhuang144/flan-t5-base-VG-factual-sg"
_FACTUAL_PROMPT = "Generate Scene Graph: "


def parse_factual_output(text: str) -> SceneGraph:
    """FACTUAL's linearised output ``( man , wear , goggles ) , ( man , is , tall ) ,
    ( helmet )`` -> a SceneGraph; an ``is`` triple is an attribute."""
    objects: list[str] = []
    attributes: list[tuple[str, str]] = []
    relations: list[tuple[str, str, str]] = []
    for inner in re.findall(r"\(([^()]*)\)", text):
        parts = [p.strip().lower() for p in inner.split(",")]
        parts = [p for p in parts if p]
        if len(parts) == 1:
            objects.append(parts[0])
        elif len(parts) == 3:
            s, p, o = parts
            objects.append(s)
            if p in ("is", "are"):
                attributes.append((s, o))
            else:
                objects.append(o)
                relations.append((s, p, o))
    return SceneGraph(tuple(dict.fromkeys(objects)), tuple(attributes), tuple(relations))


class FactualT5Parser:
    """The FACTUAL T5 scene-graph parser through transformers (batched), parsing negative
    and affirmative sentences independently (paper, stage IV)."""

    one_parse = False

    def __init__(
        self, model: str = FACTUAL_MODEL, device: str | None = None, batch_size: int = 32, max_new_tokens: int = 128
    ):
        self.name = f"FACTUAL T5 ({model})"
        self.model_name = model
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens
        self.device = cache.torch_device(device)

        def load() -> tuple[Any, Any]:
            from transformers import (
                AutoModelForSeq2SeqLM,
                AutoTokenizer,
            )  # deferred: transformers (imports torch) is heavy to import

            try:
                tok = AutoTokenizer.from_pretrained(model)
                net = cache.load_pretrained(AutoModelForSeq2SeqLM, model, self.device)
            except OSError as exc:
                raise MissingNLPComponent(
                    f"FACTUAL parser {model!r} is not available (download it once with network, or pass a local folder); "
                    "the offline default is parser='rule'"
                ) from exc
            return tok, net

        self._tok, self._net = cache.cached(("factual_t5", model, self.device), load)

    def provenance(self) -> dict[str, Any]:
        return {"parser": self.name}

    def generate(self, sentences: list[str]) -> list[str]:
        """FACTUAL's linearised graphs of ``sentences`` (batched, greedy)."""
        import torch  # deferred: torch is heavy to import

        out: list[str] = []
        for start in range(0, len(sentences), self.batch_size):
            chunk = [_FACTUAL_PROMPT + s for s in sentences[start : start + self.batch_size]]
            batch = self._tok(chunk, padding=True, truncation=True, max_length=256, return_tensors="pt").to(self.device)
            with torch.no_grad():
                ids = self._net.generate(**batch, max_new_tokens=self.max_new_tokens, num_beams=1, do_sample=False)
            out.extend(self._tok.batch_decode(ids, skip_special_tokens=True))
        return out

    def _parse(self, sentences: list[str]) -> list[SceneGraph]:
        return [parse_factual_output(t) for t in self.generate(sentences)]

    def parse_pairs(
        self, negative: Sequence[str], affirmative: Sequence[str]
    ) -> list[tuple[SceneGraph, SceneGraph] | Exception]:
        graphs = self._parse([*negative, *affirmative])
        n = len(negative)
        return list(zip(graphs[:n], graphs[n:]))


# -- DiscoSG-Refiner (the paper's parser) ------------------------------------------------

DISCOSG_MODEL = "sqlinn/DiscoSG-Refiner-Large-t5-only"
DISCOSG_INSTALL = (
    "pip install --no-deps discosg==0.0.5 peft (--no-deps: the discosg package pins torch<=2.6, which would replace "
    "the torch lmms-scene runs on)"
)


class DiscoSGParser:
    """DiscoSG-Refiner (Lin et al. 2025) through the ``discosg`` package, as the paper's
    stage IV: each sentence's initial graph (FACTUAL T5, ``initial``) is refined by
    DiscoSG's delete-then-insert passes; negative and affirmative sentences are parsed
    independently. Everything is loaded here, so a missing package or checkpoint stops a
    run before the model generates anything, saying how to get it."""

    one_parse = False

    def __init__(
        self, model: str = DISCOSG_MODEL, initial: str = FACTUAL_MODEL, device: str | None = None, batch_size: int = 16
    ):
        self.name = f"DiscoSG-Refiner ({model}; initial graphs: FACTUAL T5 {initial})"
        self.model_name, self.batch_size = model, batch_size
        self.device = cache.torch_device(device)

        def load() -> Any:
            try:
                from discosg.parser.DualTaskSceneGraphParser import (
                    DualTaskSceneGraphParser,
                )  # deferred: optional (discosg may not be installed)
            except ImportError as exc:
                raise MissingNLPComponent(
                    f"parser='discosg' needs the discosg package: {DISCOSG_INSTALL}; the offline default is parser='rule'"
                ) from exc
            try:
                return DualTaskSceneGraphParser(model_path=model, device=self.device, lemmatize=False, lowercase=True)
            except (OSError, ValueError) as exc:
                raise MissingNLPComponent(
                    f"DiscoSG-Refiner checkpoint {model!r} is not available (download it once with network: `hf download {model}` "
                    "and `hf download google/flan-t5-base` for its tokenizer, or pass a local folder as model=); "
                    "the offline default is parser='rule'"
                ) from exc

        self._refiner = cache.cached(("discosg", model, self.device), load)
        self._initial = FactualT5Parser(model=initial, device=device)

    def provenance(self) -> dict[str, Any]:
        return {"parser": self.name}

    def parse_pairs(
        self, negative: Sequence[str], affirmative: Sequence[str]
    ) -> list[tuple[SceneGraph, SceneGraph] | Exception]:
        sentences = [*negative, *affirmative]
        initial = dict(zip(sentences, self._initial.generate(sentences)))
        refined = self._refiner.parse(
            descriptions=list(initial), graph_to_fix=initial, batch_size=self.batch_size, task="delete_before_insert"
        )
        graphs = [parse_factual_output(refined["insert"].get(s) or initial[s]) for s in sentences]
        n = len(negative)
        return list(zip(graphs[:n], graphs[n:]))
