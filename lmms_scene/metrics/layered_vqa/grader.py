"""Layered-VQA's rule grader: typed answer extraction, read the way a careful person reads.
The readers it uses (tokens, mentions of each kind, negation and options in context,
yes/no, option letters, refusals) are the shared :mod:`lmms_scene.metrics.answers`; this
module decides the verdict against the gold (:func:`_verdict`).

A reply is graded against the gold answer by the *kind* of answer the gold is (inferred
from the gold and the question type, :func:`answer_kind`): ``yes/no``, ``count`` (one
number, or several groups: "Two circles and one square"), ``relation`` (left / right /
above / below / behind / in front), ``colour``, ``shape`` or ``object`` (a noun phrase:
"The red circle.", "A teddy bear."). For that kind the grader finds every *mention* in
the reply and reads each one in its context:

* **layer numbers are not answers**: "layer 4", "layers 2 and 3", "[layer 1 of the
  scene]", "L2", a ``Layers: 1, 2`` selection line are removed before anything is read;
* **negation**: "not yellow", "It is not a triangle; it is a circle.", "Not two, there
  are three.", "rather than X", "instead of X" deny what follows (to the next clause);
* **options are not answers**: mentions joined by "or" ("it could be a circle, a square
  or a triangle"), or in a question back, are listed, not chosen;
* **restating the question**: a value the question itself names ("the red object" in
  "What colour is the other object with the same shape as the red object?") counts only
  when nothing else is said;
* **descriptions of other objects**: in "What shape is the red object?", the square of
  "a blue square" belongs to another object; in "What colour is the large triangle?",
  the colour of "the small triangle" or "a red circle" does too;
* **synonyms**: above / over / on top of; circle / round / circular; teddy bear / teddy /
  stuffed bear; WordNet noun synonyms for other objects (when installed);
* when several different answers remain, an explicit one ("the answer is", "so",
  "in total", an "Answer:" line) or the clause that restates the question decides;
  otherwise the reply has not committed;
* **the answer the reply commits to** (issue 29, measured on real VLM replies by
  ``bench/bench_real_replies.py``): for a yes/no question a stated final answer ("So the
  answer is (B), No.") decides, then an opening yes/no, then a refusal (``cannot_tell``),
  then the clause that restates the question, read with the negation that binds to the
  question's words and with comparisons or states said the other way ("the same size"
  to "larger?"); a statement that restates nothing is ``cannot_tell``. A chat echo
  ("User: ... Assistant: Yes.") is read after the last "Assistant:", a model's special
  tokens ("<s>") are dropped, and an option letter ("(B) no", "B") is read by the options
  the question lists ("(A) yes (B) no"). "The answer is (D)
  buns" names the answer and "the other choices are ..." lists options. A word that is a
  colour and an object ("orange") is a colour only when the question asks for one.

The verdict is ``correct``, ``wrong`` or ``cannot_tell`` (the reply gives no answer of
the asked kind: a refusal, options without a choice, only other answers ruled out,
several answers). ``cannot_tell`` is its own outcome, counted in every report
(``cannot_tell_rate``); for accuracy it is not a right answer.

>>> grade("Layer 4 and layer 2 each show a square, so there are two squares.", "Two.", "counting").verdict
'correct'
>>> grade("It is not a triangle; it is a circle.", "A triangle.", "direct ask").verdict
'wrong'
>>> grade("It could be a circle, a square or a triangle.", "A circle.", "direct ask").verdict
'cannot_tell'
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from lmms_scene.metrics.answer_words import (
    ARTICLES,
    COLOUR_WORDS,
    NEGATORS,
    NUMBER_WORDS,
    OBJECT_SYNONYMS,
    OPPOSITE,
    SENTENCE_BREAK,
    SHAPE_WORDS,
    SIZE_WORDS,
    STOPWORDS,
)
from lmms_scene.metrics.answers import (
    REFUSAL,
    SPECIAL_TOKENS,
    Mention,
    after_transcript,
    clauses,
    colour_mentions,
    mark_context,
    number_mentions,
    object_mentions,
    read_yes_no,
    relation_mentions,
    shape_mentions,
    singular,
    stated_answer_span,
    tokens,
    word_tokens,
)
from lmms_scene.metrics.outputs import MAX_OUTPUT_CHARS

CORRECT, WRONG, CANNOT_TELL = "correct", "wrong", "cannot_tell"

VERDICTS = (CORRECT, WRONG, CANNOT_TELL)

KINDS = ("yes/no", "count", "relation", "colour", "shape", "object")


def answer_kind(gold: str, question_type: str | None = None, question: str | None = None) -> str:
    """The kind of answer ``gold`` is (see :data:`KINDS`). A word that is both a colour and
    an object ("orange", "lime") is a colour only when the question asks for one: "The
    right of the plums is oranges." answers "What is to the right of the plums?"."""
    words = word_tokens(gold)
    if words and words[0] in ("yes", "no"):
        return "yes/no"
    if (
        question_type == "counting"
        or (words and (words[0] in NUMBER_WORDS or words[0].isdigit()))
        or (
            words[:2] in (["there", "are"], ["there", "is"])
            and len(words) > 2
            and (words[2] in NUMBER_WORDS or words[2].isdigit())
        )
    ):
        return "count"
    if question_type in (None, "spatial") and relation_mentions(words):
        return "relation"
    content = [w for w in words if w not in STOPWORDS]
    if content and all(w in COLOUR_WORDS for w in content):
        asks_colour = question is None or "color" in tokens(question)
        if asks_colour and not (words[0] in ("a", "an") and question is not None):
            return "colour"
        return "object"
    if len(content) == 1 and content[0] in SHAPE_WORDS:
        return "shape"
    return "object"


@dataclass(frozen=True)
class Grade:
    """The grader's verdict on one reply: ``verdict`` (correct / wrong / cannot_tell),
    the ``reason`` in words, the answer ``kind`` and what it read as the reply's answer."""

    verdict: str
    reason: str
    kind: str = ""
    answer: Any = None

    @property
    def correct(self) -> bool:
        """For accuracy: only a correct verdict is a right answer."""
        return self.verdict == CORRECT

    @property
    def cannot_tell(self) -> bool:
        return self.verdict == CANNOT_TELL

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "reason": self.reason, "kind": self.kind, "answer": self.answer}


def _choose(toks, mentions: list[Mention], question_toks: set[str], q_tokens: Sequence[str]) -> tuple[Any, str] | None:
    """The value the reply commits to, or None with why (several / none)."""
    affirmed = [m for m in mentions if m.affirmed]
    if not affirmed:
        return None
    # a value the question names counts only when nothing else is said
    fresh = [m for m in affirmed if not m.in_question]
    pool = fresh or affirmed
    values = {m.value for m in pool}
    if len(values) == 1:
        return pool[0].value, "one answer"
    marked = [m for m in pool if m.marked]
    if marked and len({m.value for m in marked}) == 1:
        return marked[-1].value, "the stated answer"
    if marked:
        last = max(m.clause for m in marked)
        in_last = [m for m in marked if m.clause == last]
        if len({m.value for m in in_last}) == 1:
            return in_last[0].value, "the last stated answer"
    if question_toks:
        # the clause that restates the question most holds the answer
        clause_of = clauses(toks)
        content_q = {t for t in question_toks if t not in STOPWORDS and t not in SENTENCE_BREAK}
        by_clause: dict[int, list[Mention]] = {}
        for m in pool:
            by_clause.setdefault(m.clause, []).append(m)
        overlaps = []
        for c, ms in by_clause.items():
            words = {t for t, k in zip(toks, clause_of) if k == c} - {w for m in ms for w in m.words}
            overlaps.append((len(words & content_q), c))
        overlaps.sort(reverse=True)
        if overlaps and overlaps[0][0] > 0 and (len(overlaps) == 1 or overlaps[0][0] > overlaps[1][0]):
            best = by_clause[overlaps[0][1]]
            if len({m.value for m in best}) == 1:
                return best[0].value, "the clause that restates the question"
    return None


def _no_answer_reason(mentions: list[Mention], text: str, kind: str) -> str:
    if any(m.option and not m.negated and not m.in_question for m in mentions):
        return "lists options without choosing one"
    if REFUSAL.search(text):
        return "says it cannot tell"
    if any(m.negated for m in mentions):
        return "only rules answers out"
    if any(m.other_object for m in mentions):
        return f"names only other objects' {kind}"
    return f"no {kind} in the reply"


def _bigrams(toks: Sequence[str]) -> set[tuple[str, str]]:
    words = [t for t in toks if t not in ARTICLES]
    return set(zip(words, words[1:]))


def _in_question(mentions: list[Mention], q_values: set, toks: Sequence[str] = (), qtoks: Sequence[str] = ()) -> None:
    """Mark mentions of values the question names. A mention said in the question's own
    words (with a neighbour word, as in "the yellow object") restates it and is no answer
    at all (``option``); a bare mention of such a value ("Red.") is an answer only when
    nothing else is said (``in_question``)."""
    q_pairs = _bigrams(qtoks)
    for m in mentions:
        if m.value not in q_values:
            continue
        m.in_question = True
        if not q_pairs or m.marked:  # "The answer is (D) buns": the chosen option, not the question restated
            continue
        prev = next((t for t in reversed(toks[: m.start]) if t not in ARTICLES), None)
        nxt = next((t for t in toks[m.end :] if t not in ARTICLES), None)
        first, last = toks[m.start], toks[m.end - 1]
        if (prev, first) in q_pairs or (last, nxt) in q_pairs:
            if not _bare(toks, m):
                m.option = True  # restates the question: neither for nor against


def _bare(toks: Sequence[str], m: Mention) -> bool:
    """Whether the mention (with its modifiers) is the whole sentence it stands in ("The
    green square."): then it is the reply's answer, even if the question names it."""
    s = m.start
    while s > 0 and toks[s - 1] not in SENTENCE_BREAK:
        s -= 1
    e = m.end
    while e < len(toks) and toks[e] not in SENTENCE_BREAK:
        e += 1
    rest = [t for t in toks[s : m.start] + toks[m.end : e] if t not in ARTICLES and t != ","]
    return all(t in COLOUR_WORDS or t in SIZE_WORDS or t in ("it", "is", "it's") for t in rest)


def _target_descriptors(question: str | None) -> tuple[set[str], set[str], set[str]]:
    """(colours, shapes, sizes) the question names its target by (before any reference
    phrase such as "relative to", "behind", "as the")."""
    if not question:
        return set(), set(), set()
    toks = tokens(question)
    cut = len(toks)
    for k, t in enumerate(toks):
        if t in ("as", "than", "behind", "relative", "next", "near", "beside", "of") and k > 2:
            cut = k
            break
    head = toks[:cut]
    return (
        {COLOUR_WORDS[t] for t in head if t in COLOUR_WORDS},
        {SHAPE_WORDS[t] for t in head if t in SHAPE_WORDS},
        {SIZE_WORDS[t] for t in head if t in SIZE_WORDS},
    )


def _bound_descriptors(toks: Sequence[str], m: Mention) -> tuple[set[str], set[str], set[str]]:
    """(colours, shapes, sizes) describing the object a mention belongs to: the words just
    before it ("a blue square"), just after it ("red circle") and, for "X is <mention>",
    the subject X of its clause."""
    clause = clauses(toks)
    near = [t for t in toks[max(0, m.start - 3) : m.start] if clause[m.start] == clause[min(len(toks) - 1, m.start)]]
    # stop at a verb or a determiner boundary going back
    pre: list[str] = []
    for t in reversed(near):
        if t in SENTENCE_BREAK or t in (",", "is", "are", "of", "and", "or") or t in NEGATORS:
            break
        pre.insert(0, t)
    post = []
    for t in toks[m.end : m.end + 2]:
        if t in SHAPE_WORDS or t in SIZE_WORDS or t in ("object", "one", "shape", "thing"):
            post.append(t)
        else:
            break
    subject: list[str] = []
    j = m.start - 1
    while j >= 0 and (
        toks[j] in ARTICLES
        or toks[j] in ("probably", "likely", "definitely", "clearly", "also", "to", "be", "colored", "shaped")
    ):
        j -= 1
    if j >= 0 and toks[j] in ("is", "are", "looks", "appears", "seems", "'s") and clause[j] == clause[m.start]:
        k = j - 1
        while (
            k >= 0
            and clause[k] == clause[j]
            and toks[k] not in SENTENCE_BREAK
            and toks[k] not in ("and", "is", "are", "while", "whereas")
        ):
            subject.insert(0, toks[k])
            k -= 1
    words = pre + post + subject
    return (
        {COLOUR_WORDS[t] for t in words if t in COLOUR_WORDS},
        {SHAPE_WORDS[t] for t in words if t in SHAPE_WORDS},
        {SIZE_WORDS[t] for t in words if t in SIZE_WORDS},
    )


def _other_objects(toks, mentions: list[Mention], question: str | None, kind: str) -> None:
    """Mark mentions that describe an object other than the question's target."""
    t_colours, t_shapes, t_sizes = _target_descriptors(question)
    for m in mentions:
        colours, shapes, sizes = _bound_descriptors(toks, m)
        if kind == "shape":
            colours.discard(None)
            if t_colours and colours and not colours & t_colours:
                m.other_object = True
        elif kind == "colour":
            if (t_shapes and shapes and not shapes & t_shapes) or (t_sizes and sizes and not sizes & t_sizes):
                m.other_object = True


def _head_phrases(gold: str, lemma_names: Callable[[str], set[str]] | None) -> tuple[str, dict[str, str], str | None]:
    """The gold object's name (its last content word, or a known two-word name), the
    reply phrases that name it, and its colour (or None)."""
    words = [w for w in word_tokens(gold) if w not in ARTICLES]
    content = [w for w in words if w not in STOPWORDS and not w.isdigit() and w not in NUMBER_WORDS]
    colour = next((COLOUR_WORDS[w] for w in content if w in COLOUR_WORDS), None)
    nouns = [w for w in content if w not in COLOUR_WORDS and w not in SIZE_WORDS]
    if not nouns and colour is not None and len(content) == 1:
        nouns, colour = content, None  # "An orange." to "What is right of the plums?": the fruit
    if not nouns:
        return "", {}, colour
    head = singular(nouns[-1])
    two = " ".join([singular(w) for w in nouns[-2:]]) if len(nouns) >= 2 else None
    name = two if two in OBJECT_SYNONYMS else head
    if name in SHAPE_WORDS.values():
        phrases = {w: SHAPE_WORDS[w] for w in SHAPE_WORDS}  # every shape: the others are other objects
        return name, phrases, colour
    phrases = {name: name, head: name}
    if two:
        phrases[two] = name
    for syn in OBJECT_SYNONYMS.get(name, ()):
        phrases[syn] = name
    if lemma_names is not None:
        for word in {head, two} - {None}:
            try:
                for syn in lemma_names(word):  # type: ignore[arg-type]
                    syn = syn.lower().replace("_", " ").replace("-", " ")
                    if syn and syn not in STOPWORDS:
                        phrases[syn] = name
            except Exception:  # an unknown word has no synonyms; the word itself still counts
                pass
    return name, phrases, colour


def grade(
    prediction: Any,
    answer: str,
    question_type: str | None = None,
    question: str | None = None,
    lemma_names: Callable[[str], set[str]] | None = None,
) -> Grade:
    """Grade ``prediction`` against the gold ``answer`` (see the module docstring).

    >>> grade("2 circles and 1 square", "Two circles and one square.", "counting").verdict
    'correct'
    >>> grade("Not two, there are three.", "Two.", "counting").verdict
    'wrong'
    """
    if not isinstance(prediction, str) or not prediction.strip():
        return Grade(WRONG, "empty", answer_kind(answer, question_type, question))
    # the one cap on a model output (metrics/outputs.py); grading time grows faster than the length
    prediction = prediction[:MAX_OUTPUT_CHARS]
    prediction = SPECIAL_TOKENS.sub(" ", after_transcript(prediction)).strip()
    kind = answer_kind(answer, question_type, question)
    toks = tokens(prediction)
    if not [t for t in toks if t not in SENTENCE_BREAK and t != "," and t != "layerref"]:
        if any(ch.isalpha() for ch in prediction):  # "はい": words the grader cannot read, not an empty reply
            return Grade(CANNOT_TELL, "no words the grader reads (not English)", kind)
        return Grade(WRONG, "empty", kind)
    text = " ".join(toks)
    qtoks = tokens(question) if question else []
    qset = set(qtoks)
    fn = {
        "yes/no": _grade_yes_no,
        "count": _grade_count,
        "relation": _grade_relation,
        "colour": _grade_attribute,
        "shape": _grade_attribute,
        "object": _grade_object,
    }[kind]
    if kind == "yes/no":
        return _grade_yes_no(toks, text, answer, question, qtoks, qset, kind, lemma_names, raw=prediction)
    return fn(toks, text, answer, question, qtoks, qset, kind, lemma_names)


def _verdict(kind, toks, text, mentions, gold_value, equal, qset, qtoks) -> Grade:
    """The verdict on a reply from its mentions of one ``kind`` of answer (already read in
    context by :func:`~lmms_scene.metrics.answers.mark_context` and the grader's own
    marks: restating the question, other objects), against ``gold_value`` compared with
    ``equal``.

    The value the reply commits to is chosen first (:func:`_choose`: one affirmed value,
    else the stated answer, else the clause restating the question, whose tokens are
    ``qset`` / ``qtoks``). With one chosen: ``correct`` when it equals the gold, unless the
    reply also denies the gold (``cannot_tell``), else ``wrong``. With none chosen:
    ``wrong`` when the reply only denies the gold ("not two") or only answers about
    another object, ``cannot_tell`` when it affirms several values, or gives none (the
    reason says which: options listed, a refusal in ``text``, only answers ruled out,
    nothing of the kind). Each per-kind grader (``_grade_attribute`` ...) ends here unless
    its kind decides earlier."""
    chosen = _choose(toks, mentions, qset, qtoks)
    denied_gold = any(m.negated and equal(m.value, gold_value) for m in mentions)
    if chosen is None:
        affirmed = [m for m in mentions if m.affirmed]
        if denied_gold and not any(equal(m.value, gold_value) for m in affirmed):
            return Grade(WRONG, f"denies the gold {kind}", kind)
        if affirmed:
            return Grade(
                CANNOT_TELL, f"several {kind}s without one chosen", kind, sorted({str(m.value) for m in affirmed})
            )
        others = [m for m in mentions if m.other_object and not (m.negated or m.option)]
        if others and not REFUSAL.search(text):
            return Grade(WRONG, f"answers about another object ({kind} {others[0].value})", kind, others[0].value)
        return Grade(CANNOT_TELL, _no_answer_reason(mentions, text, kind), kind)
    value, how = chosen
    if equal(value, gold_value):
        if denied_gold:
            return Grade(CANNOT_TELL, f"both states and denies the gold {kind}", kind, value)
        return Grade(CORRECT, f"{kind}: {how}", kind, value)
    return Grade(WRONG, f"{kind}: {how} is not the gold one", kind, value)


def _grade_attribute(toks, text, answer, question, qtoks, qset, kind, lemma_names) -> Grade:
    """A colour or a shape: one word of a closed vocabulary."""
    vocabulary, find = (COLOUR_WORDS, colour_mentions) if kind == "colour" else (SHAPE_WORDS, shape_mentions)
    gold = next(vocabulary[w] for w in word_tokens(answer) if w in vocabulary)
    mentions = find(toks)
    mark_context(toks, mentions)
    _other_objects(toks, mentions, question, kind)
    _in_question(mentions, {vocabulary[t] for t in qset if t in vocabulary}, toks, qtoks)
    return _verdict(kind, toks, text, mentions, gold, lambda a, b: a == b, qset, qtoks)


def _grade_yes_no(toks, text, answer, question, qtoks, qset, kind, lemma_names, raw: str = "") -> Grade:
    gold = word_tokens(answer)[0] == "yes"
    said, how = read_yes_no(toks, text, raw, question, qtoks)
    if said is None:
        return Grade(CANNOT_TELL, how, kind)
    return Grade(CORRECT if said == gold else WRONG, f"yes/no: {how}", kind, "yes" if said else "no")


def _grade_relation(toks, text, answer, question, qtoks, qset, kind, lemma_names) -> Grade:
    gtoks = word_tokens(answer)
    grels = relation_mentions(gtoks)
    gold = grels[0].value
    ref = {t for t in gtoks[grels[0].end :] if t not in STOPWORDS}
    mentions = relation_mentions(toks)
    mark_context(toks, mentions)
    clause = clauses(toks)
    for m in mentions:
        # "the blue triangle is to the right of the red circle": the reference object said
        # first, so the relation is the other way round
        before = {t for t, c in zip(toks[: m.start], clause[: m.start]) if c == m.clause and t not in STOPWORDS}
        after = {t for t, c in zip(toks[m.end :], clause[m.end :]) if c == m.clause and t not in STOPWORDS}
        if ref and ref <= before and not ref <= after and m.value in OPPOSITE:
            m.value = OPPOSITE[m.value]
    # a relation the reply contradicts itself on: "left, not right" is fine; both affirmed is not
    affirmed = {m.value for m in mentions if m.affirmed}
    if gold in affirmed and OPPOSITE.get(gold) in affirmed:
        return Grade(CANNOT_TELL, "states both the relation and its opposite", kind, sorted(affirmed))
    if gold in affirmed and not any(m.negated and m.value == gold for m in mentions):
        return Grade(CORRECT, "relation: the gold one, no opposite", kind, gold)
    return _verdict(kind, toks, text, mentions, gold, lambda a, b: a == b, set(), [])


def _grade_object(toks, text, answer, question, qtoks, qset, kind, lemma_names) -> Grade:
    name, phrases, colour = _head_phrases(answer, lemma_names)
    if not name:
        ok = " ".join(word_tokens(answer)) in text
        return Grade(CORRECT if ok else WRONG, "exact", kind)
    mentions = object_mentions(toks, phrases)
    mark_context(toks, mentions)
    shapes = name in SHAPE_WORDS.values()
    q_values = set()
    if question:
        q_values = {m.value for m in object_mentions(tokens(question), phrases)}
    _in_question(mentions, q_values, toks, qtoks)

    def equal(value, gold):
        c, obj = value
        return obj == gold[1] and (gold[0] is None or c == gold[0])

    gold = (colour, name)
    stated = stated_answer_span(toks)
    if stated is not None and not shapes:
        s0, s1 = stated
        in_span = [m for m in mentions if s0 <= m.start < s1 and not m.negated]
        rest = [t for t in toks[s0:s1] if t not in STOPWORDS and t not in SENTENCE_BREAK and t != "," and len(t) > 1]
        hedged = any(t in NEGATORS or t.endswith("n't") for t in toks[s0:s1]) or REFUSAL.search(" ".join(toks[s0:s1]))
        if (
            not in_span
            and rest
            and not hedged
            and not any(m.option or m.negated for m in mentions if s0 <= m.start < s1)
        ):
            return Grade(
                WRONG, f"the stated answer names another object than the gold {name}", kind, " ".join(rest[:4])
            )
    # the right object without the colour that tells it apart is not enough to tell
    if colour is not None:
        bare = [m for m in mentions if m.affirmed and m.value[1] == name and m.value[0] is None and not m.in_question]
        full = [m for m in mentions if m.affirmed and equal(m.value, gold)]
        if (
            bare
            and not full
            and not [m for m in mentions if m.affirmed and m.value[0] is not None and not m.in_question]
        ):
            return Grade(CANNOT_TELL, f"names a {name} without its colour", kind, name)
        for m in mentions:
            if m.value[0] is None and m.value[1] == name:
                m.option = True  # neither for nor against
    g = _verdict(kind, toks, text, mentions, gold, equal, qset, qtoks)
    if (
        g.verdict == CANNOT_TELL
        and re.search(r"\b(nothing|none|no object|no objects|no thing)\b", text)
        and not REFUSAL.search(text)
    ):
        return Grade(WRONG, "says there is no such object", kind)
    if g.verdict == CANNOT_TELL and not shapes and g.reason.startswith("no "):
        # free vocabulary: a reply that names something, refuses nothing and lists no
        # options answers with another object
        if not REFUSAL.search(text) and not any(m.option for m in mentions):
            return Grade(WRONG, f"names another object than the gold {name}", kind)
    return g


def _grade_count(toks, text, answer, question, qtoks, qset, kind, lemma_names) -> Grade:
    gold = [m for m in number_mentions(word_tokens(answer))]
    if not gold:
        return Grade(CANNOT_TELL, "the gold answer has no count", kind)
    mentions = number_mentions(toks)
    mark_context(toks, mentions)
    q_numbers = {m.value for m in number_mentions(qtoks)} if qtoks else set()
    _in_question(mentions, q_numbers)
    generic = {"object", "thing", "shape", "item", "total", ""}
    if len(gold) == 1:
        target = gold[0].words[-1] if gold[0].words[-1] not in generic else None
        q_nouns = {singular(SHAPE_WORDS.get(t, t)) for t in qtoks} if qtoks else set()
        affirmed = [m for m in mentions if m.affirmed]
        tied = [
            m
            for m in affirmed
            if m.words[-1] and (m.words[-1] == target or m.words[-1] in q_nouns) and m.words[-1] not in generic
        ]
        # an explicit total ("so there are two", "five in all") wins; then, as in "one in
        # layer 1, one in layer 2, three circles", the count tied to the counted noun
        marked = [m for m in affirmed if m.marked and (m in tied or not m.words[-1] or m.words[-1] in generic)]
        pool = marked if marked and len({m.value for m in marked}) == 1 else (tied or affirmed)
        plural = [m for m in pool if m.value != 1]
        if (
            tied
            and len({m.value for m in tied}) > 1
            and plural
            and len({m.value for m in plural}) == 1
            and any(m.value == 1 for m in tied)
        ):
            pool = plural
        for_choice = pool if pool else mentions
        chosen = _choose(toks, [m for m in for_choice], qset, qtoks) if for_choice else None
        if chosen is None and tied:
            chosen = _choose(toks, tied, set(), [])
        if chosen is None:
            return _verdict(kind, toks, text, mentions, gold[0].value, lambda a, b: a == b, qset, qtoks)
        value, how = chosen
        denied = any(m.negated and m.value == gold[0].value for m in mentions)
        if value == gold[0].value and not denied:
            return Grade(CORRECT, f"count: {how}", kind, value)
        if value == gold[0].value:
            return Grade(CANNOT_TELL, "both states and denies the gold count", kind, value)
        return Grade(WRONG, f"count: {how} is not the gold one", kind, value)
    # several groups ("Two circles and one square"): each bound to its noun when the reply
    # names the nouns, else in the gold's order
    nouns = [m.words[-1] for m in gold]
    affirmed = [m for m in mentions if m.affirmed and not m.in_question]
    if not affirmed:
        return Grade(CANNOT_TELL, _no_answer_reason(mentions, text, "count"), kind)
    said: list[Any] = []
    if len(set(nouns)) == len(nouns) and all(n not in generic for n in nouns):
        for m in affirmed:  # "the circles number two", "circles: 2": the noun before the count
            if not m.words[-1] or m.words[-1] not in nouns:
                before = [singular(t) for t in toks[max(0, m.start - 3) : m.start]]
                hit = [n for n in nouns if n in before]
                if hit:
                    m.words = (*m.words[:-1], hit[-1])
        for noun in nouns:
            values = {m.value for m in affirmed if m.words[-1] == noun}
            said.append(values.pop() if len(values) == 1 else (None if not values else "several"))
        if "several" in said:
            return Grade(CANNOT_TELL, "several counts for one group", kind, said)
        if None in said:
            loose = [m.value for m in affirmed if m.words[-1] in generic or m.words[-1] not in nouns]
            if said.count(None) == len(said) and len(loose) >= len(gold):
                said = loose[: len(gold)]
            elif None in said:
                return Grade(WRONG, "a group without its count", kind, said)
    else:
        groups = _group_clauses(answer)
        said = _counts_by_description(toks, affirmed, groups) or [m.value for m in affirmed][: len(gold)]
        if len(said) < len(gold):
            return Grade(WRONG, "a group without its count", kind, said)
    ok = all(s == g.value for s, g in zip(said, gold))
    return Grade(CORRECT if ok else WRONG, "counts per group", kind, said)


_FRONT = {"front", "frontward", "frontwards", "forward", "forwards", "toward", "towards", "camera", "facing"}

_BACK = {"back", "backward", "backwards", "away", "behind", "turned"}


def _group_clauses(answer: str) -> list[set[str]]:
    out = []
    for part in re.split(r",| and ", answer.lower()):
        toks = tokens(part)
        if any(w in NUMBER_WORDS or w.isdigit() for w in toks):
            out.append({t for t in toks if t not in STOPWORDS})
    return out


def _counts_by_description(toks, affirmed: list[Mention], groups: list[set[str]]) -> list[Any] | None:
    """Counts of groups that share a noun ("two dogs face frontward, one faces backward"),
    bound by the words describing each group (front / back folded)."""
    if not groups:
        return None

    def fold(words):
        return {("FRONT" if w in _FRONT - {"facing"} else "BACK" if w in _BACK else w) for w in words}

    # each count's own words: from it to the next count (or the end of its sentence)
    segments = []
    for k, m in enumerate(affirmed):
        end = affirmed[k + 1].start if k + 1 < len(affirmed) else len(toks)
        seg = []
        for t in toks[m.start : end]:
            if t in SENTENCE_BREAK:
                break
            seg.append(t)
        segments.append(fold(seg))
    out = []
    for g in groups:
        gw = fold(g) & {"FRONT", "BACK"} or fold(g)
        scores = [len(seg & gw) for seg in segments]
        if not scores or max(scores) == 0 or scores.count(max(scores)) > 1:
            return None
        out.append(affirmed[scores.index(max(scores))].value)
    return out


__all__ = ["CANNOT_TELL", "CORRECT", "KINDS", "VERDICTS", "WRONG", "Grade", "answer_kind", "grade", "tokens"]
