"""CESG (Cognitive Expected Scene Graph) as an ``evaluate`` metric: a thin wrapper over
:func:`lmms_scene.metrics.cesg.score_corpus`."""

import datasets
import evaluate

from lmms_scene.metrics.cesg import KEYS, score_corpus

_CITATION = """@misc{jiang_snus_cesg,
  title  = {Benchmarking {MLLMs} via Cognitive Expected Scene Graph ({CESG}) for
            Safety-Critical Visual Negation Understanding},
  author = {Jiang and others}
}"""

_DESCRIPTION = """CESG scores a negative caption (what is absent from a scene: missing
objects, negated attributes, negated relations) against reference captions by building
polarity-aware scene graphs of both and matching them. Returns, in the paper's corpus
convention (P_t / R_t: means over the rows whose prediction / reference has type t), the
P/R/F1 for objects, attributes and relations and the weighted CESG score (all in [0, 1]),
the counts of excluded or zero-scored rows, and the provenance of the components used."""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of str): the model's captions.
    references (list of str or list of list of str): one or several reference captions per prediction.
    ids (list of str, optional): row ids (default: the row numbers).
    **options: passed to lmms_scene.metrics.cesg.cesg_score (coref, parser, encoder,
        lambda_, weights, synonyms, interactive, soft, verifier, extra_judge, device).
Returns:
    P_o, R_o, F1_o, P_a, R_a, F1_a, P_r, R_r, F1_r, CESG: corpus scores (paper's convention) over the scored
        rows (None when no row could be scored);
    n, n_scored, n_reference_without_absent_information, n_empty_prediction,
        n_prediction_without_absent_information, n_parse_failures: counts;
    provenance: what computed the scores.
Examples:
    >>> cesg = evaluate.load("cesg")  # doctest: +SKIP
    >>> cesg.compute(predictions=["There is no helmet."], references=[["The worker has no helmet."]])  # doctest: +SKIP
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Cesg(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=[
                datasets.Features(
                    {"predictions": datasets.Value("string"), "references": datasets.Sequence(datasets.Value("string"))}
                ),
                datasets.Features({"predictions": datasets.Value("string"), "references": datasets.Value("string")}),
            ],
            reference_urls=["https://github.com/lmms-scene/lmms-scene"],
        )

    def _compute(self, predictions, references, ids=None, **options):
        if ids is not None and len(ids) != len(predictions):
            raise ValueError(f"ids: expected {len(predictions)} ids (one per prediction), got {len(ids)}")
        rows = [
            (str(ids[i]) if ids is not None else str(i), p, r) for i, (p, r) in enumerate(zip(predictions, references))
        ]
        out = score_corpus(rows, **options)
        result = {k: out["means"][k] for k in KEYS}
        result.update({k: v for k, v in out.items() if k.startswith("n")})
        result["row_counts"] = out["row_counts"]
        result["provenance"] = out["provenance"]
        return result
