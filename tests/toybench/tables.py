"""ToyBench's results module (:class:`lmms_scene.contract.ResultsModule`): what ``show``,
``report``, submissions and the leaderboard read from its results."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from lmms_scene.metrics import rows as rows_lib
from lmms_scene.report.tables import Run, Table, View, row_label, unscored_note, value_of
from lmms_scene.results import stored_report
from toybench import scoring

REPORT_KEY = "toybench_report"
ITEM_FIELDS = scoring.ITEM_FIELDS
DATA_FIELDS = scoring.DATA_FIELDS
VERIFY_FIELDS: tuple[str, ...] = ("item_id", "question", "answer", "output", "read", "correct", "scored")
ROW_ID_FIELDS: tuple[str, ...] = ("item_id",)
VIEW_FIELDS: tuple[str, ...] = ()
ROW_TYPES: dict[str, Any] = {
    "item_id": "str",
    "question": "str",
    "answer": ("yes", "no"),
    "output": "str",
    "read": lambda v: v in (None, "yes", "no"),
    "correct": "01?",
    "scored": "bool",
}


def identity(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    return rows_lib.dataset_identity(rows, ITEM_FIELDS, DATA_FIELDS)


def report_of(result: Any) -> Mapping[str, Any] | None:
    return stored_report(result, REPORT_KEY, "model", rebuild=scoring.report)


def summary(report: Mapping[str, Any]) -> Mapping[str, Any] | None:
    cell = (report.get("model") or {}).get("summary")
    return dict(cell) if isinstance(cell, Mapping) else None


def failures(report: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    c = (report.get("model") or {}).get("counts") or {}
    counts = {"n": c.get("n"), "n_empty": c.get("n_empty"), "n_unscored": report.get("n_unscored", 0)}
    reasons = [f"{counts['n_unscored']} rows could not be scored"] if counts["n_unscored"] else []
    return counts, reasons


def verification_rows(result: Any) -> list[dict[str, Any]]:
    return [{k: r.get(k) for k in VERIFY_FIELDS} for r in result.rows(REPORT_KEY)]


def recompute(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    rep = scoring.report(rows)
    return {"cell": rep["model"]["summary"], "dataset": rep["dataset"]}


def row_failures(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    return {
        "n_empty": sum(1 for r in rows if r.get("scored") and not str(r.get("output") or "").strip()),
        "n_unscored": sum(1 for r in rows if not r.get("scored")),
    }


def expected_views(task: str, rows: Sequence[Mapping[str, Any]]) -> set[tuple[Any, ...]]:
    return {()}


def rederive(
    rows: Sequence[Mapping[str, Any]], provenance: Mapping[str, Any] | None = None
) -> tuple[list[str], list[str]]:
    """Each scored row's reading and verdict recomputed from its output and gold."""
    problems = []
    for r in rows:
        if not r.get("scored"):
            continue
        read = scoring.read_yes_no(str(r.get("output") or ""))
        correct = float(read == r.get("answer"))
        if read != r.get("read") or correct != r.get("correct"):
            problems.append(
                f"{row_label(r, ROW_ID_FIELDS)}: read {r.get('read')!r} / correct {r.get('correct')!r} "
                f"but its output gives {read!r} / {correct!r}"
            )
    return problems, [f"ToyBench re-read with {scoring.READER}"]


def view(results: Sequence[Any], labels: Mapping[int, str]) -> View:
    """One table: accuracy [95% CI over questions] per (model, task), with the counts."""
    out = View("toybench", "ToyBench")
    rows = []
    for r in results:
        rep = report_of(r)
        if rep is None:
            out.skipped.append((str(r.source), f"task {r.task}: no '{REPORT_KEY}' dict in its metrics"))
            continue
        label = labels[id(r)]
        out.used.append(r)
        counts = rep["model"].get("counts") or {}
        rows.append(
            [f"{label} ({r.task})", value_of(rep["model"].get("summary"), "accuracy"), counts.get("n_unreadable")]
        )
        if note := unscored_note(f"{label} ({r.task})", rep.get("n_unscored"), rep.get("unscored"), ROW_ID_FIELDS):
            out.notes.append(note)
        prov = rep["model"].get("provenance") or {}
        out.runs.append(Run.of(r, label, [f"reader {prov.get('reader')}"]))
    if rows:
        out.tables.append(
            Table(
                "ToyBench: yes/no accuracy (mean [95% CI over questions])", ["Method", "accuracy", "unreadable"], rows
            )
        )
    else:
        out.notes.append("No ToyBench report in these results.")
    return out
