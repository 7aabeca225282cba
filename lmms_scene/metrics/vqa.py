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
from dataclasses import dataclass
from typing import Any

from lmms_scene.metrics import rows as R

NUMBER_WORDS = {
    "zero": 0, "no": 0, "none": 0, "one": 1, "a single": 1, "single": 1, "two": 2, "both": 2, "three": 3, "four": 4,
    "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12,
    "thirteen": 13, "fourteen": 14, "fifteen": 15, "twenty": 20,
}  # fmt: skip
_NUMBER_RE = re.compile(r"\b(" + "|".join(sorted((re.escape(w) for w in NUMBER_WORDS if w not in ("no", "none", "both", "single")), key=len, reverse=True)) + r"|\d+)\b")
ARTICLES = {"a", "an", "the"}
STOPWORDS = ARTICLES | {
    "is", "are", "it", "its", "this", "that", "there", "of", "in", "on", "at", "to", "and", "or", "with", "by",
    "object", "thing", "one", "visible", "scene", "image", "picture", "answer", "i", "see", "be", "which", "what",
}  # fmt: skip
COLOURS = {"red", "green", "blue", "yellow", "purple", "orange", "black", "white", "brown", "pink", "grey", "gray", "violet"}
RELATIONS = {
    "left": "right", "right": "left", "above": "below", "below": "above", "behind": "front", "front": "behind",
    "over": "under", "under": "over",
}  # fmt: skip
SELECTION_RE = re.compile(r"layers?\s*[:=]\s*([^\n]*)", re.IGNORECASE)
NON_ANSWER_RE = re.compile(
    r"\b(please (provide|share|tell|clarify|specify)|need (more|the)|not enough|cannot (determine|tell|see|answer)|"
    r"can't (determine|tell|see|answer)|unable to|could you|can you (provide|clarify|tell)|what (is|are) (the|your) question|"
    r"i (will|'ll) wait|waiting for|sure[,!.]? (i|go ahead)|go ahead|send (me )?the|show me|let me know|"
    r"more (layers?|images?|information|details|context)|i'?m ready|understood|got it|^ok(ay)?\b)\b",
    re.IGNORECASE,
)
#: Table 4's five bins of the first answer attempt's position in the conversation
POSITION_BINS = ("earliest", "early", "midway", "late", "latest")
#: Table 5's five evidence-length bins (quintiles of the question's length in characters)
LENGTH_BINS = ("shortest", "short", "median", "long", "longest")


# -- answer grading ----------------------------------------------------------------------


def normalise(text: str) -> list[str]:
    """Lower-case tokens, punctuation dropped, hyphens split, ``colour``/``gray`` unified."""
    text = str(text).lower().replace("colour", "color").replace("gray", "grey")
    text = re.sub(r"[^a-z0-9\s]", " ", text.replace("-", " "))
    return text.split()


def _singular(token: str) -> str:
    if len(token) > 3 and token.endswith("ies"):
        return token[:-3] + "y"
    if len(token) > 3 and token.endswith(("ches", "shes", "sses", "xes")):
        return token[:-2]
    if len(token) > 2 and token.endswith("s") and not token.endswith("ss"):
        return token[:-1]
    return token


def counts(text: str) -> list[tuple[int, str | None]]:
    """The numbers a text states, in order, each with the noun right after it (if any)."""
    low = " ".join(normalise(text))
    out = []
    for m in _NUMBER_RE.finditer(low):
        word = m.group(1)
        value = int(word) if word.isdigit() else NUMBER_WORDS[word]
        after = low[m.end():].split()
        noun = None
        for tok in after[:3]:
            if tok in STOPWORDS or tok in COLOURS:
                continue
            noun = _singular(tok)
            break
        out.append((value, noun))
    return out


@dataclass(frozen=True)
class Grade:
    correct: bool
    reason: str


def _synonyms(word: str, lemma_names: Callable[[str], set[str]] | None) -> set[str]:
    out = {word, _singular(word)}
    if lemma_names is not None:
        try:
            out |= {w.lower() for w in lemma_names(word)}
        except Exception:  # an unknown word has no synonyms; the word itself still counts
            pass
    return out


def _contains(tokens: Sequence[str], phrase: str) -> bool:
    words = [_singular(t) for t in normalise(phrase)]
    toks = [_singular(t) for t in tokens]
    n = len(words)
    return n > 0 and any(toks[i : i + n] == words for i in range(len(toks) - n + 1))


def head_noun(answer: str) -> str | None:
    """The gold answer's head noun: its last content word ("A teddy bear." -> "bear")."""
    content = [t for t in normalise(answer) if t not in STOPWORDS and not _NUMBER_RE.fullmatch(t)]
    return _singular(content[-1]) if content else None


def grade(
    prediction: str,
    answer: str,
    question_type: str | None = None,
    lemma_names: Callable[[str], set[str]] | None = None,
) -> Grade:
    """The offline rule grade of ``prediction`` against the gold ``answer``.

    >>> grade("I count 2 circles and 1 square", "Two circles and one square.", "counting").correct
    True
    >>> grade("one circle, two squares", "Two circles and one square.", "counting").correct
    False
    """
    if not isinstance(prediction, str) or not prediction.strip():
        return Grade(False, "empty")
    pred = normalise(prediction)
    gold = normalise(answer)
    if not pred:
        return Grade(False, "empty")
    gold_counts = counts(answer)
    if question_type == "counting" or (gold_counts and gold and (gold[0] in NUMBER_WORDS or gold[0].isdigit())):
        if not gold_counts:
            return Grade(False, "gold has no count")
        said = counts(prediction)
        if not said:
            return Grade(False, "no count in the reply")
        if len(gold_counts) == 1:
            return Grade(said[0][0] == gold_counts[0][0], "count")
        # two groups: bound to their nouns when both groups have distinct nouns that the
        # reply names once each ("one square and two circles"), else in order ("Two dogs
        # face frontward, and one dog faces backward": both groups are dogs)
        groups = gold_counts[:2]
        nouns = [noun for _, noun in groups]
        said_nouns = [noun for _, noun in said]
        bound = len(set(nouns)) == 2 and all(n and said_nouns.count(n) == 1 for n in nouns)
        if bound:
            by_noun = {noun: value for value, noun in said}
            ok = all(by_noun[noun] == value for value, noun in groups)
        else:
            ok = len(said) >= 2 and all(said[i][0] == value for i, (value, _) in enumerate(groups))
        return Grade(ok, "two counts")
    rels = [t for t in gold if t in RELATIONS]
    if rels:
        rel = rels[0]
        has = rel in pred
        opposite = RELATIONS[rel] in pred and RELATIONS[rel] not in gold
        return Grade(has and not opposite, "relation")
    content = [t for t in gold if t not in STOPWORDS]
    if len(content) == 1 and content[0] in COLOURS:
        said = {t for t in pred if t in COLOURS}
        return Grade(said == {content[0]}, "colour")
    head = head_noun(answer)
    if head is None:
        return Grade(" ".join(pred) == " ".join(gold), "exact")
    needed_colours = [t for t in content if t in COLOURS]
    if any(c not in pred for c in needed_colours):
        return Grade(False, "colour missing")
    tokens = [_singular(t) for t in pred]
    if head in tokens:
        return Grade(True, "head noun")
    for syn in _synonyms(head, lemma_names):
        if _contains(pred, syn):
            return Grade(True, "synonym")
    # a multi-word gold head ("mountain range") through its compound's synonyms
    if len(content) >= 2 and lemma_names is not None:
        for syn in _synonyms(" ".join(content[-2:]), lemma_names):
            if _contains(pred, syn):
                return Grade(True, "synonym")
    return Grade(False, "head noun missing")


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

    return scorer("rule", grader="lmms_scene.metrics.vqa.grade", synonyms=synonyms)


# -- evidence selection ---------------------------------------------------------------------


def parse_selection(output: str, n_layers: int) -> tuple[list[int] | None, str]:
    """The layers an output selects (its last ``Layers: i, j`` line) and the answer
    without that line. None when there is no selection or it names a layer that does
    not exist (an invalid selection)."""
    text = output or ""
    matches = list(SELECTION_RE.finditer(text))
    if not matches:
        return None, text.strip()
    m = matches[-1]
    answer = (text[: m.start()] + text[m.end():]).strip()
    numbers = [int(x) for x in re.findall(r"\d+", m.group(1))]
    if not numbers or any(not 0 <= x < n_layers for x in numbers):
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


def is_attempt(output: str) -> bool:
    """Whether a turn's reply attempts an answer: not empty, not a question back, not a
    request for more input."""
    text = (output or "").strip()
    if not text or not normalise(text):
        return False
    if text.endswith("?"):
        return False
    return NON_ANSWER_RE.search(text) is None


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
    """Score one document's conversation (``outputs``: one reply per delivered turn)."""
    from lmms_scene.data import layered_vqa as L

    schedule = doc["schedule"]
    outputs = ["" if o is None else str(o) for o in outputs]
    n_turns = len(turns)
    n_layers = L.n_layers(doc)
    final = outputs[-1] if outputs else ""
    failure = None
    if len(outputs) < n_turns:
        failure = f"conversation stopped after {len(outputs)} of {n_turns} turns"
    elif len(outputs) > n_turns:
        failure = f"{len(outputs)} outputs for {n_turns} turns"
    selection = None
    answer_text = final
    sel_scores: dict[str, Any] = {}
    if schedule in L.SELECTION:
        selection, answer_text = parse_selection(final, n_layers)
        sel_scores = selection_scores(selection, doc["minimal_sufficient_layers"], doc["distractor_layers"])
    # a conversation that did not finish (the model failed mid-way) is not graded: it is
    # left out of accuracy, counted (not_computed, n_failed_conversations), never a silent 0
    g = grade(answer_text, doc["answer"], doc["question_type"], lemma_names) if failure is None else None
    row: dict[str, Any] = {
        "scene_id": doc["scene_id"],
        "question_id": doc["question_id"],
        "schedule": schedule,
        "repeat": int(repeat),
        "family": L.SCHEDULES[schedule].family,
        "question_type": doc["question_type"],
        "relational": L.is_relational(doc),
        "depth": L.depth(doc),
        "n_shards": len(doc["shards"]),
        "evidence_length": len(doc["question"]),
        "single_turn": schedule in L.SINGLE_TURN,
        "n_turns": n_turns,
        "outputs": outputs,
        "output": final,
        "answer": doc["answer"],
        "correct": g.correct if g else None,
        "grade_reason": g.reason if g else "failed",
        "empty": not final.strip(),
        "failure": failure,
        "grader": "rule",
        "synonyms": synonyms,
    }
    if schedule in L.SELECTION:
        row["selection"] = selection
        row.update(sel_scores)
        row["joint"] = bool(g.correct and sel_scores["exact"]) if g else None
    if n_turns > 1:
        first = next((k for k, o in enumerate(outputs) if is_attempt(o)), None)
        row["first_attempt"] = first
        if first is not None:
            row["attempt_bin"] = position_bin(first, n_turns)
            row["grounded"] = bool(turns[first].evidence_complete)
            first_answer = outputs[first]
            row["committed"] = bool(
                normalise(first_answer) == normalise(final)
                or (g is not None and g.correct and grade(first_answer, doc["answer"], doc["question_type"], lemma_names).correct)
            )
        else:
            row["attempt_bin"] = None
            row["grounded"] = None
            row["committed"] = None
        row["grounded_correct"] = bool(g.correct and row["grounded"]) if g else None
    return row


# -- aggregation ---------------------------------------------------------------------------------

CLUSTER = "scene_id"


def _na(field: str, cond: Callable[[Mapping[str, Any]], bool]) -> Callable[[Mapping[str, Any]], Any]:
    return lambda r: (float(r[field]) if r.get(field) is not None else None) if cond(r) else R.NOT_APPLICABLE


def _f(field: str) -> Callable[[Mapping[str, Any]], Any]:
    return lambda r: (float(r[field]) if r.get(field) is not None else None) if field in r else R.NOT_APPLICABLE


ACCURACY = {"accuracy": _f("correct"), "empty_output_rate": _f("empty")}
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


def _retained(rows: Sequence[Mapping[str, Any]], schedules: Iterable[str], n_boot: int, seed: int) -> dict[str, Any]:
    """Retained accuracy of each schedule over ``full`` on the same questions, and Table
    1's columns: Text (question schedules), Visual (visual), Layered (alignment + order)."""
    from lmms_scene.data.layered_vqa import SCHEDULES

    if not any(r["schedule"] == "full" for r in rows):
        return {}
    out: dict[str, Any] = {}
    families: dict[str, list] = {}
    for schedule in schedules:
        if schedule == "full":
            continue
        pairs = _paired(rows, schedule)
        if pairs:
            out[schedule] = _ratio(pairs, n_boot, seed)
            families.setdefault(SCHEDULES[schedule].family, []).extend(pairs)
    columns = {"text": ("question",), "visual": ("visual",), "layered": ("alignment", "order")}
    out["by_column"] = {
        c: _ratio([p for f in fams for p in families.get(f, [])], n_boot, seed)
        for c, fams in columns.items()
        if any(families.get(f) for f in fams)
    }
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
    out: dict[str, Any] = {
        "n_rows": len(rows),
        "n_duplicates": deduped.n_duplicates,
        "n_failed_conversations": sum(1 for r in rows if r.get("failure")),
        "grader": graders[0] if len(graders) == 1 else graders,
        "synonyms": sorted({r.get("synonyms", "") for r in rows}),
        "interval": {"method": "percentile bootstrap", "cluster": CLUSTER, "n_boot": n_boot, "seed": seed, "level": R.LEVEL},
        "overall": R.cell(rows, ACCURACY, CLUSTER, n_boot=n_boot, seed=seed),
        "by_schedule": R.breakdown(rows, ["schedule"], ACCURACY, CLUSTER, order=order, n_boot=n_boot, seed=seed),
        "by_type_schedule": R.breakdown(rows, ["question_type", "schedule"], {"accuracy": _f("correct")}, CLUSTER, order={"question_type": list(_types()), **order}, n_boot=n_boot, seed=seed),
        "retained": _retained(rows, schedules, n_boot, seed),
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
    out["by_length"] = R.breakdown(rows, ["delivery", "length_bin"], {"accuracy": _f("correct")}, CLUSTER, order={"delivery": ["one turn", "across turns"], "length_bin": list(LENGTH_BINS)}, n_boot=n_boot, seed=seed)
    out["by_depth"] = _loss_by(rows, "depth", ("concat-v", "oracle"), n_boot, seed)
    out["relational"] = _extra_loss(rows, ("concat-v", "oracle"), n_boot, seed)
    return out


def pooled_mean(values: Sequence[Any], sizes: Sequence[int], weight_by_size: bool = False) -> float | None:
    """Mean of subtask values (weighted by their sizes when asked), None values left out.

    >>> pooled_mean([0.5, None, 1.0], [10, 10, 30], weight_by_size=True)
    0.875
    """
    # a task's part of a group metric (a dict, see schedule_part) is not a value to average
    numeric = [(v, s) for v, s in zip(values, sizes) if isinstance(v, (int, float)) or v is None]
    pairs = [(float(v), (s if weight_by_size else 1)) for v, s in numeric if R.is_computed(v)]
    total = sum(w for _, w in pairs)
    return sum(v * w for v, w in pairs) / total if total else None


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


def retained_from_parts(parts: Sequence[Any]) -> float | None:
    """Retained accuracy of a group of one-schedule tasks: the mean over the fragmented
    schedules of accuracy(schedule) / accuracy(full), both over the same questions
    (every task runs every question; rows a grader could not grade are left out on each
    side). ``lmms-scene show`` pairs the questions one by one and adds intervals."""
    parts = [p for p in parts if isinstance(p, Mapping) and p.get("schedule") and p.get("n_graded")]
    full = next((p for p in parts if p["schedule"] == "full"), None)
    if full is None or not full["n_correct"]:
        return None
    base = full["n_correct"] / full["n_graded"]
    ratios = [(p["n_correct"] / p["n_graded"]) / base for p in parts if p["schedule"] != "full"]
    return sum(ratios) / len(ratios) if ratios else None


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
    """Repeated sampling (the task's ``repeats``): per schedule, over the repeats of each
    question, the mean score (aptitude), the 90th percentile and the 90th-minus-10th
    percentile spread (unreliability), averaged over questions (Laban et al. 2025,
    "LLMs Get Lost in Multi-Turn Conversation", section 3.3), scene-resampled."""
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
                        "aptitude": float(v.mean()), "p90": p90, "unreliability": p90 - p10})  # fmt: skip
    from lmms_scene.data.layered_vqa import SCHEDULES

    return R.breakdown(summary, ["schedule"], ["aptitude", "p90", "unreliability", "repeats"], CLUSTER, order={"schedule": list(SCHEDULES)}, n_boot=n_boot, seed=seed)


def _types():
    from lmms_scene.data.layered_vqa import QUESTION_TYPES

    return QUESTION_TYPES


# -- the LLM-judge path (after a run, on the recorded outputs) -------------------------------------


def judge_rows(
    rows: Sequence[Mapping[str, Any]],
    judges: Sequence[Any],
    *,
    model: str | None,
    model_args: str | Mapping[str, Any] | None,
    questions: Mapping[str, str] | None = None,
    clients: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Re-grade scored rows with a judge panel (:func:`lmms_scene.judges.panel`): each
    row gets ``judge`` (the consensus record) and ``correct`` from the majority, or
    ``correct=None`` (left out of accuracy, counted) when no judge gave a usable verdict.
    ``grader`` becomes ``llm_judge_majority``; the rule grade stays as ``rule_correct``."""
    from lmms_scene import judges as J

    out = []
    for row in rows:
        question = (questions or {}).get(row["question_id"], "")
        prediction = row.get("output", "")
        if row["schedule"] in ("all-lyr", "oracle"):
            prediction = parse_selection(prediction, 10**6)[1]
        prompt = J.grading_prompt(question or "(see the gold answer)", row["answer"], prediction or "(no answer)")
        verdict = J.panel(judges, prompt, model=model, model_args=model_args, clients=clients)
        new = dict(row)
        new["rule_correct"] = row.get("correct")
        new["correct"] = verdict.correct
        new["judge"] = verdict.to_dict()
        new["grader"] = "llm_judge_majority"
        if "joint" in new:
            new["joint"] = None if verdict.correct is None else bool(verdict.correct and new["exact"])
        if "grounded_correct" in new:
            new["grounded_correct"] = None if verdict.correct is None else bool(verdict.correct and new["grounded"])
        out.append(new)
    return out


def judge_summary(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Counts of judge outcomes over judged rows: usable verdicts, failed calls (timeouts,
    errors), unparsed replies, rows with no consensus, excluded self-judges."""
    judged = [r for r in rows if "judge" in r]
    return {
        "rows": len(judged),
        "no_consensus": sum(1 for r in judged if r["judge"]["correct"] is None),
        "failed_calls": sum(r["judge"]["failed"] for r in judged),
        "unparsed_replies": sum(r["judge"]["unparsed"] for r in judged),
        "self_judges_excluded": sorted({j for r in judged for j in r["judge"]["excluded"]}),
    }


def self_preference(runs: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, dict[str, float | None]]:
    """Figure 4: judge x judged model, the share of each judge's usable verdicts that
    are "correct" for each model's outputs (``runs``: model label -> judged rows)."""
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


# -- tables for `lmms-scene show` --------------------------------------------------------------------


def _fmt(cell: Mapping[str, Any] | None, key: str) -> str:
    from lmms_scene.results import with_interval

    if not cell or key not in cell:
        return "-"
    return with_interval(cell[key], (cell.get("ci95") or {}).get(key))


def _rows_of(result) -> list[dict[str, Any]]:
    rows = result.rows("layered_vqa_report") if result.samples else []
    return [dict(r) for r in rows]


def tables(results: Sequence[Any]) -> str:
    """Tables 1-8 (as far as the results allow) from Layered-VQA task results: one block
    per model, rows pooled over that model's Layered-VQA tasks (so the per-schedule tasks
    of one run combine into Table 1's retained columns)."""
    from lmms_scene.data.layered_vqa import SCHEDULES
    from lmms_scene.results import markdown_table, with_interval

    by_model: dict[str, list[dict[str, Any]]] = {}
    without_samples = []
    for res in results:
        rows = _rows_of(res)
        if not rows:
            without_samples.append(res.task)
            continue
        by_model.setdefault(res.label, []).extend(rows)
    parts = []
    for model, rows in by_model.items():
        rep = report(rows, n_boot=500)
        scheds = [s for s in SCHEDULES if s in rep["by_schedule"]]
        parts.append(f"### Layered-VQA: {model} (grader: {rep['grader']}; 95% intervals over scenes)")
        ret = rep.get("retained", {}).get("by_column", {})
        head = [*scheds, "retained Text", "retained Visual", "retained Layered"]
        line = [_fmt(rep["by_schedule"][s], "accuracy") for s in scheds]
        line += [with_interval(ret[c]["retained_accuracy"], ret[c]["ci95"]) if c in ret else "-" for c in ("text", "visual", "layered")]
        parts.append("Table 1: final-turn accuracy by schedule\n\n" + markdown_table(["model", *head], [[model, *line]]))
        if "evidence" in rep:
            ev_rows = []
            for s, cell in rep["evidence"].items():
                ev_rows.append([s, _fmt(rep["by_schedule"].get(s), "accuracy"), *(_fmt(cell, k) for k in SELECTION_METRICS)])
            full = _fmt(rep["by_schedule"].get("full"), "accuracy")
            parts.append(f"Table 2: evidence handed over (rgb = full: {full})\n\n" + markdown_table(["schedule", "accuracy", *SELECTION_METRICS], ev_rows))
        t3 = [[t, *(_fmt(cells.get(s), "accuracy") for s in scheds)] for t, cells in rep["by_type_schedule"].items()]
        parts.append("Table 3: accuracy by question type\n\n" + markdown_table(["question type", *scheds], t3))
        if "grounding" in rep:
            g = rep["grounding"]
            bins = g["first_attempt_bins"]
            parts.append(
                "Table 4: first answer attempt (accuracy per position bin; commit share overall)\n\n"
                + markdown_table([*POSITION_BINS, "commit share"], [[*(_fmt(bins.get(b), "accuracy") for b in POSITION_BINS), _fmt(g["overall"], "commit_share")]])
            )
            fam = g["by_family"]
            parts.append(
                "Table 6: ungrounded share by family; accuracy as scored vs grounded only\n\n"
                + markdown_table(
                    ["visual", "alignment", "order", "question", "accuracy as scored", "grounded only"],
                    [[*(_fmt(fam.get(f), "ungrounded_share") for f in ("visual", "alignment", "order", "question")), _fmt(g["overall"], "accuracy"), _fmt(g["overall"], "grounded_only_accuracy")]],
                )
            )
        if "reliability" in rep:
            rel = rep["reliability"]
            parts.append(
                "Repeated sampling: aptitude (mean), 90th percentile, unreliability (P90 - P10) per schedule\n\n"
                + markdown_table(["schedule", "aptitude", "p90", "unreliability", "repeats"], [[s, _fmt(c, "aptitude"), _fmt(c, "p90"), _fmt(c, "unreliability"), _num(c.get("repeats"))] for s, c in rel.items()])
            )
        bl = rep["by_length"]
        parts.append(
            "Table 5: accuracy by evidence length and delivery\n\n"
            + markdown_table(["delivery", *LENGTH_BINS], [[d, *(_fmt(cells.get(b), "accuracy") for b in LENGTH_BINS)] for d, cells in bl.items()])
        )
        t7 = [[d, e["questions"], _fmt(e.get("full"), "accuracy"), _fmt(e.get("delta_concat-v"), "loss"), _fmt(e.get("delta_oracle"), "loss")] for d, e in rep["by_depth"].items()]
        parts.append("Table 7: loss by scene depth (layers)\n\n" + markdown_table(["layers", "questions", "full", "delta concat-v", "delta oracle"], t7))
        t8 = []
        for cond, e in rep["relational"].items():
            ci = e.get("ci95")
            t8.append([cond, _num(e["relational"]), _num(e["single_object"]), _num(e["extra_loss"]), f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "-"])
        if t8:
            parts.append("Table 8: relational extra loss\n\n" + markdown_table(["condition", "relational", "single-object", "extra loss", "95% CI"], t8))
    if without_samples:
        parts.append("Layered-VQA tasks without logged samples (run with --log_samples): " + ", ".join(sorted(without_samples)))
    return "\n\n".join(parts) if parts else "No Layered-VQA results."


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"
