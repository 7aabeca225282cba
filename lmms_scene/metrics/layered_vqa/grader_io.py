"""Answers files for the rule grader (``lmms-scene layered-vqa grade``): reading one, every
line checked (an error names the file, the line, the field and the value), and grading
every line with :func:`lmms_scene.metrics.layered_vqa.grader.grade`, with the agreement
with the lines' own labels where they carry one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lmms_scene.data.layered_vqa.schema import QUESTION_TYPES
from lmms_scene.files import iter_jsonl
from lmms_scene.metrics.layered_vqa import grader
from lmms_scene.metrics.layered_vqa.grader import VERDICTS

#: fields of one line of an answers file: required, then optional
ANSWER_FIELDS = ("id", "gold", "question_type", "answer")
OPTIONAL_FIELDS = ("question", "label")


def read_answers(path) -> list[dict[str, Any]]:
    """The lines of an answers file (JSON lines: ``id``, ``gold``, ``question_type``,
    ``answer``; optional ``question`` and ``label``, one of :data:`~lmms_scene.metrics.layered_vqa.grader.VERDICTS`), checked:
    an error names the file, the line, the field and the value."""
    out, seen = [], {}
    for line, rec in iter_jsonl(path):
        where = f"{path} line {line}"
        for name in ANSWER_FIELDS:
            if name not in rec:
                raise ValueError(f"{where}: missing field {name!r} (each line needs {', '.join(ANSWER_FIELDS)})")
        if not isinstance(rec["id"], (str, int)) or isinstance(rec["id"], bool) or str(rec["id"]) == "":
            raise ValueError(f"{where}: id: expected a non-empty string or integer, got {rec['id']!r}")
        if str(rec["id"]) in seen:
            raise ValueError(f"{where}: id: {rec['id']!r} repeats line {seen[str(rec['id'])]}")
        seen[str(rec["id"])] = line
        if not isinstance(rec["gold"], str) or not rec["gold"].strip():
            raise ValueError(f"{where}: gold: expected a non-empty string, got {rec['gold']!r}")
        if rec["question_type"] not in QUESTION_TYPES:
            raise ValueError(
                f"{where}: question_type: {rec['question_type']!r} is not one of {', '.join(QUESTION_TYPES)}"
            )
        if not isinstance(rec["answer"], str):
            raise ValueError(
                f'{where}: answer: expected a string ("" for an empty reply), got {type(rec["answer"]).__name__} {rec["answer"]!r}'
            )
        if rec.get("question") is not None and not isinstance(rec["question"], str):
            raise ValueError(f"{where}: question: expected a string, got {rec['question']!r}")
        if rec.get("label") is not None and rec["label"] not in VERDICTS:
            raise ValueError(f"{where}: label: {rec['label']!r} is not one of {', '.join(VERDICTS)}")
        out.append(rec)
    if not out:
        raise ValueError(f"{path}: no answers (one JSON object a line: {', '.join(ANSWER_FIELDS)})")
    return out


def grade_answers(
    records: Sequence[dict[str, Any]], lemma_names: Callable[[str], set[str]] | None = None
) -> dict[str, Any]:
    """Every record graded, and, where records carry a ``label``, the agreement with it
    (overall, and per label as a confusion count)."""
    rows = []
    for rec in records:
        g = grader.grade(rec["answer"], rec["gold"], rec["question_type"], rec.get("question"), lemma_names)
        row = {"id": rec["id"], **g.to_dict()}
        if len(rec["answer"]) > grader.MAX_OUTPUT_CHARS:
            row["answer_cut"] = f"graded on its first {grader.MAX_OUTPUT_CHARS} of {len(rec['answer'])} characters"
        if rec.get("label") is not None:
            row["label"] = rec["label"]
            row["agrees"] = g.verdict == rec["label"]
        rows.append(row)
    counts = {v: sum(1 for r in rows if r["verdict"] == v) for v in VERDICTS}
    summary: dict[str, Any] = {"n": len(rows), "verdicts": counts}
    labelled = [r for r in rows if "label" in r]
    if labelled:
        summary["labelled"] = len(labelled)
        summary["agreement"] = sum(r["agrees"] for r in labelled) / len(labelled)
        summary["confusion"] = {
            lab: {v: sum(1 for r in labelled if r["label"] == lab and r["verdict"] == v) for v in VERDICTS}
            for lab in VERDICTS
        }
    return {"grades": rows, "summary": summary}
