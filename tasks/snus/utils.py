"""lmms-eval wiring for SNUS. Thin on purpose: rows and scores live in
:mod:`lmms_scene.data.snus` and :mod:`lmms_scene.metrics.snus.scoring`. Importing this
loads no model."""

from __future__ import annotations

import functools

from lmms_scene import benchmarks
from lmms_scene.data import recheck, snus
from lmms_scene.harness import guarded_aggregation, returns_dict
from lmms_scene.metrics import clip
from lmms_scene.metrics.snus import scoring as report
from lmms_scene.prompts import render

DEFAULT_TEMPLATE = "snus/default.jinja"


def process_docs(dataset):
    # everything the metrics need is resolved here, before the model runs
    report.preflight()
    return snus.ensure_schema(dataset)


def process_docs_sample(dataset):
    # the embedded sample runs anywhere: a CLIP checkpoint not at hand (and not chosen) is
    # recorded as not computed, with the command that fetches it (clip.for_sample_run)
    report.preflight(clip_metrics=clip.for_sample_run() is None)
    return snus.ensure_schema(dataset)


def doc_to_visual(doc):
    # a row that failed the load-time check is a stand-in: the model sees a grey square
    # and process_results records the row unscored with its reason
    if recheck.problem_of(doc) or doc.get("image") is None:
        return [recheck.stand_in_visual()]
    try:
        return [doc["image"].convert("RGB")]
    except Exception as exc:  # never a mid-generation exception: process_results records why
        from loguru import logger  # deferred: loguru is heavy to import

        logger.warning(
            f"lmms-scene: SNUS {doc.get('image_id', '?')}: image cannot be shown ({type(exc).__name__}: {exc})"
        )
        return [recheck.stand_in_visual()]


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    if recheck.problem_of(doc):
        return recheck.UNUSABLE_PROMPT
    return render((lmms_eval_specific_kwargs or {}).get("template", DEFAULT_TEMPLATE))


def doc_to_target(doc):
    return doc["caption"]


def prescore(pairs):
    # batch scoring of this process's answers after generation (the harness hook)
    return report.prescore(pairs)


def process_results(doc, results):
    # never raises: an output that is not one text, a row that failed the load-time
    # check or a scoring failure is recorded unscored with its reason
    output = results[0] if isinstance(results, (list, tuple)) and results else results or None
    row = report.doc_row(doc, output)
    return {key: row for key in METRICS}


#: the keys ``process_results`` returns: the task's metric list as the registry declares it
#: (lmms_scene/benchmarks.py; the task YAML's ``metric_list`` is generated from the same)
METRICS: tuple[str, ...] = tuple(m.name for m in benchmarks.get("snus").task_metrics())
#: the ones a number is read for from the one corpus report (every metric but the report)
SCORE_METRICS: tuple[str, ...] = tuple(m.name for m in benchmarks.get("snus").task_metrics() if not m.report)


@functools.cache
def _aggregation(key):
    def aggregate(items):
        return report.metric_value(items, key)

    aggregate.__name__ = key
    return guarded_aggregation(aggregate)


def __getattr__(name):
    # PEP 562: each declared score's aggregation (``!function lmms_scene.tasks.snus.utils.CESG``
    # in the generated metric_list) is the one reader of the corpus report bound to its key
    if name in SCORE_METRICS:
        return _aggregation(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r} (metrics: {', '.join(METRICS)})")


@guarded_aggregation
@returns_dict
def snus_report(items):
    """Everything: per-metric means with intervals, counts, provenance, the AC baseline."""
    rep = report.report_of(items)
    out = {
        "model": {k: v for k, v in rep["model"].items() if k != "rows"},
        "ac": rep["ac"],
        "n": rep["n"],
        "dataset": rep["dataset"],
        "interval": rep["interval"],
    }
    # the rows that could not be scored: counted, the first ones named with their reasons
    out.update({k: rep[k] for k in ("n_rows", "n_unscored", "unscored") if k in rep})
    return out
