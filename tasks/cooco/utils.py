"""lmms-eval wiring for COOCO. Thin on purpose: the logic lives in
:mod:`lmms_scene.data.cooco` (rows, images, prompts) and
:mod:`lmms_scene.metrics.cooco.scoring` (scores). Importing this loads no model."""

from __future__ import annotations

from lmms_scene import settings
from lmms_scene.data import cooco, recheck
from lmms_scene.harness import guarded_aggregation, returns_dict
from lmms_scene.metrics import clip
from lmms_scene.metrics.cooco import scoring
from lmms_scene.prompts import render

DEFAULT_TEMPLATE = "cooco/default.jinja"


def _options() -> tuple[bool, str]:
    """(include clean images, reading), read once and checked."""
    current = settings.current()
    include_clean = cooco.clean_option(current.cooco_clean)
    return include_clean, cooco.reading_option(current.cooco_reading, include_clean)


def process_docs(dataset, _sample: bool = False):
    # the harness builds the docs before generating: a missing CLIP, an unknown hub
    # layout or a bad LMMS_SCENE_COOCO_CLEAN / LMMS_SCENE_COOCO_READING stops the run here
    include_clean, reading = _options()
    _require(_sample)
    return cooco.naming_docs(cooco.ensure_schema(dataset), include_clean=include_clean, reading=reading)


def process_docs_noise(dataset, _sample: bool = False):
    include_clean, reading = _options()
    _require(_sample)
    return cooco.noise_grid_docs(cooco.ensure_schema(dataset), include_clean=include_clean, reading=reading)


def _require(sample: bool) -> None:
    # the embedded sample runs anywhere: a CLIP checkpoint not at hand (and not chosen) is
    # recorded as not computed, with the command that fetches it (clip.for_sample_run)
    if sample and clip.for_sample_run() is not None:
        return
    scoring.require_metrics()


def process_docs_sample(dataset):
    return process_docs(dataset, _sample=True)


def process_docs_noise_sample(dataset):
    return process_docs_noise(dataset, _sample=True)


def doc_to_visual(doc):
    # a row that failed the load-time check is a stand-in: the model sees a grey square
    # and process_results records the row unscored with its reason
    if recheck.problem_of(doc):
        return [recheck.stand_in_visual()]
    try:
        return [cooco.visual(doc)]
    except Exception as exc:  # never a mid-generation exception: process_results records why
        _log_unusable(doc, exc)
        return [recheck.stand_in_visual()]


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    template = (lmms_eval_specific_kwargs or {}).get("template", DEFAULT_TEMPLATE)
    if recheck.problem_of(doc):
        return recheck.UNUSABLE_PROMPT
    try:
        context = cooco.prompt_context(doc)
    except Exception as exc:  # never a mid-generation exception: process_results records why
        _log_unusable(doc, exc)
        return recheck.UNUSABLE_PROMPT
    return render(template, **context)


def _log_unusable(doc, exc):
    from loguru import logger  # deferred: loguru is heavy to import

    logger.warning(
        f"lmms-scene: COOCO {doc.get('image_id', '?')}: cannot be shown ({type(exc).__name__}: {exc}); "
        "the model gets a stand-in and the row is recorded unscored"
    )


def doc_to_target(doc):
    return doc["gold_label"]


def process_results(doc, results):
    # never raises for a bad answer, row or image: such a row is recorded with its reason
    output = results[0] if isinstance(results, (list, tuple)) and results else results or None
    return scoring.metric_entries(scoring.score_doc(doc, output))


def prescore(pairs):
    """(doc, answer) pairs of a whole task, scored in batches before process_results
    (called by lmms_scene.harness through the registry; same numbers, faster)."""
    return scoring.prescore(pairs)


@guarded_aggregation
def mean_score(entries):
    return scoring.mean_score(entries)


@guarded_aggregation
@returns_dict
def breakdown(rows):
    return scoring.report(rows)
