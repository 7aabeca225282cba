"""lmms-eval wiring for Layered-VQA. Thin on purpose: delivery and the multi-round
protocol live in :mod:`lmms_scene.data.layered_vqa` (``delivery``, ``rounds``, ``views``),
scoring in :mod:`lmms_scene.metrics.layered_vqa`. Importing this loads no model and reads no data."""

from __future__ import annotations

import functools

from lmms_scene import benchmarks
from lmms_scene.cache import cached
from lmms_scene.data import recheck
from lmms_scene.data.layered_vqa.delivery import SCHEDULES, schedule_of_task
from lmms_scene.data.layered_vqa.rounds import (
    chat_messages,
    conversations,
    first_visuals,
    simple_round,
    turns_of,
)
from lmms_scene.data.layered_vqa.schedules import GROUP
from lmms_scene.data.layered_vqa.schema import ID_FIELDS
from lmms_scene.data.layered_vqa.views import schedule_docs
from lmms_scene.harness import guarded_aggregation, returns_dict, round_outputs
from lmms_scene.metrics import rows as R
from lmms_scene.metrics.layered_vqa import aggregation, scoring
from lmms_scene.provenance import scorer


def _docs(dataset, schedules):
    # resolve the grader now (before the model runs), so its synonym source is fixed
    _grader()
    return schedule_docs(dataset, schedules)


def _grader():
    return cached(("layered_vqa", "grader"), scoring.default_lemma_names)


def process_docs_sample(dataset):
    """The embedded sample: every item under every schedule (item-major)."""
    return _docs(dataset, list(SCHEDULES))


def docs_under(dataset, schedule):
    """Every item under one schedule (``schedule``: a name in ``SCHEDULES``)."""
    return _docs(dataset, [schedule])


#: the prefix of the per-schedule ``process_docs`` a generated YAML names
#: (``!function lmms_scene.tasks.layered_vqa.utils.process_docs_<schedule>``; see
#: _generate_config.py): the schedule is in the name, resolved by __getattr__ below
PROCESS_DOCS_PREFIX = "process_docs_"


@functools.cache
def _bound(schedule, name):
    def process_docs(dataset):
        return docs_under(dataset, schedule)

    # the name the YAML gives (the results file's config shows it)
    process_docs.__name__ = process_docs.__qualname__ = name
    process_docs.__doc__ = f"Every item under the {schedule!r} schedule."
    return process_docs


def __getattr__(name):
    # PEP 562: `process_docs_<schedule>` is docs_under bound to that schedule, so
    # the harness's `!function` (a plain getattr on this module) finds one per schedule
    # without a function per schedule written here or generated into the namespace
    if name.startswith(PROCESS_DOCS_PREFIX):
        schedule = schedule_of_task(GROUP + "_" + name.removeprefix(PROCESS_DOCS_PREFIX))
        if schedule is not None:
            return _bound(schedule, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r} (schedules: {', '.join(SCHEDULES)})")


# Never a mid-generation exception: a doc that cannot be delivered (the load-time check
# makes this a last guard) gets a stand-in image, or its conversation ends here; the
# scored row then says the conversation stopped early.


def _log(doc, exc):
    from loguru import logger  # deferred: loguru is heavy to import

    logger.warning(
        f"lmms-scene: Layered-VQA {doc.get('question_id', '?')}: cannot be delivered "
        f"({type(exc).__name__}: {exc}); the row is recorded unscored"
    )


def doc_to_visual(doc):
    try:
        return first_visuals(doc)
    except Exception as exc:
        _log(doc, exc)
        return [recheck.stand_in_visual()]


def doc_to_text(doc, lmms_eval_specific_kwargs=None, previous_output=None, round_idx=None, previous_round_info=None):
    try:
        return simple_round(doc, previous_output, round_idx)
    except Exception as exc:
        _log(doc, exc)
        if round_idx is None:
            return recheck.UNUSABLE_PROMPT
        return None, None, True, [str(o) for o in (previous_output or [])], {"round": round_idx, "error": str(exc)}


def doc_to_messages(
    doc, lmms_eval_specific_kwargs=None, previous_output=None, round_idx=None, previous_round_info=None
):
    try:
        return chat_messages(doc, previous_output, round_idx)
    except Exception as exc:
        _log(doc, exc)
        if round_idx is None:
            return [{"role": "user", "content": [{"type": "text", "text": recheck.UNUSABLE_PROMPT}]}]
        return None, True, [str(o) for o in (previous_output or [])], {"round": round_idx, "error": str(exc)}


def doc_to_target(doc):
    return doc["answer"]


def process_results(doc, results):
    # never raises: a conversation that cannot be read or scored is recorded unscored
    # with its reason (one bad row must not lose the run)
    lemma_names, synonyms = _grader()
    try:
        turns = turns_of(doc)
        replies = conversations(results)
    except Exception as exc:
        rows = [scoring.unscored_row(doc, f"{type(exc).__name__}: {exc}", results)]
    else:
        rows = []
        for k, conversation in enumerate(replies):
            try:
                rows.append(
                    scoring.score_row(
                        doc, round_outputs(conversation), turns, lemma_names=lemma_names, synonyms=synonyms, repeat=k
                    )
                )
            except Exception as exc:
                rows.append(scoring.unscored_row(doc, f"{type(exc).__name__}: {exc}", conversation, repeat=k))
    row = dict(rows[0])
    if len(rows) > 1:  # --repeats N: the other samples ride along (metrics expand them)
        row["repeat_rows"] = rows[1:]
    return {key: row for key in METRIC_KEYS}


#: the keys ``process_results`` returns: the task's metric list as the registry declares it
#: (lmms_scene/benchmarks.py; the task YAML's ``metric_list`` is generated from the same)
METRIC_KEYS: tuple[str, ...] = tuple(m.name for m in benchmarks.get(GROUP).task_metrics())


def _report(rows):
    # the gold answer is part of the corpus: two datasets with the same ids are two corpora
    return R.corpus_value(
        "layered_vqa.report", rows, aggregation.report, id_fields=ID_FIELDS, content_fields=("output", "answer")
    )


@guarded_aggregation
def accuracy(rows):
    return _report(rows)["overall"].get("accuracy")


@guarded_aggregation
def empty_output_rate(rows):
    return _report(rows)["overall"].get("empty_output_rate")


@guarded_aggregation
def cannot_tell_rate(rows):
    """Share of final replies the rule grader could not read an answer from (counted as not right)."""
    return _report(rows)["overall"].get("cannot_tell_rate")


def _retained(column):
    def aggregate(rows):
        entry = _report(rows).get("retained", {}).get("by_column", {}).get(column)
        if entry is not None and entry.get("complete"):
            return entry["retained_accuracy"]
        return aggregation.schedule_part(R.dedupe(aggregation.expand_repeats(rows), ID_FIELDS).rows)

    aggregate.__name__ = aggregate.__qualname__ = f"retained_{column}"
    aggregate.__doc__ = (
        f"Table 1's retained accuracy ({column}): its schedules' mean accuracy over ``full``'s. A "
        "one-schedule task (``layered_vqa_<schedule>``) cannot compute it alone: it returns its part "
        "(schedule, correct and graded counts), which the ``layered_vqa`` group combines."
    )
    return guarded_aggregation(aggregate)


def _group_retained(column):
    def combine(metrics, sizes, weight_by_size=False):
        return aggregation.retained_from_parts(metrics, column)

    combine.__name__ = combine.__qualname__ = f"group_retained_{column}"
    combine.__doc__ = f"The group's retained accuracy ({column}) from its tasks' parts."
    return combine


retained_text, retained_visual, retained_layered = (_retained(c) for c in ("text", "visual", "layered"))
group_retained_text, group_retained_visual, group_retained_layered = (
    _group_retained(c) for c in ("text", "visual", "layered")
)


@guarded_aggregation
@returns_dict
def layered_vqa_report(rows):
    rep = dict(_report(rows))
    _, synonyms = _grader()
    rep["scorer"] = scorer(
        "layered_vqa",
        grader="rule",
        grade="lmms_scene.metrics.layered_vqa.grader.grade",
        grader_version=scoring.GRADER_VERSION,
        synonyms=synonyms,
    )
    return rep
