"""CESG matching and the score (paper, "Evaluation Process").

Only absent information is evaluated: absent objects (I^o), negated attributes (I^a) and
negated relations (I^r); present nodes and solid edges are filtered out first.
The dependents of an element (paper's D(e)): none for an object; the node (name, marker)
for an attribute; subject and object nodes for a relation.

Matching, in order, each element leaving the pool once matched:

1. hard: equal element and equal dependents;
2. synonym: WordNet synonyms (x in W(y) or y in W(x), or an optional verifier Q_v) with
   dependents equal or synonyms and of equal marker (F_dep);
3. interactive: verbalised element of one type vs one of another type, similarity > lambda;
4. extra (off by default): a judge Q_e confirms a predicted absence missing from the
   ground truth; counts for precision only;
5. soft: the rest, similarity matrix per type; sum of row maxima for precision, column
   maxima for recall (negative cosines count as 0).

A predicted element counts as matched when it matches any reference element (and a
reference element when any prediction matches it): the paper's plural merging (Q5), so
"neither of these individuals is wearing a safety hat" can answer two per-person
references. P_t = matched_pred / |I_p^t|, R_t = matched_gt / |I_g^t|.

Which entity a dependent is (Q3, Q6): a node's qualifier ("worker" on scaffold) tells it
apart from others of its name. A predicted node is compatible with a reference node
unless its qualifier picks out *another* entity of that name in the reference ("the
worker on the ground" when the reference has a worker on the scaffold and one on the
ground); an unqualified node, or one the reference cannot tell apart, is compatible (Q3:
"the fire box near the wall" is the reference's only fire box). Synonym matching needs
compatible dependents; soft and interactive credit for an attribute or relation anchored
to an incompatible entity is 0 (ours: the paper's soft matching would otherwise give the
wrong worker most of the credit). A dependent may also be named by a WordNet hypernym
("individual" for "man": Q5) or a generic modifier may be left out ("helmet" for
"safety helmet").

Per-row scores (the paper's corpus convention row by row): P_t is undefined (None) when
the prediction has no element of type t, R_t when the reference has none; F1_t is None
when both are, 0 when one is; CESG renormalises the weights over the types with an F1,
so an empty type never adds points and an identical caption scores 1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lmms_scene import cache
from lmms_scene.metrics.cesg.graph import CESG, Attribute, Node, Relation
from lmms_scene.nlp.wordnet import hypernym_closure, hypernyms, lexname, synonyms, synsets

TYPES = ("o", "a", "r")
#: CESG = 0.5 F1_o + 0.25 F1_a + 0.25 F1_r (paper, Implementation Details)
DEFAULT_WEIGHTS = (0.5, 0.25, 0.25)
#: interactive-matching threshold lambda (the paper does not publish its value; ours for
#: MiniLM on verbalised elements, recorded with every score)
DEFAULT_LAMBDA = 0.6
#: what a dependent the reference does not mention costs (ours): a predicted relation that
#: only adds a dependent to a claim the prediction already makes counts as that claim plus
#: this fraction of an unmatched element of its type (see :func:`fold_extra_dependents`)
EXTRA_DEPENDENT_COST = 0.25
#: predicates that say a subject has an (absent) object with it: for an absent object
#: "has no helmet (on)", "is not wearing a helmet", "is not using a helmet", "is without
#: a helmet" state one thing (ours; the parser keeps the verb as written)
POSSESSION_PREDICATES = frozenset(
    {"have", "wear", "use", "carry", "don", "have on", "put on", "with", "equip with", "bring", "hold"}
)


def elements(g: CESG) -> dict[str, list[Any]]:
    return {"o": list(g.absent_objects), "a": list(g.negated_attributes), "r": list(g.negated_relations)}


def verbalise(e: Any) -> str:
    """S(x): the element as a short phrase for the sentence encoder ("worker wear helmet").
    Dependents by name: which entity they are is the anchor check's business
    (:func:`anchored`), so the similarity measures what is claimed missing."""
    if isinstance(e, Node):
        return e.name
    if isinstance(e, Attribute):
        return f"{e.node.name} {e.attribute}"
    return f"{e.subject.name} {e.predicate} {e.object.name}"


def _word(e: Any) -> str:
    return e.name if isinstance(e, Node) else e.attribute if isinstance(e, Attribute) else e.predicate


def _deps(e: Any) -> tuple[Node, ...]:
    if isinstance(e, Node):
        return ()
    if isinstance(e, Attribute):
        return (e.node,)
    return (e.subject, e.object)


def hard(x: Any, y: Any) -> bool:
    return type(x) is type(y) and _word(x) == _word(y) and _deps(x) == _deps(y)


def _pos(e: Any) -> str | None:
    return "n" if isinstance(e, Node) else None


#: modifiers that do not change what an object is ("safety helmet" is a helmet)
GENERIC_MODIFIERS = frozenset(
    "safety protective protection work personal proper required appropriate adequate necessary suitable".split()
)


def _core(name: str) -> str:
    words = name.split()
    while len(words) > 1 and words[0] in GENERIC_MODIFIERS:
        words = words[1:]
    return " ".join(words)


def word_synonyms(a: str, b: str, pos: str | None = None) -> bool:
    """Equal, WordNet synonyms as a whole, or word by word ("safety hat" ~ "hard hat" as a
    compound; "weld with" ~ "weld with"), also with generic modifiers left out
    ("safety helmet" ~ "helmet"). Memoised."""
    if a == b:
        return True

    return cache.memo("cesg.word_synonyms", (a, b, pos), lambda: _word_synonyms(a, b, pos))


def _word_synonyms(a: str, b: str, pos: str | None) -> bool:
    if synonyms(a, b, pos):
        return True
    wa, wb = a.split(), b.split()
    if len(wa) == len(wb) > 1 and all(x == y or synonyms(x, y) for x, y in zip(wa, wb)):
        return True
    ca, cb = _core(a), _core(b)
    if (ca, cb) != (a, b) and (ca == cb or synonyms(ca, cb, pos)):
        return True
    if pos == "n":
        # one names the other's kind one WordNet step up ("helmet" for "hard hat",
        # "railing" for "guardrail"), or the prediction (a) names the reference's head
        # alone ("mask" for "dust mask"; not "yellow vest" for "vest"); ours
        ha, hb = ca.split(), cb.split()
        if len(ha) == 1 and len(hb) > 1 and hb[-1] == ha[0]:  # the prediction (a) names the head only
            return True
        return _direct_kind(ca, cb) or _direct_kind(cb, ca)
    return False


def _direct_kind(general: str, specific: str) -> bool:
    """``general`` is a direct WordNet hypernym of one of ``specific``'s first two noun senses."""
    targets = {s for s in synsets(general, "n")[:2] if s.name().split(".")[0] not in _TOO_GENERAL}
    return bool(targets) and any(targets & set(hypernyms(s)) for s in synsets(specific, "n")[:2])


def _kind_of(a: str, b: str) -> bool:
    """Whether a names a kind b belongs to (WordNet hypernym within 3 steps, below the
    most general nouns): "individual" for "man", "person" for "worker"."""
    return cache.memo("cesg.kind_of", (a, b), lambda: _hypernym(a, b))


_TOO_GENERAL = {
    "entity",
    "physical_entity",
    "object",
    "whole",
    "thing",
    "abstraction",
    "artifact",
    "living_thing",
    "organism",
    "causal_agent",
}


def _hypernym(a: str, b: str) -> bool:
    targets = {s for s in synsets(a, "n") if s.name().split(".")[0] not in _TOO_GENERAL}
    if not targets:
        return False
    return any(level & targets for s in synsets(b, "n")[:2] for level in hypernym_closure(s, 3))


def same_kind(pred: str, ref: str) -> bool:
    """A predicted dependent's name may stand for the reference's: synonyms, or the
    prediction names a kind the reference's belongs to ("individual" for "man"; not
    "welder" for "worker": a more specific name is a different claim)."""
    return word_synonyms(pred, ref, "n") or _kind_of(pred, ref)


def is_person(name: str) -> bool:
    """A WordNet ``noun.person`` noun ("man", "worker", "welder"; "person" for "no one")."""
    head = name.split()[-1] if name.split() else name
    return cache.memo("cesg.is_person", head, lambda: lexname(head) == "noun.person")


def same_entity(p: Node, g: Node, ref: dict[str, set[tuple[str, ...]]] | None = None) -> bool:
    """Whether predicted dependent ``p`` names reference dependent ``g``: of one kind
    (:func:`same_kind`) and compatible; or two person nouns placed at the same spot (ours:
    "the man on the scaffold" is "the worker on the scaffold"; an unplaced "welder" is not
    "the worker": a more specific name is a different claim)."""
    if same_kind(p.name, g.name):
        return compatible(p, g, ref)
    if not (is_person(p.name) and is_person(g.name)):
        return False
    return bool(p.qualifier and g.qualifier) and _overlap(p.qualifier, g.qualifier) and compatible(p, g, ref)


def referents(g: CESG) -> dict[str, set[tuple[str, ...]]]:
    """Every qualifier under which the graph mentions each name (who is told apart)."""
    out: dict[str, set[tuple[str, ...]]] = {}
    nodes = list(g.present_nodes) + list(g.absent_objects)
    for e in (*g.attributes, *g.relations):
        nodes.extend(_deps(e))
    for n in nodes:
        out.setdefault(n.name, set()).add(n.qualifier)
    return out


def _qual_words(q: tuple[str, ...]) -> set[str]:
    return {w for phrase in q for w in phrase.split()[-1:]}


def _overlap(q1: tuple[str, ...], q2: tuple[str, ...]) -> bool:
    w1, w2 = _qual_words(q1), _qual_words(q2)
    return any(a == b or a.startswith(b) or b.startswith(a) or synonyms(a, b) for a in w1 for b in w2)


def compatible(p: Node, g: Node, ref: dict[str, set[tuple[str, ...]]] | None = None) -> bool:
    """Whether predicted node ``p`` may be reference node ``g`` (see the module docstring).
    Not when ``p`` is named as another reference entity is and ``g`` is not ("the helper"
    when the reference has a helper and a welder), nor when its qualifier picks out another
    entity of ``g``'s name or, for people, another person ("the worker at the table" when
    the reference has the operator at the saw and a worker at the table)."""
    ref = ref or {}
    if p.name != g.name and p.name in ref and not same_kind(p.name, g.name):
        return False
    if not p.qualifier or not g.qualifier or _overlap(p.qualifier, g.qualifier):
        return True
    person = is_person(g.name)
    others = [
        q
        for name, qs in ref.items()
        if name == g.name or (person and is_person(name))
        for q in qs
        if q and (name, q) != (g.name, g.qualifier)
    ]
    return not any(_overlap(p.qualifier, q) for q in others)


def anchored(x: Any, y: Any, ref: dict[str, set[tuple[str, ...]]] | None) -> bool:
    """Every dependent of x compatible with the corresponding dependent of y."""
    return all(compatible(a, b, ref) for a, b in zip(_deps(x), _deps(y)))


def _predicate_synonyms(x: Any, y: Any) -> bool:
    """Relation predicates as one claim: WordNet synonyms, or both predicates of
    possession with an absent object ("has no helmet" ~ "is not wearing a hard hat")."""
    if word_synonyms(x.predicate, y.predicate):
        return True
    return (
        isinstance(x, Relation)
        and x.object.absent
        and y.object.absent
        and x.predicate in POSSESSION_PREDICATES
        and y.predicate in POSSESSION_PREDICATES
    )


def synonym(x: Any, y: Any, verifier: Callable[[str, str], bool | None] | None = None, ref: dict | None = None) -> bool:
    if type(x) is not type(y):
        return False
    dx, dy = _deps(x), _deps(y)
    # F_dep: dependents of equal marker, of one kind (equal, synonyms, hypernym), the same entity
    if any(a.absent != b.absent or not same_entity(a, b, ref) for a, b in zip(dx, dy)):
        return False
    if _predicate_synonyms(x, y) if isinstance(x, Relation) else word_synonyms(_word(x), _word(y), _pos(x)):
        return True
    return bool(verifier is not None and verifier(verbalise(x), verbalise(y)) is True)


@dataclass
class TypeCounts:
    n_pred: int = 0
    n_gt: int = 0
    hard_p: int = 0
    hard_g: int = 0
    synonym_p: int = 0
    synonym_g: int = 0
    interactive_p: int = 0
    interactive_g: int = 0
    extra_p: int = 0
    soft_p: float = 0.0
    soft_g: float = 0.0
    #: predicted relations folded into this type's claims (a dependent the reference does not mention)
    extra_dependents: int = 0

    def prf(self) -> tuple[float | None, float | None, float | None]:
        """(P, R, F1) of one row: None where a side has no element (see the module docstring).
        Each extra dependent adds :data:`EXTRA_DEPENDENT_COST` of an element to |I_p^t|."""
        denominator = self.n_pred + EXTRA_DEPENDENT_COST * self.extra_dependents
        p = (
            min((self.hard_p + self.synonym_p + self.interactive_p + self.extra_p + self.soft_p) / denominator, 1.0)
            if self.n_pred
            else None
        )
        r = (
            min((self.hard_g + self.synonym_g + self.interactive_g + self.soft_g) / self.n_gt, 1.0)
            if self.n_gt
            else None
        )
        return p, r, f1(p, r)


def f1(p: float | None, r: float | None) -> float | None:
    """Harmonic mean; None when both sides are undefined, 0 when one is."""
    if p is None and r is None:
        return None
    if p is None or r is None:
        return 0.0
    return 2 * p * r / (p + r) if p + r > 0 else 0.0


def weighted(f1s: Sequence[float | None], weights: Sequence[float]) -> float | None:
    """CESG = sum_t w_t F1_t / sum_t w_t over the types whose F1 is defined (paper,
    Implementation Details: w = 0.5, 0.25, 0.25); None when none is (or their weights are 0)."""
    pairs = [(w, f) for w, f in zip(weights, f1s) if f is not None]
    total = sum(w for w, _ in pairs)
    return sum(w * f for w, f in pairs) / total if pairs and total > 0 else None


@dataclass
class Options:
    lambda_: float = DEFAULT_LAMBDA
    weights: tuple[float, float, float] = DEFAULT_WEIGHTS
    use_synonyms: bool = True
    interactive: bool = True
    soft: bool = True
    verifier: Callable[[str, str], bool | None] | None = None
    extra_judge: Callable[[str], bool | None] | None = None
    encoder: Any = None  # a SentenceEncoder (None: no similarity stages)
    judge_failures: list[str] = field(default_factory=list)


def fold_extra_dependents(
    P: dict[str, list[Any]], G: dict[str, list[Any]], ref: dict | None = None
) -> tuple[dict[str, list[Any]], dict[str, int]]:
    """A predicted negated relation that only adds a dependent to a claim the prediction
    already makes, where the reference states that claim without the dependent, is that
    claim with an extra dependent (ours): "the cylinders are not chained to the wall"
    (attribute *chain* and relation *chain to wall*) against "the cylinders are not
    chained"; "the worker is not wearing a hard hat" against "there is no hard hat". It
    leaves the relations and costs :data:`EXTRA_DEPENDENT_COST` of an element of the
    claim's type, instead of an unmatched relation (which, with no relation in the
    reference, would zero the row's whole relation type).

    Folded: (a) a relation whose subject and verb are a predicted negated attribute's node
    and attribute, when no reference relation has a compatible subject and that predicate;
    (b) a relation whose object is a predicted absent object, when the reference has that
    object absent and no relation with it. Returns the remaining elements and the number
    folded per type."""
    out = {t: list(P[t]) for t in TYPES}
    folded = {t: 0 for t in TYPES}
    if not P["r"]:
        return out, folded
    keep = []
    for r in P["r"]:
        verb = r.predicate.split()[0]
        if any(a.node == r.subject and a.attribute == verb for a in P["a"]) and not any(
            _predicate_synonyms(r, y) and same_entity(r.subject, y.subject, ref) for y in G["r"]
        ):
            folded["a"] += 1
            continue
        if r.object.absent and any(o.name == r.object.name for o in P["o"]):
            in_ref = [o for o in G["o"] if word_synonyms(r.object.name, o.name, "n")]
            if in_ref and not any(
                word_synonyms(r.object.name, y.object.name, "n") or word_synonyms(r.object.name, y.subject.name, "n")
                for y in G["r"]
            ):
                folded["o"] += 1
                continue
        keep.append(r)
    out["r"] = keep
    return out, folded


def match(pred: CESG, gt: CESG, opts: Options) -> dict[str, TypeCounts]:
    P, G = elements(pred), elements(gt)
    ref = referents(gt)
    P, folded = fold_extra_dependents(P, G, ref)
    counts = {t: TypeCounts(len(P[t]), len(G[t]), extra_dependents=folded[t]) for t in TYPES}
    left_p = {t: list(range(len(P[t]))) for t in TYPES}
    left_g = {t: list(range(len(G[t]))) for t in TYPES}

    def level(test: Callable[[Any, Any], bool], attr: str) -> None:
        for t in TYPES:
            # each (prediction, reference) pair tested once (keyed by identity: hashing the
            # nested frozen elements costs more than the test)
            seen: dict[tuple[int, int], bool] = {}

            def hit(x: Any, y: Any) -> bool:
                key = (id(x), id(y))
                verdict = seen.get(key)  # noqa: B023 (called only inside this iteration)
                if verdict is None:
                    verdict = seen[key] = test(x, y)  # noqa: B023 (as above)
                return verdict

            mp = [i for i in left_p[t] if any(hit(P[t][i], y) for y in G[t])]
            mg = [j for j in left_g[t] if any(hit(x, G[t][j]) for x in P[t])]
            setattr(counts[t], f"{attr}_p", len(mp))
            setattr(counts[t], f"{attr}_g", len(mg))
            left_p[t] = [i for i in left_p[t] if i not in mp]
            left_g[t] = [j for j in left_g[t] if j not in mg]

    level(hard, "hard")
    if opts.use_synonyms or opts.verifier is not None:
        verifier = opts.verifier

        asked: dict[tuple[str, str], bool | None] = {}

        def counted(a: str, b: str) -> bool | None:
            if (a, b) not in asked:  # each pair asked once per match
                asked[(a, b)] = verdict = verifier(a, b)  # type: ignore[misc]
                if verdict is None:  # a failed or ambiguous judge: no match, and counted
                    opts.judge_failures.append(f"{a} ~ {b}")
            return asked[(a, b)]

        def syn(x: Any, y: Any) -> bool:
            if opts.use_synonyms and synonym(x, y, None, ref):
                return True
            return verifier is not None and synonym(x, y, counted, ref)

        level(syn, "synonym")
    enc = opts.encoder
    sim_of = None
    if (
        enc is not None
        and (opts.interactive or opts.soft)
        and any(left_p[t] for t in TYPES)
        and any(left_g[t] for t in TYPES)
    ):
        # one encoder call per side; every similarity below is a slice of this matrix
        pos_p = [(t, i) for t in TYPES for i in left_p[t]]
        pos_g = [(t, j) for t in TYPES for j in left_g[t]]
        full = enc.similarity([verbalise(P[t][i]) for t, i in pos_p], [verbalise(G[t][j]) for t, j in pos_g])
        row = {key: n for n, key in enumerate(pos_p)}
        col = {key: n for n, key in enumerate(pos_g)}
        gates: dict[tuple[str, int, int], bool] = {}  # anchored() per pair, once per match

        def gate_of(t: str, i: int, j: int) -> bool:
            key = (t, i, j)
            verdict = gates.get(key)
            if verdict is None:
                verdict = gates[key] = anchored(P[t][i], G[t][j], ref)
            return verdict

        def sim_of(t: str, ip: list[int], u: str, jg: list[int]) -> np.ndarray:
            if not ip or not jg:
                return np.zeros((len(ip), len(jg)), dtype=np.float32)
            sim = full[np.ix_([row[(t, i)] for i in ip], [col[(u, j)] for j in jg])]
            if t == u and t != "o":
                # no credit for an attribute or relation anchored to another entity (Q6)
                gate = np.array([[gate_of(t, i, j) for j in jg] for i in ip], dtype=bool)
                sim = np.where(gate, sim, 0.0)
            return sim

    if sim_of is not None and opts.interactive:
        # cross-type: a remaining predicted element of type t against remaining references of t* != t.
        # An element links across types only where that beats its best same-type partner
        # (ours: otherwise interactive matching would take elements that soft matching
        # pairs better within their own type).
        same = {t: sim_of(t, left_p[t], t, left_g[t]) for t in TYPES}
        same_p = {t: same[t].max(axis=1) if same[t].size else np.zeros(len(left_p[t])) for t in TYPES}
        same_g = {t: same[t].max(axis=0) if same[t].size else np.zeros(len(left_g[t])) for t in TYPES}
        hit_p: dict[str, set[int]] = {t: set() for t in TYPES}
        hit_g: dict[str, set[int]] = {t: set() for t in TYPES}
        for t in TYPES:
            for u in TYPES:
                if t == u or not left_p[t] or not left_g[u]:
                    continue
                sim = sim_of(t, left_p[t], u, left_g[u])
                above = (sim > opts.lambda_) & (sim > same_p[t][:, None]) & (sim > same_g[u][None, :])
                hit_p[t].update(left_p[t][i] for i in np.nonzero(above.any(axis=1))[0])
                hit_g[u].update(left_g[u][j] for j in np.nonzero(above.any(axis=0))[0])
        for t in TYPES:
            counts[t].interactive_p = len(hit_p[t])
            counts[t].interactive_g = len(hit_g[t])
            left_p[t] = [i for i in left_p[t] if i not in hit_p[t]]
            left_g[t] = [j for j in left_g[t] if j not in hit_g[t]]
    if opts.extra_judge is not None:
        for t in TYPES:
            confirmed = []
            for i in left_p[t]:
                verdict = opts.extra_judge(verbalise(P[t][i]))
                if verdict is None:
                    opts.judge_failures.append(verbalise(P[t][i]))
                elif verdict:
                    confirmed.append(i)
            counts[t].extra_p = len(confirmed)
            left_p[t] = [i for i in left_p[t] if i not in confirmed]
    if sim_of is not None and opts.soft:
        for t in TYPES:
            if left_p[t] and left_g[t]:
                sim = np.clip(sim_of(t, left_p[t], t, left_g[t]), 0, 1)
                counts[t].soft_p = float(sim.max(axis=1).sum())
                counts[t].soft_g = float(sim.max(axis=0).sum())
    return counts


def scores(counts: dict[str, TypeCounts], weights: Sequence[float] = DEFAULT_WEIGHTS) -> dict[str, float | None]:
    out: dict[str, float | None] = {}
    for t in TYPES:
        p, r, f = counts[t].prf()
        out[f"P_{t}"], out[f"R_{t}"], out[f"F1_{t}"] = p, r, f
    # CESG score = w_o F1_o + w_a F1_a + w_r F1_r (paper, Implementation Details / Table 4)
    out["CESG"] = weighted([out[f"F1_{t}"] for t in TYPES], weights)
    return out
