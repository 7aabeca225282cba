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

Conventions (ours, the paper leaves them open): a type empty on both sides scores 1
(nothing to find, nothing claimed); empty on one side only scores 0 for that type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

import numpy as np

from lmms_scene.metrics.cesg.graph import CESG, Attribute, Node, Relation

TYPES = ("o", "a", "r")
#: CESG = 0.5 F1_o + 0.25 F1_a + 0.25 F1_r (paper, Implementation Details)
DEFAULT_WEIGHTS = (0.5, 0.25, 0.25)
#: interactive-matching threshold lambda (the paper does not publish its value; ours for
#: MiniLM on verbalised elements, recorded with every score)
DEFAULT_LAMBDA = 0.6


def elements(g: CESG) -> dict[str, list[Any]]:
    return {"o": list(g.absent_objects), "a": list(g.negated_attributes), "r": list(g.negated_relations)}


def verbalise(e: Any) -> str:
    """S(x): the element as a short phrase for the sentence encoder."""
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


def word_synonyms(a: str, b: str, pos: str | None = None) -> bool:
    """Equal, WordNet synonyms as a whole, or word by word ("safety hat" ~ "hard hat" as a
    compound; "weld with" ~ "weld with")."""
    from lmms_scene.nlp.wordnet import synonyms

    if a == b or synonyms(a, b, pos):
        return True
    wa, wb = a.split(), b.split()
    return len(wa) == len(wb) > 1 and all(x == y or synonyms(x, y) for x, y in zip(wa, wb))


def synonym(x: Any, y: Any, verifier: Callable[[str, str], bool | None] | None = None) -> bool:
    if type(x) is not type(y):
        return False
    dx, dy = _deps(x), _deps(y)
    # F_dep: dependents of equal marker whose names are equal or synonyms
    if any(a.absent != b.absent or not word_synonyms(a.name, b.name, "n") for a, b in zip(dx, dy)):
        return False
    if word_synonyms(_word(x), _word(y), _pos(x)):
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

    def prf(self) -> tuple[float, float, float]:
        if self.n_pred == 0 and self.n_gt == 0:
            return 1.0, 1.0, 1.0
        p = (self.hard_p + self.synonym_p + self.interactive_p + self.extra_p + self.soft_p) / self.n_pred if self.n_pred else 0.0
        r = (self.hard_g + self.synonym_g + self.interactive_g + self.soft_g) / self.n_gt if self.n_gt else 0.0
        p, r = min(p, 1.0), min(r, 1.0)
        return p, r, (2 * p * r / (p + r) if p + r > 0 else 0.0)


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


def match(pred: CESG, gt: CESG, opts: Options) -> dict[str, TypeCounts]:
    P, G = elements(pred), elements(gt)
    counts = {t: TypeCounts(len(P[t]), len(G[t])) for t in TYPES}
    left_p = {t: list(range(len(P[t]))) for t in TYPES}
    left_g = {t: list(range(len(G[t]))) for t in TYPES}

    def level(test: Callable[[Any, Any], bool], attr: str) -> None:
        for t in TYPES:
            mp = [i for i in left_p[t] if any(test(P[t][i], y) for y in G[t])]
            mg = [j for j in left_g[t] if any(test(x, G[t][j]) for x in P[t])]
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
            if opts.use_synonyms and synonym(x, y, None):
                return True
            return verifier is not None and synonym(x, y, counted)

        level(syn, "synonym")
    enc = opts.encoder
    sim_of = None
    if enc is not None and (opts.interactive or opts.soft) and any(left_p[t] for t in TYPES) and any(left_g[t] for t in TYPES):
        # one encoder call per side; every similarity below is a slice of this matrix
        pos_p = [(t, i) for t in TYPES for i in left_p[t]]
        pos_g = [(t, j) for t in TYPES for j in left_g[t]]
        full = enc.similarity([verbalise(P[t][i]) for t, i in pos_p], [verbalise(G[t][j]) for t, j in pos_g])
        row = {key: n for n, key in enumerate(pos_p)}
        col = {key: n for n, key in enumerate(pos_g)}

        def sim_of(t: str, ip: list[int], u: str, jg: list[int]) -> np.ndarray:
            if not ip or not jg:
                return np.zeros((len(ip), len(jg)), dtype=np.float32)
            return full[np.ix_([row[(t, i)] for i in ip], [col[(u, j)] for j in jg])]

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


def scores(counts: dict[str, TypeCounts], weights: Sequence[float] = DEFAULT_WEIGHTS) -> dict[str, float]:
    out: dict[str, float] = {}
    for t in TYPES:
        p, r, f = counts[t].prf()
        out[f"P_{t}"], out[f"R_{t}"], out[f"F1_{t}"] = p, r, f
    w_o, w_a, w_r = weights
    # CESG score = w_o F1_o + w_a F1_a + w_r F1_r (paper, Implementation Details / Table 4)
    out["CESG"] = (w_o * out["F1_o"] + w_a * out["F1_a"] + w_r * out["F1_r"]) / (w_o + w_a + w_r)
    return out
