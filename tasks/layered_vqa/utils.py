"""lmms-eval wiring for Layered-VQA. Thin on purpose: delivery and the multi-round
protocol live in :mod:`lmms_scene.data.layered_vqa`, scoring in
:mod:`lmms_scene.metrics.vqa`. Importing this loads no model and reads no data."""

from __future__ import annotations

from lmms_scene.data import layered_vqa as L
from lmms_scene.harness import guarded_aggregation, returns_dict, round_outputs
from lmms_scene.metrics import rows as R
from lmms_scene.metrics import vqa


def _docs(dataset, schedules):
    # resolve the grader now (before the model runs), so its synonym source is fixed
    _grader()
    return L.schedule_docs(dataset, schedules)


def _grader():
    from lmms_scene.cache import cached

    return cached(("layered_vqa", "grader"), vqa.default_lemma_names)


def process_docs_sample(dataset):
    """The embedded sample: every item under every schedule (item-major)."""
    return _docs(dataset, list(L.SCHEDULES))


def _make(schedule):
    def process_docs(dataset):
        return _docs(dataset, [schedule])

    process_docs.__name__ = process_docs.__qualname__ = "process_docs_" + schedule.replace("-", "_")
    process_docs.__doc__ = f"Every item under the {schedule!r} schedule."
    return process_docs


for _schedule in L.SCHEDULES:
    _fn = _make(_schedule)
    globals()[_fn.__name__] = _fn
del _schedule, _fn


def doc_to_visual(doc):
    return L.first_visuals(doc)


def doc_to_text(doc, lmms_eval_specific_kwargs=None, previous_output=None, round_idx=None, previous_round_info=None):
    return L.simple_round(doc, previous_output, round_idx)


def doc_to_messages(doc, lmms_eval_specific_kwargs=None, previous_output=None, round_idx=None, previous_round_info=None):
    return L.chat_messages(doc, previous_output, round_idx)


def doc_to_target(doc):
    return doc["answer"]


def process_results(doc, results):
    lemma_names, synonyms = _grader()
    turns = L.turns_of(doc)
    rows = [
        vqa.score_row(doc, round_outputs(conversation), turns, lemma_names=lemma_names, synonyms=synonyms, repeat=k)
        for k, conversation in enumerate(L.conversations(results))
    ]
    row = dict(rows[0])
    if len(rows) > 1:  # --repeats N: the other samples ride along (metrics expand them)
        row["repeat_rows"] = rows[1:]
    return {key: row for key in METRIC_KEYS}


METRIC_KEYS = ("accuracy", "empty_output_rate", "retained_accuracy", "layered_vqa_report")


def _report(rows):
    # the gold answer is part of the corpus: two datasets with the same ids are two corpora
    return R.corpus_value("layered_vqa.report", rows, vqa.report, id_fields=L.ID_FIELDS, content_fields=("output", "answer"))


@guarded_aggregation
def accuracy(rows):
    return _report(rows)["overall"].get("accuracy")


@guarded_aggregation
def empty_output_rate(rows):
    return _report(rows)["overall"].get("empty_output_rate")


@guarded_aggregation
def retained_accuracy(rows):
    """Mean retained accuracy over the fragmented schedules present with ``full``.

    A one-schedule task (``layered_vqa_<schedule>``) cannot compute it alone: it returns
    its part instead (schedule, correct and scored counts), and the ``layered_vqa`` group
    combines the parts of its 16 tasks into the number (:func:`group_retained`)."""
    report = _report(rows)
    retained = report.get("retained", {})
    values = [v["retained_accuracy"] for k, v in retained.items() if k != "by_column" and v.get("retained_accuracy") is not None]
    if values:
        return sum(values) / len(values)
    return vqa.schedule_part(R.dedupe(vqa.expand_repeats(rows), L.ID_FIELDS).rows)


def group_retained(metrics, sizes, weight_by_size=False):
    """The group's retained accuracy from its tasks' parts (:func:`retained_accuracy`)."""
    return vqa.retained_from_parts(metrics)


@guarded_aggregation
@returns_dict
def layered_vqa_report(rows):
    from lmms_scene.provenance import scorer

    rep = dict(_report(rows))
    _, synonyms = _grader()
    rep["scorer"] = scorer("layered_vqa", grader="rule", grade="lmms_scene.metrics.vqa.grade", synonyms=synonyms)
    return rep


def group_mean(metrics, sizes, weight_by_size=False):
    """The group's aggregation (``aggregate_metric_list``). lmms-eval 0.7.3 applies a
    group metric to every subtask key *containing* its name, so ``accuracy`` also pools
    ``retained_accuracy``, which a one-schedule task leaves ``null``; the harness's own
    mean then crashes on None. This mean leaves None out (all None: None)."""
    return vqa.pooled_mean(metrics, sizes, weight_by_size)
