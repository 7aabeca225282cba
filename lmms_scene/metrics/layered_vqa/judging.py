"""Layered-VQA's LLM-judge path, after a run, on the recorded outputs: several judges
through :mod:`lmms_scene.judges`, majority vote (:func:`judge_rows`), a judge never
grading its own model; judge consensus and self-preference (Figure 4).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lmms_scene import judges as J
from lmms_scene.metrics.layered_vqa.aggregation import expand_repeats
from lmms_scene.metrics.layered_vqa.scoring import parse_selection
from lmms_scene.results import markdown_table

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
    flat = [dict(r) for r in expand_repeats(rows)]
    missing = [r["question_id"] for r in flat if not r.get("question") and not (questions or {}).get(r["question_id"])]
    if missing:
        raise ValueError(
            f"judge_rows: no question text for {len(missing)} rows (first: {missing[0]!r}); the rows carry none "
            "and none was given: pass the run's own data (questions=, --data)"
        )
    differ = [
        r["question_id"]
        for r in flat
        if r.get("question") and (questions or {}).get(r["question_id"], r["question"]) != r["question"]
    ]
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
    found = {
        (reply["judge"], model)
        for model, rows in runs.items()
        for row in rows
        for reply in row.get("judge", {}).get("replies", [])
        if reply.get("self")
    }
    return sorted(found)


def self_preference_table(matrix: Mapping[str, Mapping[str, float | None]], cells: Sequence[tuple[str, str]]) -> str:
    """Figure 4 as a Markdown table: rows judges, columns judged models, the share judged
    correct; a model judging its own outputs in [brackets] (the paper's boxed cells)."""
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
