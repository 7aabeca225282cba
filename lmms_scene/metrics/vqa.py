"""Layered-VQA metrics: answer grading, evidence selection, grounding, breakdowns, tables.

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
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from lmms_scene.metrics import rows as R

SELECTION_RE = re.compile(r"layers?\s*[:=]\s*([^\n]*)", re.IGNORECASE)
#: acknowledgments a reply may open with before its answer ("Got it. The object is a triangle.")
_ACK = re.compile(r"^\s*(?:ok(?:ay)?|sure|got it|understood|alright|all right|great|thanks|thank you|noted|i see|certainly|of course)\b[\s,.!:;-]*", re.IGNORECASE)
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

from lmms_scene.metrics.vqa_grader import CANNOT_TELL, Grade, grade  # the rule grader

#: bumped whenever the rule grader's verdicts change (recorded with every score)
GRADER_VERSION = 2


def normalise(text: str) -> list[str]:
    """Lower-case tokens, punctuation dropped, hyphens split, ``colour``/``gray`` unified."""
    text = str(text).lower().replace("colour", "color").replace("gray", "grey")
    text = re.sub(r"[^a-z0-9\s]", " ", text.replace("-", " "))
    return text.split()


def default_lemma_names() -> tuple[Callable[[str], set[str]] | None, str]:
    """WordNet's lemma names when installed, with what to record; else None and the
    reason (the grader then matches the head noun and its plural only, and says so)."""
    try:
        from lmms_scene.nlp.wordnet import lemma_names, wordnet

        wordnet()
        return (lambda w: lemma_names(w, "n")), "wordnet"
    except Exception as exc:  # recorded in every row's grader details
        return None, f"unavailable ({type(exc).__name__}: {str(exc)[:120]})"


def grader_provenance(synonyms: str) -> dict[str, Any]:
    from lmms_scene.provenance import scorer

    return scorer("rule", grader="lmms_scene.metrics.vqa_grader.grade", grader_version=GRADER_VERSION, synonyms=synonyms)


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
    answer = (text[: m.start()] + text[m.end():]).strip()
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
        return {"precision": 0.0, "recall": 0.0, "f1": 0.0, "exact": False, "complete": False, "excess": False, "distractor": False, "invalid": True}
    sel = set(selected)
    hit = len(sel & minimal)
    p = hit / len(sel) if sel else 0.0
    r = hit / len(minimal) if minimal else 0.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    return {
        "precision": p, "recall": r, "f1": f1, "exact": sel == minimal, "complete": minimal <= sel,
        "excess": bool(sel - minimal), "distractor": bool(sel & set(int(i) for i in distractors)), "invalid": False,
    }  # fmt: skip


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
    from lmms_scene.data import layered_vqa as L
    from lmms_scene.data import recheck
    from lmms_scene.metrics.outputs import clean_output

    schedule = doc["schedule"]
    cleaned = [clean_output("" if o is None else o if isinstance(o, str) else str(o)) for o in outputs]
    outputs = [c.text or "" for c in cleaned]
    changes = [f"turn {k}: {change}" for k, c in enumerate(cleaned) for change in c.changes]
    n_turns = len(turns)
    n_layers = L.n_layers(doc)
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
    if schedule in L.SELECTION:
        selection, answer_text = parse_selection(final, n_layers)
        sel_scores = selection_scores(selection, doc["minimal_sufficient_layers"], doc["distractor_layers"])
    # a conversation that did not finish (the model failed mid-way) is not graded: it is
    # left out of accuracy, counted (not_computed, n_failed_conversations), never a silent 0
    g = grade(answer_text, doc["answer"], doc["question_type"], doc.get("question"), lemma_names) if failure is None else None
    row: dict[str, Any] = {
        "scene_id": doc["scene_id"],
        "question_id": doc["question_id"],
        "schedule": schedule,
        "repeat": int(repeat),
        "family": L.SCHEDULES[schedule].family,
        "question_type": doc["question_type"],
        # the text the judges are asked about (lmms-scene layered-vqa judge)
        "question": doc["question"],
        "relational": L.is_relational(doc),
        "depth": L.depth(doc),
        "n_shards": len(doc["shards"]),
        "evidence_length": len(doc["question"]),
        "single_turn": schedule in L.SINGLE_TURN,
        "n_turns": n_turns,
        "outputs": outputs,
        "output": final,
        "question": doc.get("question"),
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
    if schedule in L.SELECTION:
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
    from lmms_scene.data import layered_vqa as L
    from lmms_scene.metrics.outputs import shown

    def get(name, default):
        value = doc.get(name, default) if isinstance(doc, Mapping) else default
        return value if isinstance(value, type(default)) else default

    schedule = get("schedule", "?")
    spec = L.SCHEDULES.get(schedule)
    shards = doc.get("shards") if isinstance(doc, Mapping) and isinstance(doc.get("shards"), list) else []
    names = doc.get("layer_names") if isinstance(doc, Mapping) and isinstance(doc.get("layer_names"), list) else []
    replies = [shown(o) or "" for o in outputs] if isinstance(outputs, (list, tuple)) else ([shown(outputs) or ""] if outputs is not None else [])
    return {
        "scene_id": str(get("scene_id", "?")), "question_id": str(get("question_id", "?")), "schedule": schedule,
        "repeat": int(repeat), "family": spec.family if spec else "?", "question_type": get("question_type", "?"),
        "relational": get("question_type", "") in L.RELATIONAL_TYPES, "depth": len(names) or int(get("n_layers", 0)),
        "n_shards": len(shards), "evidence_length": len(get("question", "")),
        "single_turn": schedule in L.SINGLE_TURN, "n_turns": 0, "outputs": replies, "output": replies[-1] if replies else "",
        "question": get("question", ""), "answer": get("answer", ""), "correct": None, "verdict": None, "cannot_tell": None,
        "grade_reason": "failed", "empty": None, "failure": reason, "grader": "rule", "synonyms": "",
        "scored": False, "unscored_reason": reason, "output_sanitised": False, "output_changes": [],
    }  # fmt: skip


# -- aggregation ---------------------------------------------------------------------------------

CLUSTER = "scene_id"
#: what identifies the data a row scored (never the output): the item (a question of a
#: scene; schedules and repeats are views of it) and its text, gold and type. The report's
#: ``dataset`` fingerprint covers these (:func:`lmms_scene.metrics.rows.dataset_identity`),
#: so the 16 schedule tasks of one dataset share it
ITEM_FIELDS: tuple[str, ...] = ("scene_id", "question_id")
DATA_FIELDS: tuple[str, ...] = ("question", "answer", "question_type")


def _na(field: str, cond: Callable[[Mapping[str, Any]], bool]) -> Callable[[Mapping[str, Any]], Any]:
    return lambda r: (float(r[field]) if r.get(field) is not None else None) if cond(r) else R.NOT_APPLICABLE


def _f(field: str) -> Callable[[Mapping[str, Any]], Any]:
    return lambda r: (float(r[field]) if r.get(field) is not None else None) if field in r else R.NOT_APPLICABLE


ACCURACY = {"accuracy": _f("correct"), "empty_output_rate": _f("empty"), "cannot_tell_rate": _f("cannot_tell")}
SELECTION_METRICS = {
    "precision": _f("precision"), "recall": _f("recall"), "f1": _f("f1"), "exact_match": _f("exact"),
    "complete": _f("complete"), "excess": _f("excess"), "distractor": _f("distractor"), "invalid": _f("invalid"),
    "joint_accuracy": _f("joint"),
}  # fmt: skip
GROUNDING = {
    "attempted": lambda r: (float(r["first_attempt"] is not None) if "first_attempt" in r else R.NOT_APPLICABLE),
    "ungrounded_share": lambda r: (float(not r["grounded"]) if r.get("grounded") is not None else R.NOT_APPLICABLE),
    "commit_share": lambda r: (float(r["committed"]) if r.get("committed") is not None else R.NOT_APPLICABLE),
    "grounded_only_accuracy": _f("grounded_correct"),
    "accuracy": lambda r: ((None if r.get("correct") is None else float(r["correct"])) if "first_attempt" in r else R.NOT_APPLICABLE),
}


def _length_bins(rows: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """question_id -> length bin (quintiles of the distinct questions' lengths)."""
    import numpy as np

    lengths = {r["question_id"]: r["evidence_length"] for r in rows}
    if not lengths:
        return {}
    values = np.array(sorted(lengths.values()), float)
    edges = np.quantile(values, [0.2, 0.4, 0.6, 0.8])
    return {q: LENGTH_BINS[int(np.searchsorted(edges, v, side="left"))] for q, v in lengths.items()}


def _paired(rows, schedule: str) -> list[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """(row of ``schedule``, row of ``full``) for every question graded under both."""
    full = {(r["scene_id"], r["question_id"], r["repeat"]): r for r in rows if r["schedule"] == "full"}
    out = []
    for r in rows:
        if r["schedule"] != schedule or r.get("correct") is None:
            continue
        base = full.get((r["scene_id"], r["question_id"], r["repeat"]))
        if base is not None and base.get("correct") is not None:
            out.append((r, base))
    return out


def _ratio(pairs, n_boot: int, seed: int) -> dict[str, Any]:
    """Correct under the schedule over correct under ``full`` on the same questions, with
    the interval of the ratio of the two scene-resampled means (same draws for both)."""
    if not pairs:
        return {"retained_accuracy": None, "ci95": None, "n": 0}
    frag = [float(r["correct"]) for r, _ in pairs]
    base = [float(b["correct"]) for _, b in pairs]
    value = sum(frag) / sum(base) if sum(base) else None
    ci = None
    scenes = [r[CLUSTER] for r, _ in pairs]
    if value is not None and len(set(scenes)) >= 2:
        import numpy as np

        dist = R.bootstrap_means({"frag": frag, "base": base}, scenes, n_boot=n_boot, seed=seed)
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(dist["base"] > 0, dist["frag"] / np.where(dist["base"] > 0, dist["base"], 1), np.nan)
        ci = R.percentile_interval(ratio)
    return {"retained_accuracy": value, "ci95": ci, "n": len(pairs)}


#: Table 1's retained columns and the schedules each averages (the paper's column groups
#: "question in text", "question in layers", and alignment + order)
RETAINED_COLUMNS: dict[str, tuple[str, ...]] = {
    "text": ("concat-q", "sharded-q", "recap-q", "snowball-q"),
    "visual": ("concat-v", "sharded-v", "recap-v", "snowball-v"),
    "layered": ("aligned", "misaligned", "ev-first", "ev-last", "shuffled"),
}


def retained(full_accuracy: float | None, accuracies: Sequence[float | None]) -> float | None:
    """Retained accuracy of one of Table 1's columns: the mean accuracy of its schedules
    over the accuracy under ``full`` (a fraction; the paper prints it as a percentage).
    None when ``full`` has no right answer or no schedule has an accuracy.

    >>> round(100 * retained(0.559, [0.549, 0.533, 0.711, 0.630]))  # Table 1, Qwen2.5-VL-32B, Text
    108
    """
    values = [float(a) for a in accuracies if a is not None]
    if full_accuracy is None or not full_accuracy or not values:
        return None
    return (sum(values) / len(values)) / float(full_accuracy)


def _retained(rows: Sequence[Mapping[str, Any]], schedules: Iterable[str], n_boot: int, seed: int) -> dict[str, Any]:
    """Per schedule: correct under it over correct under ``full`` on the same questions.
    ``by_column``: Table 1's Text / Visual / Layered retained accuracy as the paper
    defines it (:func:`retained`: each schedule's accuracy, their mean over ``full``'s),
    with the interval of that ratio over the same scene resamples for every schedule."""
    if not any(r["schedule"] == "full" for r in rows):
        return {}
    out: dict[str, Any] = {}
    for schedule in schedules:
        if schedule == "full":
            continue
        pairs = _paired(rows, schedule)
        if pairs:
            out[schedule] = _ratio(pairs, n_boot, seed)
    present = {r["schedule"] for r in rows if r.get("correct") is not None}
    by_column: dict[str, Any] = {}
    graded = [r for r in rows if r.get("correct") is not None]
    needed = {"full"} | {s for cols in RETAINED_COLUMNS.values() for s in cols}
    columns = {s: [float(r["correct"]) if r["schedule"] == s else None for r in graded] for s in needed if s in present}
    dist = None
    scenes = [r[CLUSTER] for r in graded]
    if "full" in columns and len(set(scenes)) >= 2:
        dist = R.bootstrap_means(columns, scenes, n_boot=n_boot, seed=seed)
    acc = {s: R.mean(v) for s, v in columns.items()}
    for column, scheds in RETAINED_COLUMNS.items():
        have = [s for s in scheds if s in acc]
        if not have or "full" not in acc:
            continue
        value = retained(acc["full"], [acc[s] for s in have])
        ci = None
        if value is not None and dist is not None:
            import numpy as np

            with np.errstate(invalid="ignore", divide="ignore"):
                mean = np.nanmean(np.stack([dist[s] for s in have]), axis=0)
                ratio = np.where(dist["full"] > 0, mean / np.where(dist["full"] > 0, dist["full"], 1), np.nan)
            ci = R.percentile_interval(ratio)
        by_column[column] = {"retained_accuracy": value, "ci95": ci, "schedules": have, "complete": len(have) == len(scheds),
                             "full_accuracy": acc["full"], "accuracies": {s: acc[s] for s in have}}  # fmt: skip
    out["by_column"] = by_column
    return out


def _loss_by(rows, field: str, conditions: Sequence[str], n_boot: int, seed: int) -> dict[str, Any]:
    """Accuracy of ``full`` and the loss (condition - full, paired per question) per value
    of ``field``, resampled over scenes."""
    out: dict[str, Any] = {}
    for value in sorted({r[field] for r in rows}, key=str):
        subset = [r for r in rows if r[field] == value]
        entry: dict[str, Any] = {"questions": len({r["question_id"] for r in subset})}
        base = [r for r in subset if r["schedule"] == "full"]
        if base:
            entry["full"] = R.cell(base, {"accuracy": _f("correct")}, CLUSTER, n_boot=n_boot, seed=seed)
        for cond in conditions:
            paired = [{CLUSTER: r[CLUSTER], "loss": float(r["correct"]) - float(b["correct"])} for r, b in _paired(subset, cond)]
            if paired:
                entry[f"delta_{cond}"] = R.cell(paired, ["loss"], CLUSTER, n_boot=n_boot, seed=seed)
        out[str(value)] = entry
    return out


def _extra_loss(rows, conditions: Sequence[str], n_boot: int, seed: int) -> dict[str, Any]:
    """Table 8: the loss against ``full`` of relational and of single-object questions
    under each condition, and the extra loss (relational - single); its interval from
    the two scene-resampled means drawn with the same scene draws."""
    out: dict[str, Any] = {}
    for cond in conditions:
        pairs = _paired(rows, cond)
        if not pairs:
            continue
        loss = [float(r["correct"]) - float(b["correct"]) for r, b in pairs]
        relational = [v if r["relational"] else None for v, (r, _) in zip(loss, pairs)]
        single = [None if r["relational"] else v for v, (r, _) in zip(loss, pairs)]
        rel, sgl = R.mean(relational), R.mean(single)
        entry = {"relational": rel, "single_object": sgl, "extra_loss": None, "ci95": None, "n": len(pairs)}
        if rel is not None and sgl is not None:
            entry["extra_loss"] = rel - sgl
            scenes = [r[CLUSTER] for r, _ in pairs]
            if len(set(scenes)) >= 2:
                dist = R.bootstrap_means({"rel": relational, "single": single}, scenes, n_boot=n_boot, seed=seed)
                entry["ci95"] = R.percentile_interval(dist["rel"] - dist["single"])
        out[cond] = entry
    return out


def attempt_curve(multi: Sequence[Mapping[str, Any]], rows: Sequence[Mapping[str, Any]], *, n_boot: int = R.N_BOOT, seed: int = R.SEED) -> dict[str, Any]:
    """Figure 6: over multi-turn conversations, per successive answer attempt (1st, 2nd,
    ...: the turns whose reply attempts an answer, in order) the reply's length in words
    and its accuracy; ``baseline``: accuracy under ``full`` (the single-turn baseline) on
    the same questions."""
    records = []
    for r in multi:
        k = 0
        for a, ok, words in zip(r.get("turn_attempts") or (), r.get("turn_correct") or (), r.get("turn_words") or ()):
            if not a:
                continue
            k += 1
            records.append({CLUSTER: r[CLUSTER], "attempt": k, "words": float(words), "correct": None if ok is None else float(ok)})
    questions = {(r["scene_id"], r["question_id"]) for r in multi}
    base = [r for r in rows if r["schedule"] == "full" and (r["scene_id"], r["question_id"]) in questions]
    return {
        "by_attempt": R.breakdown(records, ["attempt"], {"words": "words", "accuracy": "correct"}, CLUSTER, n_boot=n_boot, seed=seed,
                                  key=lambda f, v: str(v), order={"attempt": sorted({x["attempt"] for x in records})}),
        "baseline": R.cell(base, {"accuracy": _f("correct")}, CLUSTER, n_boot=n_boot, seed=seed) if base else None,
    }  # fmt: skip


def loss_concentration(rows: Sequence[Mapping[str, Any]], conditions: Sequence[str] = ("concat-v", "oracle")) -> dict[str, Any]:
    """Figure 8 (left): per condition, the questions ranked by their loss against
    ``full`` (full correct minus condition correct, averaged over repeats), the running
    total of that loss as a share of the total, and how few questions hold half and 80%
    of it (None when nothing is lost overall)."""
    import numpy as np

    out: dict[str, Any] = {}
    for cond in conditions:
        per_q: dict[tuple, list[float]] = {}
        for r, b in _paired(rows, cond):
            per_q.setdefault((r["scene_id"], r["question_id"]), []).append(float(b["correct"]) - float(r["correct"]))
        if not per_q:
            continue
        losses = np.sort(np.array([sum(v) / len(v) for v in per_q.values()]))[::-1]
        total = float(losses.sum())
        entry: dict[str, Any] = {"questions": len(losses), "total_loss": total, "running_share": None,
                                 "share_of_questions_for_half": None, "share_of_questions_for_80": None}  # fmt: skip
        if total > 0:
            running = np.cumsum(losses) / total
            entry["running_share"] = [round(float(x), 4) for x in running]
            for key, level in (("share_of_questions_for_half", 0.5), ("share_of_questions_for_80", 0.8)):
                entry[key] = float((int(np.argmax(running >= level - 1e-12)) + 1) / len(losses))
        out[cond] = entry
    return out


#: Figure 9's streams: the fragmented schedule and the one that restores it
STREAMS: dict[str, tuple[str, str]] = {"text": ("sharded-q", "recap-q"), "visual": ("sharded-v", "recap-v")}


def restoration(rows: Sequence[Mapping[str, Any]], n_boot: int = R.N_BOOT, seed: int = R.SEED) -> dict[str, Any]:
    """Figure 9: per stream, on the questions graded under ``full``, the fragmented and the
    restored schedule: the cost of fragmenting (fragmented - full), the recovery
    (restored - fragmented) and the overshoot (restored - full), scene-resampled."""
    out: dict[str, Any] = {}
    full = {(r["scene_id"], r["question_id"], r["repeat"]): r for r in rows if r["schedule"] == "full" and r.get("correct") is not None}
    for stream, (frag, restored) in STREAMS.items():
        got = {s: {(r["scene_id"], r["question_id"], r["repeat"]): r for r in rows if r["schedule"] == s and r.get("correct") is not None} for s in (frag, restored)}
        keys = [k for k in full if k in got[frag] and k in got[restored]]
        if not keys:
            continue
        recs = []
        for k in keys:
            b, f, re_ = float(full[k]["correct"]), float(got[frag][k]["correct"]), float(got[restored][k]["correct"])
            recs.append({CLUSTER: full[k][CLUSTER], "cost": f - b, "recovery": re_ - f, "overshoot": re_ - b})
        out[stream] = {"fragmented": frag, "restored": restored, **R.cell(recs, ["cost", "recovery", "overshoot"], CLUSTER, n_boot=n_boot, seed=seed)}
    return out


def report(rows: Sequence[Mapping[str, Any]], *, n_boot: int = R.N_BOOT, seed: int = R.SEED) -> dict[str, Any]:
    """Every Layered-VQA number of a set of scored rows (deduplicated by id)."""
    from lmms_scene.data.layered_vqa import SCHEDULES

    deduped = R.dedupe(expand_repeats(rows), ("scene_id", "question_id", "schedule", "repeat"), same=("output",))
    rows = [dict(r) for r in deduped.rows]
    order = {"schedule": list(SCHEDULES)}
    bins = _length_bins(rows)
    for r in rows:
        r["length_bin"] = bins.get(r["question_id"])
        r["delivery"] = "one turn" if r["single_turn"] else "across turns"
    schedules = [s for s in SCHEDULES if any(r["schedule"] == s for r in rows)]
    graders = sorted({r.get("grader", "rule") for r in rows})
    retained_part = _retained(rows, schedules, n_boot, seed)
    out: dict[str, Any] = {
        "n_rows": len(rows),
        "dataset": R.dataset_identity(rows, ITEM_FIELDS, DATA_FIELDS),
        "n_duplicates": deduped.n_duplicates,
        "n_failed_conversations": sum(1 for r in rows if r.get("failure")),
        # every row not graded (a conversation that stopped early, a row that failed the
        # load-time check, a scoring failure): counted, the first ones named with their reasons
        **R.unscored_summary(rows, ("scene_id", "question_id", "schedule", "repeat")),
        "grader": graders[0] if len(graders) == 1 else graders,
        "synonyms": sorted({r.get("synonyms", "") for r in rows}),
        "interval": {"method": "percentile bootstrap", "cluster": CLUSTER, "n_boot": n_boot, "seed": seed, "level": R.LEVEL},
        "overall": _headline(rows, retained_part, n_boot, seed),
        "by_schedule": R.breakdown(rows, ["schedule"], ACCURACY, CLUSTER, order=order, n_boot=n_boot, seed=seed),
        "by_type_schedule": R.breakdown(rows, ["question_type", "schedule"], {"accuracy": _f("correct")}, CLUSTER, order={"question_type": list(_types()), **order}, n_boot=n_boot, seed=seed),
        "retained": retained_part,
    }
    sel = [r for r in rows if "selection" in r]
    if sel:
        out["evidence"] = R.breakdown(sel, ["schedule"], SELECTION_METRICS, CLUSTER, order=order, n_boot=n_boot, seed=seed)
    multi = [r for r in rows if "first_attempt" in r]
    if multi:
        out["grounding"] = {
            "by_schedule": R.breakdown(multi, ["schedule"], GROUNDING, CLUSTER, order=order, n_boot=n_boot, seed=seed),
            "by_family": R.breakdown(multi, ["family"], GROUNDING, CLUSTER, n_boot=n_boot, seed=seed),
            "overall": R.cell(multi, GROUNDING, CLUSTER, n_boot=n_boot, seed=seed),
            "first_attempt_bins": R.breakdown(
                [r for r in multi if r.get("attempt_bin")], ["attempt_bin"], {"accuracy": _f("correct"), "commit_share": GROUNDING["commit_share"]},
                CLUSTER, order={"attempt_bin": list(POSITION_BINS)}, n_boot=n_boot, seed=seed,
            ),
        }
    if any(r["repeat"] > 0 for r in rows):
        out["reliability"] = reliability(rows, n_boot=n_boot, seed=seed)
    if multi:
        out["attempts"] = attempt_curve(multi, rows, n_boot=n_boot, seed=seed)
    out["loss_concentration"] = loss_concentration(rows)
    out["restoration"] = restoration(rows, n_boot, seed)
    out["by_length"] = R.breakdown(rows, ["delivery", "length_bin"], {"accuracy": _f("correct")}, CLUSTER, order={"delivery": ["one turn", "across turns"], "length_bin": list(LENGTH_BINS)}, n_boot=n_boot, seed=seed)
    out["by_depth"] = _loss_by(rows, "depth", ("concat-v", "oracle"), n_boot, seed)
    out["relational"] = _extra_loss(rows, ("concat-v", "oracle"), n_boot, seed)
    return out


def _headline(rows: Sequence[Mapping[str, Any]], retained_part: Mapping[str, Any], n_boot: int, seed: int) -> dict[str, Any]:
    # the pooled accuracy cell with the paper's headline beside it (read by show, the
    # report and the leaderboard)
    cell = R.cell(rows, ACCURACY, CLUSTER, n_boot=n_boot, seed=seed)
    for column, entry in retained_part.get("by_column", {}).items():
        cell[f"retained_{column}"] = entry["retained_accuracy"]
        cell.setdefault("ci95", {})[f"retained_{column}"] = entry["ci95"]
    return cell


def headline_cell(rows: Sequence[Mapping[str, Any]], *, n_boot: int = R.N_BOOT, seed: int = R.SEED) -> dict[str, Any]:
    """The headline cell of a set of scored rows (every schedule of a run together): Table
    1's retained accuracy Text / Visual / Layered and the pooled final-turn accuracy, with
    their intervals, exactly as :func:`report` computes its ``overall`` cell (the
    leaderboard recomputes a submission's headline with it)."""
    from lmms_scene.data.layered_vqa import SCHEDULES

    rows = [dict(r) for r in R.dedupe(expand_repeats(rows), ("scene_id", "question_id", "schedule", "repeat"), same=()).rows]
    schedules = [s for s in SCHEDULES if any(r["schedule"] == s for r in rows)]
    return _headline(rows, _retained(rows, schedules, n_boot, seed), n_boot, seed)


def schedule_part(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """A one-schedule task's part of the group's retained accuracy: its schedule and how
    many answers were correct out of how many were graded (None when the rows mix
    schedules or none was graded)."""
    schedules = {r.get("schedule") for r in rows}
    graded = [r for r in rows if r.get("correct") is not None]
    if len(schedules) != 1 or not graded:
        return None
    return {
        "schedule": schedules.pop(), "n_correct": int(sum(bool(r["correct"]) for r in graded)), "n_graded": len(graded),
        "retained_accuracy": None,
        "why": "retained accuracy needs the full schedule's accuracy: the layered_vqa group combines the schedules' parts",
    }  # fmt: skip


def retained_from_parts(parts: Sequence[Any], column: str) -> float | None:
    """Table 1's retained accuracy ``column`` (text, visual, layered) of a group of
    one-schedule tasks, from their parts (:func:`schedule_part`): each schedule's
    accuracy, their mean over ``full``'s (:func:`retained`). None without ``full``, with
    nothing right under it, or with none of the column's schedules. ``lmms-scene show``
    adds scene-resampled intervals."""
    parts = [p for p in parts if isinstance(p, Mapping) and p.get("schedule") and p.get("n_graded")]
    full = next((p for p in parts if p["schedule"] == "full"), None)
    if full is None:
        return None
    accs = [p["n_correct"] / p["n_graded"] for p in parts if p["schedule"] in RETAINED_COLUMNS[column]]
    return retained(full["n_correct"] / full["n_graded"], accs) if accs else None


def expand_repeats(rows: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Rows with the extra samples of a ``repeats`` run (``repeat_rows``) as rows of their own."""
    out: list[Mapping[str, Any]] = []
    for row in rows:
        extra = row.get("repeat_rows") if isinstance(row, Mapping) else None
        if extra:
            out.append({k: v for k, v in row.items() if k != "repeat_rows"})
            out.extend(extra)
        else:
            out.append(row)
    return out


def reliability(rows: Sequence[Mapping[str, Any]], *, n_boot: int = R.N_BOOT, seed: int = R.SEED) -> dict[str, Any]:
    """Repeated sampling (``--repeats N``), after Laban et al. 2025 ("LLMs Get Lost in
    Multi-Turn Conversation", section 3.3): per schedule and question, over its N
    samples, **aptitude** A90 = the 90th percentile of the scores and **unreliability**
    U90_10 = the 90th minus the 10th percentile (numpy's linear percentiles), with the
    mean score (``average``) beside them; each averaged over questions, scene-resampled."""
    import numpy as np

    per_question: dict[tuple, list[float]] = {}
    scene_of: dict[tuple, str] = {}
    for r in rows:
        if r.get("correct") is None:
            continue
        key = (r["schedule"], r["question_id"])
        per_question.setdefault(key, []).append(float(r["correct"]))
        scene_of[key] = r["scene_id"]
    summary = []
    for (schedule, qid), values in per_question.items():
        v = np.asarray(values)
        p90, p10 = float(np.percentile(v, 90)), float(np.percentile(v, 10))
        summary.append({"schedule": schedule, "question_id": qid, CLUSTER: scene_of[(schedule, qid)], "repeats": len(values),
                        "aptitude": p90, "unreliability": p90 - p10, "average": float(v.mean()), "p10": p10})  # fmt: skip
    from lmms_scene.data.layered_vqa import SCHEDULES

    return R.breakdown(summary, ["schedule"], ["aptitude", "unreliability", "average", "p10", "repeats"], CLUSTER, order={"schedule": list(SCHEDULES)}, n_boot=n_boot, seed=seed)


def _types():
    from lmms_scene.data.layered_vqa import QUESTION_TYPES

    return QUESTION_TYPES


# -- the LLM-judge path (after a run, on the recorded outputs) -------------------------------------


#: why a row is not sent to the judges (kept, counted in :func:`judge_summary`)
NOT_JUDGED_STOPPED = "the conversation stopped early: never judged, not graded"
NOT_JUDGED_EMPTY = "empty final reply: not a right answer, no judge asked"


def judge_rows(
    rows: Sequence[Mapping[str, Any]],
    judges: Sequence[Any],
    *,
    model: str | None,
    model_args: str | Mapping[str, Any] | None,
    questions: Mapping[str, str] | None = None,
    clients: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Re-grade scored rows with a judge panel (:func:`lmms_scene.judges.panel`), every
    repeat of a ``--repeats`` run a row of its own (:func:`expand_repeats`).

    Only completed conversations are judged. A row whose conversation stopped early
    (``failure``) is never sent to a judge and stays ungraded (``correct=None``); an empty
    final reply is not sent either and stays wrong, as the rule grader has it. Both carry
    ``judge={"judged": False, "reason": ...}`` and are counted by :func:`judge_summary`.
    Every other row gets ``judge`` (the consensus record) and ``correct`` from the
    majority, or ``correct=None`` (left out of accuracy, counted) when no judge gave a
    usable verdict. ``grader`` becomes ``llm_judge_majority``; the rule grade stays as
    ``rule_correct``.

    The judges see the row's own question text (``question``, logged by
    :func:`score_row`); ``questions`` (question_id -> text) is for rows from runs that
    did not log it. A row with neither is refused before any judge is asked.
    """
    from lmms_scene import judges as J

    flat = [dict(r) for r in expand_repeats(rows)]
    missing = [r["question_id"] for r in flat if not r.get("question") and not (questions or {}).get(r["question_id"])]
    if missing:
        raise ValueError(
            f"judge_rows: no question text for {len(missing)} rows (first: {missing[0]!r}); the rows carry none "
            "and none was given: pass the run's own data (questions=, --data)"
        )
    differ = [r["question_id"] for r in flat if r.get("question") and (questions or {}).get(r["question_id"], r["question"]) != r["question"]]
    if differ:
        raise ValueError(
            f"judge_rows: the given question texts differ from the run's own for {len(differ)} rows (first: "
            f"{differ[0]!r}: run {next(r['question'] for r in flat if r['question_id'] == differ[0])!r}, given "
            f"{questions[differ[0]]!r}); the data is not the data the run used"  # type: ignore[index]
        )
    out = []
    for row in flat:
        new = dict(row)
        new["rule_correct"] = row.get("correct")
        new["grader"] = "llm_judge_majority"
        prediction = row.get("output", "") or ""
        if row["schedule"] in ("all-lyr", "oracle"):
            prediction = parse_selection(prediction, 10**6)[1]
        reason = NOT_JUDGED_STOPPED if row.get("failure") else (NOT_JUDGED_EMPTY if not prediction.strip() else None)
        if reason is not None:
            new["correct"] = None if row.get("failure") else False
            new["judge"] = {"judged": False, "reason": reason, "failure": row.get("failure")}
            out.append(new)
            continue
        question = row.get("question") or questions[row["question_id"]]  # type: ignore[index]
        prompt = J.grading_prompt(question, row["answer"], prediction)
        verdict = J.panel(judges, prompt, model=model, model_args=model_args, clients=clients)
        new["correct"] = verdict.correct
        new["judge"] = {"judged": True, **verdict.to_dict()}
        if "joint" in new:
            new["joint"] = None if verdict.correct is None else bool(verdict.correct and new["exact"])
        if "grounded_correct" in new:
            new["grounded_correct"] = None if verdict.correct is None else bool(verdict.correct and new["grounded"])
        out.append(new)
    return out


def judge_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Counts of judge outcomes over judged rows: rows never sent to a judge (a stopped
    conversation, an empty reply), rows with no consensus, failed calls (timeouts,
    errors) and unparsed replies among the voting judges, the self-judges (asked, kept for
    Figure 4, never voting) and how many self-judgments they gave."""
    with_record = [r for r in rows if "judge" in r]
    judged = [r for r in with_record if r["judge"].get("judged", True)]
    skipped = [r for r in with_record if not r["judge"].get("judged", True)]
    return {
        "rows": len(with_record),
        "judged": len(judged),
        "not_judged": len(skipped),
        "not_judged_stopped": sum(1 for r in skipped if r["judge"]["reason"] == NOT_JUDGED_STOPPED),
        "not_judged_empty": sum(1 for r in skipped if r["judge"]["reason"] == NOT_JUDGED_EMPTY),
        "no_consensus": sum(1 for r in judged if r["judge"]["correct"] is None),
        "failed_calls": sum(r["judge"]["failed"] for r in judged),
        "unparsed_replies": sum(r["judge"]["unparsed"] for r in judged),
        "self_judges_excluded": sorted({j for r in judged for j in r["judge"]["excluded"]}),
        "self_judgments": sum(1 for r in judged for x in r["judge"].get("replies", []) if x.get("self")),
    }


def self_preference(runs: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, dict[str, float | None]]:
    """Figure 4: judge x judged model, the share of each judge's usable verdicts that
    are "correct" for each model's outputs (``runs``: model label -> judged rows). Every
    judge judged every answer, so a judge that is one of the models has its own outputs'
    cell too (:func:`self_cells`): the paper's boxed diagonal. Failed and unparsed
    judgments are left out of the shares (they are counted in :func:`judge_summary`)."""
    out: dict[str, dict[str, float | None]] = {}
    for model, rows in runs.items():
        for row in rows:
            for reply in row.get("judge", {}).get("replies", []):
                if reply.get("status") not in ("yes", "no"):
                    continue
                cell = out.setdefault(reply["judge"], {}).setdefault(model, [0, 0])  # type: ignore[arg-type]
                cell[0] += reply["status"] == "yes"
                cell[1] += 1
    return {j: {m: (c[0] / c[1] if c[1] else None) for m, c in models.items()} for j, models in out.items()}  # type: ignore[index]


def self_cells(runs: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[tuple[str, str]]:
    """The (judge, model) cells of Figure 4 where a model judged its own outputs."""
    found = {(reply["judge"], model) for model, rows in runs.items() for row in rows
             for reply in row.get("judge", {}).get("replies", []) if reply.get("self")}  # fmt: skip
    return sorted(found)


def self_preference_table(matrix: Mapping[str, Mapping[str, float | None]], cells: Sequence[tuple[str, str]]) -> str:
    """Figure 4 as a Markdown table: rows judges, columns judged models, the share judged
    correct; a model judging its own outputs in [brackets] (the paper's boxed cells)."""
    from lmms_scene.results import markdown_table

    models = sorted({m for row in matrix.values() for m in row})
    boxed = set(map(tuple, cells))
    rows = []
    for judge in sorted(matrix):
        line = [judge]
        for m in models:
            v = matrix[judge].get(m)
            text = "-" if v is None else f"{v:.3f}"
            line.append(f"[{text}]" if (judge, m) in boxed else text)
        rows.append(line)
    return markdown_table(["judge \\ model", *models], rows)
