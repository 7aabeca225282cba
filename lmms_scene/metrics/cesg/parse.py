"""CESG stage IV (Parse): sentence-level scene-graph parsers.

A parser turns aligned (negative sentence, affirmative sentence) pairs into pairs of
factual :class:`~lmms_scene.metrics.cesg.graph.SceneGraph`; stage V compares them.

* :class:`RuleParser` (offline default): dependency rules on spaCy ``en_core_web_sm``.
  It reads negation scope itself (spaCy's ``neg`` label covers only not/n't, so "no",
  "without", "neither ... nor", "lacks", "missing" are rules here), which lets it derive
  both graphs from one parse of the negative sentence: the factual graph keeps what is
  asserted, the affirmative graph keeps everything. That halves parsing time and gives
  the same graphs as parsing the stripped text for the cues it knows.
* The model parsers (:mod:`~lmms_scene.metrics.cesg.model_parsers`, loaded only when asked):
  :class:`~lmms_scene.metrics.cesg.model_parsers.FactualT5Parser` (high fidelity: the FACTUAL
  T5 parser ``lizhuang144/flan-t5-base-VG-factual-sg`` through transformers, batched, parsing
  the negative and the affirmative sentences independently, as the paper does with its
  parser) and the DiscoSG-Refiner.

The rules' word lists are :mod:`~lmms_scene.metrics.cesg.lexicon`, their tests of one token
:mod:`~lmms_scene.metrics.cesg.tokens`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lmms_scene.metrics.cesg.graph import SceneGraph
from lmms_scene.metrics.cesg.lexicon import (
    _ABSENT_ADJ,
    _DEPICTIONS,
    _EPISTEMIC_ADJ,
    _EXIST,
    _HOLDING,
    _LACK,
    _NOUN,
    _PERCEIVE,
    _PERCEIVERS,
    _PERSON_WORDS,
    _POSSESSION,
    _RAISING,
    _SCENE_NOUNS,
    _WITH_VERBS,
)
from lmms_scene.metrics.cesg.tokens import (
    _ANTECEDENTS,
    _conjuncts,
    _denied,
    _det_no,
    _entities,
    _has_neg,
    _in_no_picture,
    _is_evidence,
    _is_idiom,
    _is_lack,
    _is_quantifier,
    _lexical,
    _lost_being,
    _misparsed_verb,
    _name,
    _not_only,
    _nounish,
    _pobjs,
    _qualifier,
    _subjects,
    _unit,
)
from lmms_scene.nlp.spacy_model import provenance, spacy_pipeline
from lmms_scene.nlp.wordnet import morphy


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


class _Builder:
    def __init__(self) -> None:
        self.absent: dict[int, bool] = {}
        self.names: dict[int, str] = {}
        self.quals: dict[int, tuple[str, ...]] = {}
        self.attrs: list[tuple[int, str, bool]] = []
        self.rels: list[tuple[int, str, int, bool]] = []
        self._synthetic = 0
        #: tokens a special reading already took (the rules below leave them alone)
        self.read: set[int] = set()

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
    _zero_fragment(b, doc)
    _no_thing_visible(b, doc)
    for tok in doc:
        if tok.i in b.read:
            continue
        if (
            (_nounish(tok) or (tok.pos_ == "PRON" and tok.lower_ in _PERSON_WORDS))
            and (tok.dep_ != "compound" or tok.head.pos_ == "VERB")  # "there's no dog standing": "dog" a compound
            and not _is_quantifier(tok)
            and not _is_evidence(tok)
            and not _is_idiom(tok)
            and not _is_lack(tok)
            and tok.lower_ != "sans"
            and _lexical(tok) is None
            and not _misparsed_verb(tok)
            and not _in_no_picture(tok)
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
            in_no_picture = any(
                c.dep_ == "prep" and c.lower_ in ("in", "on", "within") and any(_in_no_picture(o) for o in c.children)
                for c in tok.children
            )  # "there are lemon slices on the cake in neither of the photos"
            b.node(
                tok,
                absent=(det_no and not transitive_subject and not double) or missing_mod or sans or in_no_picture,
            )
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
        elif (
            tok.pos_ in ("VERB", "AUX") and tok.dep_ not in ("aux", "auxpass") and _lexical(tok) is None
        ) or _misparsed_verb(tok):
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
        if (
            tok.i in b.names
            and tok.dep_ == "conj"
            and tok.head.i in b.names
            and b.absent.get(tok.head.i)
            and not any(c.dep_ == "nummod" or (c.dep_ == "det" and c.lower_ != "no") for c in tok.children)
        ):  # but not "zero cats and three dogs", "no helmet and a vest"
            b.absent[tok.i] = True
    return b.graphs()


#: adverbs that say where or how a thing is after "be": "the cat is not outside"
_STATE_ADVERBS = frozenset("outside inside indoors outdoors alone together upstairs downstairs underwater".split())


def _no_thing_visible(b: _Builder, doc: Any) -> None:
    """ "There is no dog present", "There is no hummingbird visible": the small model makes
    "present"/"visible" the attribute and the thing its modifier, with "no" on either. The
    modifiers between "no" and the adjective name the absent thing; the attribute goes into
    ``b.read``."""
    for attr in doc:
        if attr.dep_ != "attr" or attr.lower_ not in ("present", "visible", "available"):
            continue
        if not any(c.dep_ == "expl" for c in attr.head.children):
            continue
        mods = [c for c in attr.children if c.i < attr.i and c.dep_ in ("compound", "amod", "advmod", "nmod")]
        no = next(
            (c for t in [attr, *mods] for c in t.children if c.dep_ == "det" and c.lower_ == "no" and c.i < attr.i),
            None,
        )
        if no is None or not mods:
            continue
        between = doc[no.i + 1 : attr.i]
        if any(t.i not in {m.i for m in mods} or not t.is_alpha for t in between):
            continue
        *first, last = [t.lower_ for t in between]
        gone = b.synthetic(" ".join([*first, morphy(last, "n") or last]), absent=True)
        b.read.update(t.i for t in [attr, *between])
        for prep in (c for c in attr.children if c.dep_ == "prep"):  # "... present on the scaffold"
            for o in _pobjs(prep):
                if o.lemma_.lower() not in _DEPICTIONS | _SCENE_NOUNS:  # "in the picture" is no place
                    b.rels.append((gone, prep.lower_, b.node(o), False))


def _zero_fragment(b: _Builder, doc: Any) -> None:
    """A count answer "Zero snakes", "Zero vultures in the picture": the small model tags
    the plural noun a verb with "Zero" its subject; the noun is absent."""
    words = [t for t in doc if not (t.is_punct or t.is_space)]
    if len(words) < 2 or words[0].lower_ != "zero":
        return
    noun = words[1]
    if (
        words[0].head.i == noun.i
        and noun.dep_ == "ROOT"
        and (noun.pos_ == "VERB" and noun.tag_ == "VBZ" or noun.tag_ == "NNS" and words[0].dep_ == "nsubj")
        and noun.lower_.endswith("s")
        and all(c.i == words[0].i or c.dep_ in ("prep", "punct") for c in noun.children)  # not "Zero runs the show"
    ):
        name = noun.lemma_.lower()
        if name not in ("be", "have", "do") and not _unit(noun) and name != noun.lower_ and morphy(name, "n") == name:
            b.synthetic(name, absent=True)


#: determiners that leave a held object's existence open ("not holding a/any/some purse")
_INDEFINITE = {"a", "an", "any", "some", "no"}


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
            if c.i in b.read:
                continue
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
            elif c.dep_ == "advmod" and c.lower_ in _STATE_ADVERBS and not expl:
                for s in subjects:  # "the cat is not outside", "the dog is not alone"
                    b.attrs.append((s.i, c.lower_, neg))
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
        held = (  # an explicit "a"/"any" object ("not holding a purse"), not "holding hands", "hold back"
            neg
            and lemma in _HOLDING
            and any(c.dep_ == "det" and c.lower_ in _INDEFINITE for c in o.children)
            and not any(c.dep_ in ("prt", "advmod") for c in verb.children)
        )
        b.node(o, absent=objects_absent or det_no or held)
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
