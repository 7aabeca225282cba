"""lmms-eval wiring for ToyBench: the hooks only (rows in toybench.data, scores in toybench.scoring)."""

from __future__ import annotations

from lmms_scene.data import recheck
from lmms_scene.harness import guarded_aggregation, returns_dict
from toybench import data, scoring


def process_docs(dataset):
    return data.ensure_schema(dataset)


def doc_to_visual(doc):
    if recheck.problem_of(doc) or doc.get("image") is None:
        return [recheck.stand_in_visual()]
    return [doc["image"].convert("RGB")]


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return recheck.UNUSABLE_PROMPT if recheck.problem_of(doc) else doc["question"]


def process_results(doc, results):
    output = results[0] if isinstance(results, (list, tuple)) and results else results or None
    row = scoring.score_doc(doc, output)
    return {"accuracy": row, "toybench_report": row}


@guarded_aggregation
def accuracy(rows):
    return scoring.report(rows)["model"]["summary"].get("accuracy")


@guarded_aggregation
@returns_dict
def toybench_report(rows):
    return scoring.report(rows)
