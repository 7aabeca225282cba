"""lmms-eval wiring for SNUS. Thin on purpose: rows and scores live in
:mod:`lmms_scene.data.snus` and :mod:`lmms_scene.metrics.cesg.report`. Importing this
loads no model."""

from __future__ import annotations

from lmms_scene.data import snus
from lmms_scene.harness import guarded_aggregation, returns_dict
from lmms_scene.metrics.cesg import report
from lmms_scene.prompts import render

DEFAULT_TEMPLATE = "snus/default.jinja"


def process_docs(dataset):
    # everything the metrics need is resolved here, before the model runs
    report.preflight()
    return snus.ensure_schema(dataset)


def doc_to_visual(doc):
    return [doc["image"].convert("RGB")]


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    return render((lmms_eval_specific_kwargs or {}).get("template", DEFAULT_TEMPLATE))


def doc_to_target(doc):
    return doc["caption"]


def prescore(pairs):
    # batch scoring of this process's answers after generation (the harness hook)
    return report.prescore(pairs)


def process_results(doc, results):
    row = report.doc_row(doc, results[0] if results else "")
    return {key: row for key in METRICS}


def _aggregation(key):
    def aggregate(items):
        return report.metric_value(items, key)

    aggregate.__name__ = key
    return guarded_aggregation(aggregate)


METRICS = ("CESG", "P_o", "R_o", "F1_o", "P_a", "R_a", "F1_a", "P_r", "R_r", "F1_r",
           "rouge_l", "meteor_nltk", "meteor_java", "cider", "bleu4", "capture_style", "spice_style", "clipscore", "snus_report")  # fmt: skip

CESG = _aggregation("CESG")
P_o, R_o, F1_o = _aggregation("P_o"), _aggregation("R_o"), _aggregation("F1_o")
P_a, R_a, F1_a = _aggregation("P_a"), _aggregation("R_a"), _aggregation("F1_a")
P_r, R_r, F1_r = _aggregation("P_r"), _aggregation("R_r"), _aggregation("F1_r")
rouge_l, cider, bleu4 = _aggregation("rouge_l"), _aggregation("cider"), _aggregation("bleu4")
meteor_nltk, meteor_java = _aggregation("meteor_nltk"), _aggregation("meteor_java")
capture_style, spice_style = _aggregation("capture_style"), _aggregation("spice_style")
clipscore = _aggregation("clipscore")


@guarded_aggregation
@returns_dict
def snus_report(items):
    """Everything: per-metric means with intervals, counts, provenance, the AC baseline."""
    rep = report.report_of(items)
    return {"model": {k: v for k, v in rep["model"].items() if k != "rows"}, "ac": rep["ac"], "n": rep["n"],
            "dataset": rep["dataset"], "interval": rep["interval"]}
