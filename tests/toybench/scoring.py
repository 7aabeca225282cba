"""ToyBench's scoring: a yes/no reader, one scored row per question, the report.

The reader is the toy's own: lmms-scene has no shared answer-reader module yet (issue 34's
shared readers are another branch); when it lands, :func:`read_yes_no` is the one to replace.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from lmms_scene.data import recheck
from lmms_scene.metrics import rows as rows_lib
from lmms_scene.metrics.outputs import read_output

ITEM_FIELDS: tuple[str, ...] = ("item_id",)
DATA_FIELDS: tuple[str, ...] = ("question", "answer")
READER = "toybench-yes-no-1"
_WORDS = re.compile(r"[a-z']+")
_YES, _NO = frozenset({"yes", "yeah", "yep", "true"}), frozenset({"no", "nope", "false"})


def read_yes_no(text: str) -> str | None:
    """ "yes" or "no" when the reply's first word says so, else None (unreadable: counted wrong
    and counted apart, never guessed). "Yes, it is red." -> yes; "No." -> no; "It is red." -> None."""
    words = _WORDS.findall(str(text).lower())
    if not words:
        return None
    if words[0] in _YES:
        return "yes"
    if words[0] in _NO:
        return "no"
    return None


def unscored_row(doc: Mapping[str, Any], reason: str, output: Any = None) -> dict[str, Any]:
    """A row recorded unscored with its reason."""
    return {
        "item_id": str(doc.get("item_id")),
        "question": str(doc.get("question") or ""),
        "answer": str(doc.get("answer") or ""),
        "output": output if isinstance(output, str) else "",
        "read": None,
        "correct": None,
        "scored": False,
        "unscored_reason": reason,
    }


def score_doc(doc: Mapping[str, Any], output: Any) -> dict[str, Any]:
    """One scored row: the reply read as yes/no and compared with the gold answer. A row
    that failed the load-time check, or an output that is not one text, is unscored."""
    problem = recheck.problem_of(doc)
    if problem:
        return unscored_row(doc, f"the row failed the load-time check: {problem}")
    out = read_output(output)
    if out.problem is not None or out.text is None:
        return unscored_row(doc, out.problem or "no model output for this doc")
    text = out.text
    read = read_yes_no(text)
    return {
        "item_id": str(doc["item_id"]),
        "question": doc["question"],
        "answer": doc["answer"],
        "output": text,
        "read": read,
        "correct": float(read == doc["answer"]),
        "scored": True,
    }


def provenance() -> dict[str, Any]:
    return {"reader": READER, "metric": "accuracy: the share of questions whose reply reads as the gold yes/no"}


def report(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The report the task writes: the headline cell (accuracy, interval over questions),
    counts, provenance, the data's identity, the unscored rows named."""
    unique = rows_lib.dedupe(rows, ITEM_FIELDS).rows
    scored = [r for r in unique if r.get("scored")]
    cell = rows_lib.cell(scored, ["correct"], cluster="item_id")
    summary = {"n": cell["n"]}
    if "correct" in cell:
        summary["accuracy"] = cell["correct"]
        summary["ci95"] = {"accuracy": (cell.get("ci95") or {}).get("correct")}
    counts = {
        "n": len(unique),
        "n_scored": len(scored),
        "n_empty": sum(1 for r in scored if not str(r.get("output") or "").strip()),
        "n_unreadable": sum(1 for r in scored if r.get("read") is None),
    }
    return {
        "model": {"summary": summary, "counts": counts, "provenance": provenance()},
        "dataset": rows_lib.dataset_identity(unique, ITEM_FIELDS, DATA_FIELDS),
        **rows_lib.unscored_summary(unique, ITEM_FIELDS),
    }
