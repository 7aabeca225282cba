"""Layered-VQA's per-row scoring: answer grading, evidence selection, grounding, one scored row.

Aggregation is :mod:`~lmms_scene.metrics.layered_vqa.aggregation`, the LLM-judge path
:mod:`~lmms_scene.metrics.layered_vqa.judging`, the tables
:mod:`~lmms_scene.metrics.layered_vqa.tables`.

One scored *row* per (scene, question, schedule, repeat) holds everything (ids, every
turn's output, the grade, the evidence selection, the grounding); every number below is
an aggregation of rows through :mod:`lmms_scene.metrics.rows`, with a 95% percentile
bootstrap interval resampled over **scenes** (``cluster="scene_id"``).

Grading (``grader`` in every row and report):

* ``rule`` (the offline default, :func:`grade`): normalisation (case, punctuation,
  articles), number words as numbers, count answers (one or two groups: "Two circles
  and one square" needs both counts, bound to their nouns when the reply names them, in
  order otherwise), relation answers (the gold relation, no opposite one), colour
  answers (the gold colour, no other colour), else containment of the gold head noun
  or one of its WordNet synonyms (:func:`lmms_scene.nlp.wordnet.lemma_names`).
* ``llm_judge_majority`` (:func:`judge_rows`): several judges through
  :mod:`lmms_scene.judges`, majority vote, a judge never grading its own model, failed
  or unparsable judgements left out and counted.

Metrics (definitions in ``docs/layered_vqa.md``): final-turn ``accuracy``; retained
accuracy (schedule over ``full``); evidence selection precision/recall/F1/exact match
and the error modes complete / excess / distractor / invalid; joint accuracy; the first
answer attempt (position bin, commit), the ungrounded share and grounded-only accuracy;
accuracy by question type, evidence length, scene depth; relational extra loss.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from lmms_scene.data import recheck
from lmms_scene.data.layered_vqa.delivery import SCHEDULES, SELECTION, SINGLE_TURN
from lmms_scene.data.layered_vqa.schema import RELATIONAL_TYPES, depth, is_relational, n_layers
from lmms_scene.metrics.layered_vqa.grader import CANNOT_TELL, Grade, grade  # the rule grader
from lmms_scene.metrics.outputs import clean_output, shown
from lmms_scene.nlp.wordnet import lemma_names, wordnet
from lmms_scene.provenance import scorer

SELECTION_RE = re.compile(r"layers?\s*[:=]\s*([^\n]*)", re.IGNORECASE)
#: acknowledgments a reply may open with before its answer ("Got it. The object is a triangle.")
_ACK = re.compile(
    r"^\s*(?:ok(?:ay)?|sure|got it|understood|alright|all right|great|thanks|thank you|noted|i see|certainly|of course)\b[\s,.!:;-]*",
    re.IGNORECASE,
)
#: what asks for more input instead of answering
REQUEST_RE = re.compile(
    r"\b(?:please (?:provide|share|send|show|continue|go on|tell|clarify|specify)|go ahead|send (?:me )?(?:the|more)|"
    r"show me|let me know|i(?:'| a)?m ready|ready for|waiting for|i (?:will|'ll) wait|what (?:is|are) (?:the|your) question|"
    r"what would you like|(?:need|want) (?:more|the (?:rest|next|full|question|image|layers?))|"
    r"more (?:layers?|images?|information|details|context))\b",
    re.IGNORECASE,
)
#: Table 4's five bins of the first answer attempt's position in the conversation
POSITION_BINS = ("earliest", "early", "midway", "late", "latest")
#: Table 5's five evidence-length bins (quintiles of the question's length in characters)
LENGTH_BINS = ("shortest", "short", "median", "long", "longest")


# -- answer grading ----------------------------------------------------------------------


#: bumped whenever the rule grader's verdicts change (recorded with every score)
GRADER_VERSION = 3

#: what identifies the data a row scored (never the output): the item (a question of a
#: scene; schedules and repeats are views of it) and its text, gold and type
ITEM_FIELDS: tuple[str, ...] = ("scene_id", "question_id")
DATA_FIELDS: tuple[str, ...] = ("question", "answer", "question_type")


def normalise(text: str) -> list[str]:
    """Lower-case tokens, punctuation dropped, hyphens split, ``colour``/``gray`` unified."""
    text = str(text).lower().replace("colour", "color").replace("gray", "grey")
    text = re.sub(r"[^a-z0-9\s]", " ", text.replace("-", " "))
    return text.split()


def default_lemma_names() -> tuple[Callable[[str], set[str]] | None, str]:
    """WordNet's lemma names when installed, with what to record; else None and the
    reason (the grader then matches the head noun and its plural only, and says so)."""
    try:
        wordnet()
        return (lambda w: lemma_names(w, "n")), "wordnet"
    except Exception as exc:  # recorded in every row's grader details
        return None, f"unavailable ({type(exc).__name__}: {str(exc)[:120]})"


def grader_provenance(synonyms: str) -> dict[str, Any]:
    return scorer(
        "rule", grader="lmms_scene.metrics.layered_vqa.grader.grade", grader_version=GRADER_VERSION, synonyms=synonyms
    )


# -- evidence selection ---------------------------------------------------------------------


#: one item of a selection: a layer number or a range of them ("1-3", "1–3", "1 to 3")
_SELECTION_ITEM = re.compile(r"(\d+)(?:\s*(?:-|\u2013|\u2014|to|through)\s*(\d+))?", re.IGNORECASE)


def parse_selection(output: str, n_layers: int) -> tuple[list[int] | None, str]:
    r"""The layers an output selects (its last ``Layers: i, j`` line) and the answer
    without that line. A range ``1-3`` (or ``1–3``, ``1 to 3``) selects every layer in
    it. None when there is no selection or it names a layer that does not exist (an
    invalid selection).

    >>> parse_selection("A red square.\nLayers: 1-3", 4)
    ([1, 2, 3], 'A red square.')
    >>> parse_selection("Layers: 0, 2 to 3", 4)[0]
    [0, 2, 3]
    """
    text = output or ""
    matches = list(SELECTION_RE.finditer(text))
    if not matches:
        return None, text.strip()
    m = matches[-1]
    answer = (text[: m.start()] + text[m.end() :]).strip()
    numbers: list[int] = []
    for item in _SELECTION_ITEM.finditer(m.group(1)):
        low = int(item.group(1))
        high = int(item.group(2)) if item.group(2) is not None else low
        low, high = min(low, high), max(low, high)
        if not 0 <= low or high >= n_layers:
            return None, answer  # a layer that does not exist (checked before expanding a range)
        numbers.extend(range(low, high + 1))
    if not numbers:
        return None, answer
    return sorted(set(numbers)), answer


def selection_scores(selected: list[int] | None, minimal: Sequence[int], distractors: Sequence[int]) -> dict[str, Any]:
    """Precision, recall, F1 and exact match of a selection against the minimal-sufficient
    set, and the error modes: ``complete`` (every minimal layer selected), ``excess``
    (some layer outside the minimal set), ``distractor`` (some distractor layer),
    ``invalid`` (no parsable, in-range selection; its P/R/F1/exact count as 0)."""
    minimal = set(int(i) for i in minimal)
    if selected is None:
        return {
            "precision": 0.0,
            "recall": 0.0,
            "f1": 0.0,
            "exact": False,
            "complete": False,
            "excess": False,
            "distractor": False,
            "invalid": True,
        }
    sel = set(selected)
    hit = len(sel & minimal)
    p = hit / len(sel) if sel else 0.0
    r = hit / len(minimal) if minimal else 0.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    return {
        "precision": p,
        "recall": r,
        "f1": f1,
        "exact": sel == minimal,
        "complete": minimal <= sel,
        "excess": bool(sel - minimal),
        "distractor": bool(sel & set(int(i) for i in distractors)),
        "invalid": False,
    }


# -- grounding --------------------------------------------------------------------------------


def is_attempt(output: str, graded: Grade | None = None) -> bool:
    """Whether a turn's reply attempts an answer. With ``graded`` (the rule grader's
    verdict on this reply): it commits to an answer of the asked kind (correct or wrong),
    and a refusal, options without a choice or several answers are none. Without a
    verdict, or when the grader found nothing of the asked kind: some sentence, after any
    opening acknowledgment ("Got it.", "Sure,"), is neither a question back nor a request
    for more input."""
    text = (output or "").strip()
    if not text or not normalise(text):
        return False
    if graded is not None:
        if graded.reason == "empty":
            return False
        # a refusal, options without a choice, several answers: no attempt; a reply with
        # nothing of the asked kind ("A hexagon." to a colour question) is read below
        if graded.verdict == CANNOT_TELL and not graded.reason.startswith("no "):
            return False
        if graded.verdict != CANNOT_TELL and graded.answer is not None:
            return True
    body = text
    while True:
        stripped = _ACK.sub("", body, count=1)
        if stripped == body:
            break
        body = stripped
    for sentence in re.split(r"(?<=[.!?\n])", body):
        sentence = sentence.strip()
        if not sentence or not normalise(sentence) or sentence.endswith("?") or REQUEST_RE.search(sentence):
            continue
        return True
    return False


def position_bin(turn: int, n_turns: int) -> str:
    """The bin of turn ``turn`` (0-based) of ``n_turns`` (> 1): its relative position
    turn / (n_turns - 1), 0 for the first turn and 1 for the last, in fifths."""
    if n_turns < 2:
        raise ValueError(f"n_turns: position bins need a multi-turn conversation, got {n_turns}")
    frac = turn / (n_turns - 1)
    return POSITION_BINS[min(4, max(0, int(frac * 5)))]


# -- one scored row -----------------------------------------------------------------------------


def score_row(
    doc: Mapping[str, Any],
    outputs: Sequence[str],
    turns: Sequence[Any],
    *,
    lemma_names: Callable[[str], set[str]] | None = None,
    synonyms: str = "wordnet",
    repeat: int = 0,
) -> dict[str, Any]:
    """Score one document's conversation (``outputs``: one reply per delivered turn).

    Every reply is sanitised first (:func:`lmms_scene.metrics.outputs.clean_output`); a
    conversation that stopped early (or has more replies than turns) and a stand-in for a
    row that failed the task's load-time check are not graded: the row says why
    (``failure``, ``unscored_reason``), counted in the report, never a silent 0."""
    schedule = doc["schedule"]
    cleaned = [clean_output("" if o is None else o if isinstance(o, str) else str(o)) for o in outputs]
    outputs = [c.text or "" for c in cleaned]
    changes = [f"turn {k}: {change}" for k, c in enumerate(cleaned) for change in c.changes]
    n_turns = len(turns)
    layer_count = n_layers(doc)
    final = outputs[-1] if outputs else ""
    failure = None
    if len(outputs) < n_turns:
        failure = f"conversation stopped after {len(outputs)} of {n_turns} turns"
    elif len(outputs) > n_turns:
        failure = f"{len(outputs)} outputs for {n_turns} turns"
    problem = recheck.problem_of(doc)
    if problem is not None:
        failure = failure or "not graded: the row failed the check when the task loaded it"
    selection = None
    answer_text = final
    sel_scores: dict[str, Any] = {}
    if schedule in SELECTION:
        selection, answer_text = parse_selection(final, layer_count)
        sel_scores = selection_scores(selection, doc["minimal_sufficient_layers"], doc["distractor_layers"])
    # a conversation that did not finish (the model failed mid-way) is not graded: it is
    # left out of accuracy, counted (not_computed, n_failed_conversations), never a silent 0
    g = (
        grade(answer_text, doc["answer"], doc["question_type"], doc.get("question"), lemma_names)
        if failure is None
        else None
    )
    row: dict[str, Any] = {
        "scene_id": doc["scene_id"],
        "question_id": doc["question_id"],
        "schedule": schedule,
        "repeat": int(repeat),
        "family": SCHEDULES[schedule].family,
        "question_type": doc["question_type"],
        # the text the judges are asked about (lmms-scene layered-vqa judge)
        "question": doc["question"],
        "relational": is_relational(doc),
        "depth": depth(doc),
        "n_shards": len(doc["shards"]),
        "evidence_length": len(doc["question"]),
        "single_turn": schedule in SINGLE_TURN,
        "n_turns": n_turns,
        "outputs": outputs,
        "output": final,
        "answer": doc["answer"],
        "correct": g.correct if g else None,
        "verdict": g.verdict if g else None,
        "cannot_tell": g.cannot_tell if g else None,
        "grade_reason": g.reason if g else "failed",
        "empty": not final.strip(),
        "failure": failure,
        "grader": "rule",
        "synonyms": synonyms,
        "scored": failure is None,
        "output_sanitised": bool(changes),
        "output_changes": changes,
    }
    if failure is not None:
        row["unscored_reason"] = problem or failure
    if schedule in SELECTION:
        row["selection"] = selection
        row.update(sel_scores)
        row["joint"] = bool(g.correct and sel_scores["exact"]) if g else None
    if n_turns > 1:
        # every turn's reply read by the grader: which are answer attempts (Table 4, 6),
        # their verdicts and lengths (Figure 6)
        graded = [grade(o, doc["answer"], doc["question_type"], doc.get("question"), lemma_names) for o in outputs]
        attempts = [is_attempt(o, gk) for o, gk in zip(outputs, graded)]
        row["turn_attempts"] = attempts
        row["turn_correct"] = [gk.correct if a else None for gk, a in zip(graded, attempts)]
        row["turn_words"] = [len(normalise(o)) for o in outputs]
        first = next((k for k, a in enumerate(attempts) if a), None)
        row["first_attempt"] = first
        if first is not None:
            row["attempt_bin"] = position_bin(first, n_turns)
            row["grounded"] = bool(turns[first].evidence_complete)
            first_answer = outputs[first]
            row["committed"] = bool(
                normalise(first_answer) == normalise(final)
                or (g is not None and g.correct and graded[first].correct)
                or (g is not None and g.answer is not None and graded[first].answer == g.answer)
            )
        else:
            row["attempt_bin"] = None
            row["grounded"] = None
            row["committed"] = None
        row["grounded_correct"] = bool(g.correct and row["grounded"]) if g else None
    return row


def unscored_row(doc: Mapping[str, Any], reason: str, outputs: Any = None, repeat: int = 0) -> dict[str, Any]:
    """The row of a document that could not be scored at all (:func:`score_row` itself
    failed on it): its ids, the reason and every field the report reads, nothing graded.
    Never raises."""

    def get(name, default):
        value = doc.get(name, default) if isinstance(doc, Mapping) else default
        return value if isinstance(value, type(default)) else default

    schedule = get("schedule", "?")
    spec = SCHEDULES.get(schedule)
    shards = doc.get("shards") if isinstance(doc, Mapping) and isinstance(doc.get("shards"), list) else []
    names = doc.get("layer_names") if isinstance(doc, Mapping) and isinstance(doc.get("layer_names"), list) else []
    replies = (
        [shown(o) or "" for o in outputs]
        if isinstance(outputs, (list, tuple))
        else ([shown(outputs) or ""] if outputs is not None else [])
    )
    return {
        "scene_id": str(get("scene_id", "?")),
        "question_id": str(get("question_id", "?")),
        "schedule": schedule,
        "repeat": int(repeat),
        "family": spec.family if spec else "?",
        "question_type": get("question_type", "?"),
        "relational": get("question_type", "") in RELATIONAL_TYPES,
        "depth": len(names) or int(get("n_layers", 0)),
        "n_shards": len(shards),
        "evidence_length": len(get("question", "")),
        "single_turn": schedule in SINGLE_TURN,
        "n_turns": 0,
        "outputs": replies,
        "output": replies[-1] if replies else "",
        "question": get("question", ""),
        "answer": get("answer", ""),
        "correct": None,
        "verdict": None,
        "cannot_tell": None,
        "grade_reason": "failed",
        "empty": None,
        "failure": reason,
        "grader": "rule",
        "synonyms": "",
        "scored": False,
        "unscored_reason": reason,
        "output_sanitised": False,
        "output_changes": [],
    }
