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
from collections.abc import Sequence
from typing import Any

from lmms_scene.metrics.cesg.graph import SceneGraph

#: words whose presence marks a verb or noun phrase as negated (beyond spaCy's `neg`)
_NEG_DET = {"no", "neither"}
_NEG_SUBJ_PRON = {"none", "neither", "nobody", "nothing", "noone"}
_QUANT_OF = {"none", "neither", "all", "both", "each", "either", "some", "any", "most", "many", "several", "one", "two", "three"}
_LACK = {"lack", "miss"}
#: verbs whose negation means the object is not there ("not wearing a helmet"); for other
#: verbs only the relation is negated ("nobody is holding the ladder": the ladder is there)
_POSSESSION = {"have", "wear", "carry", "use", "own", "bring", "don", "put", "contain", "include"}
_ABSENT_ADJ = {"missing", "absent", "lacking", "unavailable", "gone"}
#: predicates that only state existence: "no sign is visible" == "there is no sign"
_EXIST = {"visible", "present", "available", "provide", "install", "see", "evident", "exist", "place", "there"}
#: passive verbs whose "with" object is what is (not) there: "not equipped with harnesses"
_WITH_VERBS = {"equip", "provide", "fit", "supply", "furnish", "outfit"}
#: indefinite people: "no one", "nobody" -> a person node
_PERSON_WORDS = {"one", "nobody", "noone", "someone", "anyone", "everyone", "somebody", "anybody", "everybody"}
_NOUN = {"NOUN", "PROPN"}


class RuleParser:
    """Dependency-rule scene-graph parser on spaCy (see the module docstring)."""

    name = "lmms-scene dependency rules on spaCy en_core_web_sm"
    one_parse = True

    def __init__(self, nlp: Any | None = None):
        self._nlp = nlp

    @property
    def nlp(self) -> Any:
        if self._nlp is None:
            from lmms_scene.nlp.spacy_model import spacy_pipeline

            self._nlp = spacy_pipeline()
        return self._nlp

    def provenance(self) -> dict[str, Any]:
        from lmms_scene.nlp.spacy_model import provenance

        return {"parser": self.name, **provenance()}

    def parse_pairs(self, negative: Sequence[str], affirmative: Sequence[str]) -> list[tuple[SceneGraph, SceneGraph] | Exception]:
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


def _name(tok: Any) -> str:
    if tok.lower_ in _PERSON_WORDS:
        return "person"
    parts = [c.lemma_.lower() for c in tok.lefts if c.dep_ == "compound" and c.pos_ in _NOUN | {"ADJ", "VERB"}]
    return " ".join([*parts, tok.lemma_.lower()])


def _conjuncts(tok: Any) -> list[Any]:
    out = [tok]
    for c in tok.children:
        if c.dep_ == "conj" and c.pos_ in _NOUN | {"ADJ", "VERB"} and c.pos_ == tok.pos_ or (c.dep_ == "conj" and c.pos_ in _NOUN and tok.pos_ in _NOUN):
            out.extend(_conjuncts(c))
    return out


#: pronoun token index -> antecedent token, while one sentence of a resolved doc is parsed
_ANTECEDENTS: contextvars.ContextVar[dict[int, Any]] = contextvars.ContextVar("cesg_antecedents", default={})


def _entities(tok: Any) -> list[Any]:
    """Noun tokens a token stands for: itself and its conjuncts; "neither of X" -> X; a
    resolved pronoun -> its antecedent (and the antecedent's conjuncts)."""
    antecedent = _ANTECEDENTS.get().get(tok.i)
    if antecedent is not None:
        return _entities(antecedent)
    if tok.pos_ in _NOUN and not _is_quantifier(tok):
        return [t for t in _conjuncts(tok) if t.pos_ in _NOUN or t.lower_ in _PERSON_WORDS]
    if tok.lower_ in _PERSON_WORDS and tok.pos_ == "PRON":
        return [tok]
    if _is_quantifier(tok):
        for prep in tok.children:
            if prep.dep_ == "prep" and prep.lower_ == "of":
                for pobj in prep.children:
                    if pobj.dep_ == "pobj":
                        return _entities(pobj)
    return []


def _has_neg(tok: Any) -> bool:
    for c in tok.children:
        if c.dep_ == "neg" or (c.dep_ in ("aux", "auxpass") and any(g.dep_ == "neg" for g in c.children)):
            return True
        if c.dep_ in ("advmod", "preconj", "cc") and c.lower_ in ("never", "no", "neither"):
            return True
    return False


def _subject_negates(subj: Any) -> bool:
    if subj.lower_ in _NEG_SUBJ_PRON:
        return True
    return any((c.dep_ in ("det", "preconj") and c.lower_ in _NEG_DET) for c in subj.children)


def _subjects(verb: Any, depth: int = 0) -> tuple[list[Any], bool]:
    """(subject nouns of ``verb``, whether a subject quantifier negates it)."""
    subjs = [c for c in verb.children if c.dep_ in ("nsubj", "nsubjpass")]
    if subjs:
        ents = [e for s in subjs for e in _entities(s)]
        return ents, any(_subject_negates(s) for s in subjs)
    if verb.dep_ in ("acl", "relcl") and verb.head.pos_ in _NOUN:
        return _entities(verb.head), False
    if verb.dep_ in ("conj", "xcomp", "advcl") and verb.head is not verb and depth < 5:
        ents, neg = _subjects(verb.head, depth + 1)
        return ents, (neg if verb.dep_ == "conj" else False)
    return [], False


def _pobjs(prep: Any) -> list[Any]:
    return [e for c in prep.children if c.dep_ == "pobj" for e in _entities(c)]


class _Builder:
    def __init__(self) -> None:
        self.absent: dict[int, bool] = {}
        self.names: dict[int, str] = {}
        self.attrs: list[tuple[int, str, bool]] = []
        self.rels: list[tuple[int, str, int, bool]] = []

    def node(self, tok: Any, absent: bool = False) -> int:
        self.names[tok.i] = _name(tok)
        self.absent[tok.i] = self.absent.get(tok.i, False) or absent
        return tok.i

    def graphs(self) -> tuple[SceneGraph, SceneGraph]:
        order = sorted(self.names)
        name = dict(self.names)
        # An absent object's modifiers describe the absent thing ("no hard hat"): they
        # join its description instead of becoming negated attributes of their own.
        folded = {i for i, a, _ in self.attrs if self.absent.get(i)}
        for i in folded:
            mods = [a for j, a, _ in self.attrs if j == i]
            name[i] = " ".join([*dict.fromkeys(mods), name[i]])
        attrs = [(i, a, neg) for i, a, neg in self.attrs if i not in folded]
        factual = SceneGraph(
            objects=tuple(name[i] for i in order if not self.absent[i]),
            attributes=tuple((name[i], a) for i, a, neg in attrs if not neg and not self.absent[i]),
            relations=tuple(
                (name[s], p, name[o]) for s, p, o, neg in self.rels if not neg and not self.absent[s] and not self.absent[o]
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
        objs = _pobjs(prep)
        if word == "without":
            for o in objs:
                b.node(o, absent=True)
                for h in heads:
                    b.rels.append((b.node(h), "with" if not base else f"{base} with", o.i, True))
            continue
        for o in objs:
            det_no = any(c.dep_ == "det" and c.lower_ == "no" for c in o.children)
            b.node(o, absent=det_no)
            for h in heads:
                b.rels.append((b.node(h), f"{base} {word}".strip(), o.i, neg or det_no))


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
        if (tok.pos_ in _NOUN or (tok.pos_ == "PRON" and tok.lower_ in _PERSON_WORDS)) and tok.dep_ != "compound" and not _is_quantifier(tok):
            det_no = any(c.dep_ == "det" and c.lower_ == "no" for c in tok.children)
            # "no" on the subject of a transitive verb negates the verb, not the subject
            transitive_subject = tok.dep_ == "nsubj" and any(c.dep_ == "dobj" for c in tok.head.children)
            missing_mod = any(c.dep_ == "amod" and c.lower_ in _ABSENT_ADJ for c in tok.children)
            b.node(tok, absent=(det_no and not transitive_subject) or missing_mod)
            for c in tok.children:
                if c.dep_ == "amod" and c.lower_ not in _ABSENT_ADJ:
                    for adj in _conjuncts(c):
                        b.attrs.append((tok.i, adj.lemma_.lower(), False))
                elif c.dep_ == "poss" and c.pos_ in _NOUN:
                    b.rels.append((b.node(c), "have", tok.i, False))
            _prep_relations(b, [tok], tok, "", False)
        elif tok.pos_ in ("VERB", "AUX") and tok.dep_ not in ("aux", "auxpass"):
            _verb(b, tok)
        elif tok.pos_ == "ADJ" and tok.dep_ == "acomp":
            pass  # handled from its verb
    # conjoined nouns share absence ("no helmet or gloves", "without a shield or gloves")
    for tok in doc:
        if tok.i in b.names and tok.dep_ == "conj" and tok.head.i in b.names and b.absent.get(tok.head.i):
            b.absent[tok.i] = True
    return b.graphs()


def _verb(b: _Builder, verb: Any) -> None:
    lemma = verb.lemma_.lower()
    subjects, subject_neg = _subjects(verb)
    neg = _has_neg(verb) or subject_neg
    passive = any(c.dep_ == "auxpass" for c in verb.children)
    for s in subjects:
        b.node(s)
    if lemma == "be" or (lemma in _EXIST | {"miss"} and passive) or (lemma == "miss" and not any(c.dep_ == "dobj" for c in verb.children)):
        if lemma != "be":
            # "the guardrail is not installed", "the extinguisher is missing"
            gone = (not neg) if lemma == "miss" else neg
            for s in subjects:
                b.node(s, absent=gone)
            _prep_relations(b, subjects, verb, "", neg)
            return
        expl = any(c.dep_ == "expl" for c in verb.children)
        for c in verb.children:
            if c.dep_ == "attr" and c.pos_ in _NOUN | {"PRON"}:
                ents = _entities(c)
                if expl:  # "there is (no) X"
                    for e in ents:
                        det_no = any(d.dep_ == "det" and d.lower_ == "no" for d in e.children)
                        b.node(e, absent=neg or det_no)
                else:
                    for e in ents:
                        for s in subjects:
                            b.attrs.append((s.i, e.lemma_.lower(), neg))
            elif c.dep_ == "acomp":
                for adj in _conjuncts(c):
                    word = adj.lemma_.lower()
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
        _prep_relations(b, subjects, verb, "", neg)
        return
    with_objects = [o for c in verb.children if c.dep_ == "prep" and c.lower_ == "with" for o in _pobjs(c)]
    if passive and lemma in _WITH_VERBS and with_objects:
        # "the workers are not equipped with harnesses": the harnesses are absent
        for o in with_objects:
            b.node(o, absent=neg)
            for s in subjects:
                b.rels.append((s.i, "with", o.i, neg))
        return
    if passive:
        # "the eyes are not protected", "the ladder is not secured to the wall"
        for s in subjects:
            b.attrs.append((s.i, lemma, neg))
        _prep_relations(b, subjects, verb, lemma, neg)
        return
    predicate, rel_neg, objects_absent = lemma, neg, neg and lemma in _POSSESSION
    if lemma in _LACK:  # "lacks a guardrail" == "does not have a guardrail"
        predicate, rel_neg, objects_absent = "have", not neg, not neg
    objects = [e for c in verb.children if c.dep_ in ("dobj", "attr", "oprd") for e in _entities(c)]
    for o in objects:
        det_no = any(c.dep_ == "det" and c.lower_ == "no" for c in o.children)
        b.node(o, absent=objects_absent or det_no)
        for s in subjects:
            b.rels.append((s.i, predicate, o.i, rel_neg or det_no))
    _prep_relations(b, subjects, verb, predicate, rel_neg)


# -- FACTUAL T5 (high fidelity) ---------------------------------------------------------

FACTUAL_MODEL = "lizhuang144/flan-t5-base-VG-factual-sg"
_FACTUAL_PROMPT = "Generate Scene Graph: "


def parse_factual_output(text: str) -> SceneGraph:
    """FACTUAL's linearised output ``( man , wear , goggles ) , ( man , is , tall ) ,
    ( helmet )`` -> a SceneGraph; an ``is`` triple is an attribute."""
    import re

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

    def __init__(self, model: str = FACTUAL_MODEL, device: str | None = None, batch_size: int = 32, max_new_tokens: int = 128):
        from lmms_scene import cache
        from lmms_scene.nlp import MissingNLPComponent

        self.name = f"FACTUAL T5 ({model})"
        self.model_name = model
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens
        self.device = cache.torch_device(device)

        def load() -> tuple[Any, Any]:
            from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

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

    def _parse(self, sentences: list[str]) -> list[SceneGraph]:
        import torch

        out: list[SceneGraph] = []
        for start in range(0, len(sentences), self.batch_size):
            chunk = [_FACTUAL_PROMPT + s for s in sentences[start : start + self.batch_size]]
            batch = self._tok(chunk, padding=True, truncation=True, max_length=256, return_tensors="pt").to(self.device)
            with torch.no_grad():
                ids = self._net.generate(**batch, max_new_tokens=self.max_new_tokens, num_beams=1, do_sample=False)
            out.extend(parse_factual_output(t) for t in self._tok.batch_decode(ids, skip_special_tokens=True))
        return out

    def parse_pairs(self, negative: Sequence[str], affirmative: Sequence[str]) -> list[tuple[SceneGraph, SceneGraph] | Exception]:
        graphs = self._parse([*negative, *affirmative])
        n = len(negative)
        return list(zip(graphs[:n], graphs[n:]))
