"""lmms-eval wiring for COOCO. Thin on purpose: the logic lives in
:mod:`lmms_scene.data.cooco` (rows, images, prompts) and
:mod:`lmms_scene.metrics.naming` (scores). Importing this loads no model."""

from __future__ import annotations

from lmms_scene.data import cooco
from lmms_scene.harness import guarded_aggregation, returns_dict
from lmms_scene.metrics import naming
from lmms_scene.prompts import render

DEFAULT_TEMPLATE = "cooco/default.jinja"


def _include_clean() -> bool:
    from lmms_scene import settings

    return cooco.clean_option(settings.current().cooco_clean)


def process_docs(dataset):
    # the harness builds the docs before generating: a missing CLIP, an unknown hub
    # layout or a bad LMMS_SCENE_COOCO_CLEAN stops the run here
    include_clean = _include_clean()
    naming.require_metrics()
    return cooco.naming_docs(cooco.ensure_schema(dataset), include_clean=include_clean)


def process_docs_noise(dataset):
    include_clean = _include_clean()
    naming.require_metrics()
    return cooco.noise_grid_docs(cooco.ensure_schema(dataset), include_clean=include_clean)


def doc_to_visual(doc):
    return [cooco.visual(doc)]


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    template = (lmms_eval_specific_kwargs or {}).get("template", DEFAULT_TEMPLATE)
    return render(template, **cooco.prompt_context(doc))


def doc_to_target(doc):
    return doc["gold_label"]


def process_results(doc, results):
    # never raises for a bad answer or image: such a row is recorded with its reason
    output = results[0] if results else None
    return naming.metric_entries(naming.score_doc(doc, output))


def prescore(pairs):
    """(doc, answer) pairs of a whole task, scored in batches before process_results
    (called by lmms_scene.harness through the registry; same numbers, faster)."""
    return naming.prescore(pairs)


@guarded_aggregation
def mean_score(entries):
    return naming.mean_score(entries)


@guarded_aggregation
@returns_dict
def breakdown(rows):
    return naming.report(rows)
