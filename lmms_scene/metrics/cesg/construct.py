"""CESG construction: the paper's six stages, each a replaceable component.

I. Resolution (coref) -> II. Transformation (negation stripping) -> III. Split ->
IV. Parse (negative and affirmative sentences) -> V. Comparison -> VI. Combination.
(Paper, "CESG Construction Pipeline".) Stage III runs before stage II here so the
negative and affirmative sentences stay aligned one to one; the stripping never moves a
sentence boundary, so this is the same text the paper's order gives.

:class:`Pipeline` holds the components; :func:`default_pipeline` is the offline default
(rule coref, lexical stripping, Punkt, dependency-rule parser). ``Pipeline.build(text)``
is memoised per (pipeline, text), so a reference is built once per run however many
predictions meet it.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from lmms_scene import cache
from lmms_scene.metrics.cesg import parse
from lmms_scene.metrics.cesg.coref import _QUICK, FastCoref, RuleCoref, antecedents, render
from lmms_scene.metrics.cesg.graph import CESG, Attribute, Node, ParseFailure, Relation, SceneGraph, split_key
from lmms_scene.metrics.cesg.model_parsers import DiscoSGParser, FactualT5Parser
from lmms_scene.metrics.cesg.negation import PROVENANCE as NEG
from lmms_scene.metrics.cesg.negation import normalise_lists, strip_negation
from lmms_scene.metrics.cesg.parse import RuleParser
from lmms_scene.nlp.sentences import PROVENANCE as SPLIT
from lmms_scene.nlp.sentences import split_sentences

#: texts per construction batch (the parallel path shares these batches among processes)
BATCH_TEXTS = 128
#: the memo of sentence graphs read without coreference (per pipeline key and sentence)
SENTENCE_MEMO = "cesg.sentence"
#: below this many texts to build (or rows to match), "auto" stays in one process
PARALLEL_MIN = 200
#: the pipeline a forked child builds with (set by the parent just before forking)
_FORKED: Any = None


def compare(negative: SceneGraph, affirmative: SceneGraph) -> CESG:
    """Stage V: what the affirmative graph has and the factual (negative-sentence) graph
    lacks is absent (objects) or negated (attributes, relations); counted as multisets."""
    present = Counter(negative.objects)
    absent_counts = Counter(affirmative.objects) - present
    absent_nodes = tuple(
        Node(split_key(key)[0], True, split_key(key)[1]) for key, n in absent_counts.items() for _ in range(n)
    )

    def node(key: object) -> Node:
        # the paper's e^m marker: a dependent is absent when it is absent in this sentence
        name, qualifier = split_key(key)
        return Node(name, key in absent_counts and key not in present, qualifier)

    neg_attrs = Counter(affirmative.attributes) - Counter(negative.attributes)
    kept_attrs = Counter(negative.attributes)
    attributes = tuple(
        [Attribute(node(o), a, False) for (o, a), n in kept_attrs.items() for _ in range(n)]
        + [Attribute(node(o), a, True) for (o, a), n in neg_attrs.items() for _ in range(n)]
    )
    neg_rels = Counter(affirmative.relations) - Counter(negative.relations)
    kept_rels = Counter(negative.relations)
    relations = tuple(
        [Relation(node(s), p, node(o), False) for (s, p, o), n in kept_rels.items() for _ in range(n)]
        + [Relation(node(s), p, node(o), True) for (s, p, o), n in neg_rels.items() for _ in range(n)]
    )
    return CESG(
        present_nodes=tuple(node(key) for key in dict.fromkeys(negative.objects)),
        absent_objects=absent_nodes,
        attributes=attributes,
        relations=relations,
    )


def combine(sentence_graphs: Sequence[CESG], failures: Sequence[ParseFailure] = ()) -> CESG:
    """Stage VI: present objects merged when their descriptions are identical; absent
    information kept as is (never merged); present attributes/relations deduplicated."""
    present: dict[Node, None] = {}
    absent: list[Node] = []
    attrs: dict[Attribute, None] = {}
    neg_attrs: list[Attribute] = []
    rels: dict[Relation, None] = {}
    neg_rels: list[Relation] = []
    for g in sentence_graphs:
        present.update(dict.fromkeys(g.present_nodes))
        absent.extend(g.absent_objects)
        for a in g.attributes:
            (neg_attrs.append(a) if a.negated else attrs.setdefault(a, None))
        for r in g.relations:
            (neg_rels.append(r) if r.negated else rels.setdefault(r, None))
    return CESG(
        present_nodes=tuple(present),
        absent_objects=tuple(absent),
        attributes=(*attrs, *neg_attrs),
        relations=(*rels, *neg_rels),
        failures=tuple(failures),
    )


@dataclass
class Construction:
    """Every intermediate of one text's construction (for inspection and tests)."""

    text: str
    resolved: str
    negative_sentences: list[str]
    affirmative_sentences: list[str]
    sentence_graphs: list[CESG]
    cesg: CESG
    failures: list[ParseFailure] = field(default_factory=list)


@dataclass(frozen=True, eq=False)
class Pipeline:
    """The six stages' components (each replaceable), plus ``normalise``, run first:
    list-style model outputs become sentences (:func:`~lmms_scene.metrics.cesg.negation.normalise_lists`)."""

    coref: Any
    strip: Callable[[str], str]
    split: Callable[[str], list[str]]
    parser: Any
    normalise: Callable[[str], str] = normalise_lists

    @property
    def key(self) -> tuple:
        return (
            getattr(self.coref, "name", repr(self.coref)),
            getattr(self.strip, "__qualname__", ""),
            getattr(self.parser, "name", repr(self.parser)),
            id(self),
        )

    def provenance(self) -> dict[str, Any]:
        return {
            **(self.coref.provenance() if hasattr(self.coref, "provenance") else {"coref": repr(self.coref)}),
            **(NEG if self.strip.__module__.endswith("negation") else {"negation_stripping": repr(self.strip)}),
            **(SPLIT if self.split.__module__.endswith("sentences") else {"sentence_splitter": repr(self.split)}),
            **({} if self.normalise is normalise_lists else {"list_normalisation": repr(self.normalise)}),
            **self.parser.provenance(),
        }

    def construct(self, text: str) -> Construction:
        return self.construct_many([text])[0]

    def construct_many(self, texts: Sequence[str]) -> list[Construction]:
        """Every stage for several texts; coref and parsing run as one batch each (the
        sentences of all texts go to the parser together)."""
        originals = list(texts)
        texts = [self.normalise(t) for t in originals]
        fast = self._one_parse(texts)
        if fast is not None:
            for c, text in zip(fast, originals):
                c.text = text
            return fast
        failures: list[list[ParseFailure]] = [[] for _ in texts]
        resolved = self._resolve(texts, failures)
        negative = [self.split(r) for r in resolved]
        affirmative = [[self.strip(s) for s in sentences] for sentences in negative]
        flat_neg = [s for sentences in negative for s in sentences]
        flat_aff = [s for sentences in affirmative for s in sentences]
        try:
            flat = list(self.parser.parse_pairs(flat_neg, flat_aff))
        except Exception as exc:  # the batch failed as a whole: parse sentence by sentence
            flat = []
            for n, a in zip(flat_neg, flat_aff):
                try:
                    flat.extend(self.parser.parse_pairs([n], [a]))
                except Exception as one:
                    flat.append(one)
            del exc
        out, k = [], 0
        for i in range(len(texts)):
            graphs: list[CESG] = []
            for sentence in negative[i]:
                result = flat[k]
                k += 1
                if isinstance(result, Exception):
                    failures[i].append(ParseFailure("parse", sentence, f"{type(result).__name__}: {result}"))
                    continue
                graphs.append(compare(*result))
            out.append(
                Construction(
                    originals[i],
                    resolved[i],
                    negative[i],
                    affirmative[i],
                    graphs,
                    combine(graphs, failures[i]),
                    failures[i],
                )
            )
        return out

    def _one_parse(self, texts: list[str]) -> list[Construction] | None:
        """The default pipeline's shortcut: each sentence is parsed once. Rule coref runs on
        the sentence parses joined into one Doc and hands the parser its antecedents
        (a resolved pronoun is read as its antecedent's node), instead of re-parsing the
        resolved text; the resolved and affirmative texts are still produced for
        inspection. Only for RuleCoref + RuleParser with a shared spaCy pipeline."""
        if not (
            type(self.coref) is RuleCoref and type(self.parser) is RuleParser and self.coref.nlp is self.parser.nlp
        ):
            return None
        from spacy.tokens import Doc  # deferred: spaCy is heavy to import

        sentences = [self.split(t) for t in texts]
        quick = [_QUICK.search(t) is not None for t in texts]  # may hold a pronoun: coref reads its parse
        # a sentence read without coreference, once per run (a sentence's parse does not depend
        # on the batch it is parsed in): one already read is parsed again only for coref
        graph_of = cache.memo_namespace(SENTENCE_MEMO)
        needed = {s for ss, q in zip(sentences, quick) if q for s in ss}
        distinct = [  # model outputs repeat sentences: parse each once
            s for s in dict.fromkeys(s for ss in sentences for s in ss) if s in needed or (self.key, s) not in graph_of
        ]
        try:
            parsed = dict(zip(distinct, self.parser.nlp.pipe(distinct, batch_size=256)))
        except Exception:
            return None  # let the general path find the failing sentence
        out = []
        for text, ss, q in zip(texts, sentences, quick):
            parts = [parsed.get(s) for s in ss]
            failures: list[ParseFailure] = []
            if not parts:
                out.append(Construction(text, text, [], [], [], combine([], failures), failures))
                continue
            found: dict = {}
            joined = None
            if q:  # most captions have no pronoun: no coref work
                joined = Doc.from_docs(parts) if len(parts) > 1 else parts[0]
                try:
                    found = antecedents(joined)
                except Exception as exc:  # coref is an aid: a failure keeps the text as written
                    failures.append(ParseFailure("coref", text[:200], f"{type(exc).__name__}: {exc}"))
            if not found:
                joined = None
            negative, graphs, start = [], [], 0
            for sentence, part in zip(ss, parts):
                if found:
                    span = joined[start : start + len(part)]
                    start += len(part)
                negative.append(render(span, found).strip() if found else sentence)
                try:
                    if found:
                        graphs.append(compare(*parse.graphs_from_doc(span, found)))
                    else:
                        graph = graph_of.get((self.key, sentence))
                        if graph is None:
                            graph = compare(
                                *parse.graphs_from_doc(part if part is not None else self.parser.nlp(sentence))
                            )
                            graph_of.put((self.key, sentence), graph)
                        graphs.append(graph)
                except Exception as exc:
                    failures.append(ParseFailure("parse", sentence, f"{type(exc).__name__}: {exc}"))
            resolved = " ".join(negative) if found else text
            out.append(
                Construction(
                    text,
                    resolved,
                    negative,
                    [self.strip(s) for s in negative],
                    graphs,
                    combine(graphs, failures),
                    failures,
                )
            )
        return out

    def _resolve(self, texts: list[str], failures: list[list[ParseFailure]]) -> list[str]:
        many = getattr(self.coref, "resolve_many", None)
        if many is not None:
            try:
                return list(many(texts))
            except Exception:
                pass  # find the failing text one by one below
        out = []
        for i, text in enumerate(texts):
            try:
                out.append(self.coref.resolve(text))
            except Exception as exc:  # coref is an aid: a failure keeps the text as written
                failures[i].append(ParseFailure("coref", text[:200], f"{type(exc).__name__}: {exc}"))
                out.append(text)
        return out

    def build(self, text: str) -> CESG:
        """The scene-level CESG of ``text`` (memoised per pipeline and text)."""
        return self.build_many([text])[0]

    def build_many(self, texts: Sequence[str], batch_size: int = BATCH_TEXTS, workers: int | str = 1) -> list[CESG]:
        """The CESGs of ``texts``, building the ones not memoised yet in batches of
        ``batch_size`` texts. ``workers`` > 1 (or ``"auto"``): the batches are shared among
        that many processes (this one and forked children, see :func:`fork_map`), each
        batch built exactly as the single-process path builds it, so the graphs are the
        same; only the default offline pipeline is built this way (the model-based
        components stay in this process)."""
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"text[{i}]: expected a string, got {type(text).__name__}: {text!r}")
        memo = cache.memo_namespace("cesg.build")
        todo = list(dict.fromkeys(t for t in texts if (self.key, t) not in memo))
        batches = [todo[start : start + batch_size] for start in range(0, len(todo), batch_size)]
        n = fork_workers(workers, len(todo)) if self.forkable else 1
        if n > 1 and len(batches) > 1:
            global _FORKED
            _FORKED = self
            try:
                shares = [batches[i::n] for i in range(min(n, len(batches)))]
                for share, graphs in zip(shares, fork_map(_build_share, shares)):
                    for chunk, built in zip(share, graphs):
                        for text, g in zip(chunk, built):
                            memo.put((self.key, text), g)
            finally:
                _FORKED = None
        else:
            for chunk in batches:
                for text, c in zip(chunk, self.construct_many(chunk)):
                    memo.put((self.key, text), c.cesg)
        return [memo.get_or_compute((self.key, t), lambda t=t: self.construct(t).cesg) for t in texts]

    @property
    def forkable(self) -> bool:
        """Whether the build may run in forked processes: the rule components only (spaCy and
        WordNet, no torch model)."""
        return type(self.coref) is RuleCoref and type(self.parser) is RuleParser


def fork_workers(workers: int | str, n_items: int) -> int:
    """How many processes to use: ``workers`` as given (an int), or for ``"auto"`` the CPUs
    this process may use (at most 4) when there are at least :data:`PARALLEL_MIN` items, fork
    is available and no other non-daemon thread is running (a thread could hold a lock at
    the moment of the fork); else 1."""
    if isinstance(workers, bool) or not (isinstance(workers, int) or workers == "auto"):
        raise ValueError(f"workers: expected a positive number of processes or 'auto', got {workers!r}")
    if workers != "auto":
        if workers < 1:
            raise ValueError(f"workers: expected a positive number of processes or 'auto', got {workers!r}")
        return workers if "fork" in multiprocessing.get_all_start_methods() else 1
    if n_items < PARALLEL_MIN or "fork" not in multiprocessing.get_all_start_methods():
        return 1
    if threading.current_thread() is not threading.main_thread() or any(
        t is not threading.main_thread() and not t.daemon for t in threading.enumerate()
    ):
        return 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, 4))


def _after_fork() -> None:
    """In a forked child: its own WordNet file handles (the parent's are shared file
    offsets) and fresh locks (one held in the parent at the fork would never be released)."""
    from lmms_scene.nlp import wordnet as wn_module  # deferred: only a forked child needs it

    wn_module._lock = threading.Lock()
    reader = cache._values.get(("nlp", "wordnet"))
    if reader is not None:
        reader._data_file_map = {}
    cache._reset_locks_after_fork()


def fork_map(fn: Callable[[Any], Any], shares: Sequence[Any]) -> list[Any]:
    """``[fn(share) for share in shares]``: the first share in this process, each other in a
    forked child (at the same time); results in order. ``fn`` is a module-level function
    (its result travels back pickled)."""
    if len(shares) <= 1:
        return [fn(s) for s in shares]
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(len(shares) - 1, initializer=_after_fork) as pool:
        pending = [pool.apply_async(fn, (s,)) for s in shares[1:]]
        first = fn(shares[0])
        rest = [p.get() for p in pending]
    return [first, *rest]


def _build_share(share: list[list[str]]) -> list[list[CESG]]:
    pipe = _FORKED
    return [[c.cesg for c in pipe.construct_many(chunk)] for chunk in share]


def default_pipeline() -> Pipeline:
    """The offline default: rule coref, lexical stripping, Punkt, dependency rules."""

    def make() -> Pipeline:
        return Pipeline(RuleCoref(), strip_negation, split_sentences, RuleParser())

    return cache.cached(("cesg", "default_pipeline"), make)


PARSERS = ("rule", "factual", "discosg")


def pipeline(coref: str = "rule", parser: str = "rule", device: str | None = None) -> Pipeline:
    """A pipeline by component names: coref ``rule`` | ``lingmess``; parser ``rule`` |
    ``factual`` (the FACTUAL T5 parser) | ``discosg`` (DiscoSG-Refiner, the paper's).
    Loaded here, so a missing package or checkpoint fails now, saying how to get it."""
    if coref not in ("rule", "lingmess"):
        raise ValueError(f"coref: expected 'rule' or 'lingmess', got {coref!r}")
    if parser not in PARSERS:
        raise ValueError(f"parser: expected one of {PARSERS}, got {parser!r}")
    if coref == "rule" and parser == "rule":
        return default_pipeline()

    def make() -> Pipeline:
        c = RuleCoref() if coref == "rule" else FastCoref(device or "cpu")
        p = {"rule": RuleParser, "factual": FactualT5Parser, "discosg": DiscoSGParser}[parser]
        p = p() if parser == "rule" else p(device=device)
        return Pipeline(c, strip_negation, split_sentences, p)

    return cache.cached(("cesg", "pipeline", coref, parser, device), make)
