"""COOCO's object-naming accuracy (Merlo et al. 2025, Section 4.3) as an ``evaluate``
metric: a thin wrapper over :mod:`lmms_scene.metrics.cooco.scoring` (the same normalisation,
long form, CLIP text similarity and thresholds as the COOCO task's scores)."""

import datasets
import evaluate

from lmms_scene.data.cooco.card import CITATION
from lmms_scene.metrics import clip
from lmms_scene.metrics.cooco import scoring
from lmms_scene.metrics.rows import mean

_CITATION = CITATION

_DESCRIPTION = """A model's object name is correct when the CLIP text embeddings of
"A photo depicts a/an {output}" and "A photo depicts a/an {gold}" have cosine >= 0.9
(Merlo et al. 2025, Section 4.3). Outputs are normalised as in the COOCO task (cut at
end-of-turn markers, articles and punctuation dropped); an empty output counts wrong.
Also returns the edit-distance variant (rapidfuzz ratio / 100 >= 0.55)."""

_KWARGS_DESCRIPTION = """
Args:
    predictions (list of str): the model's answers (raw).
    references (list of str): the gold object names (dataset labels, e.g. "teddy_bear").
    model (str, optional): CLIP checkpoint name or folder (default: lmms-scene's).
Returns:
    accuracy, levenshtein_accuracy: means over the items (accuracy None when CLIP
        metrics are switched off); per_item: per-item accuracy and similarity;
    n_empty: empty answers (counted wrong); provenance: checkpoint and thresholds.
Examples:
    >>> metric = evaluate.load("cooco_naming_accuracy")  # doctest: +SKIP
    >>> metric.compute(predictions=["a teddy bear."], references=["teddy_bear"])  # doctest: +SKIP
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class CoocoNamingAccuracy(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {"predictions": datasets.Value("string"), "references": datasets.Value("string")}
            ),
            reference_urls=["https://arxiv.org/abs/2506.22274"],
        )

    def _compute(self, predictions, references, model=None):
        name = clip.resolve_model(model)
        use_clip = clip.clip_enabled(name)
        preds = [scoring.normalise_output(scoring.sanitise_output("" if p is None else str(p))[0]) for p in predictions]
        golds = [scoring.normalise_label(g) for g in references]
        scored = [i for i, p in enumerate(preds) if p]
        sims = {}
        if use_clip and scored:
            values = clip.text_similarity(
                [scoring.long_form(preds[i]) for i in scored], [scoring.long_form(golds[i]) for i in scored], model=name
            )
            sims = dict(zip(scored, values))
        items = []
        for i, (p, g) in enumerate(zip(preds, golds)):
            lev = scoring.levenshtein_similarity(p, g) if p else 0.0
            sim = sims.get(i)
            if not use_clip:
                acc = None
            else:
                acc = float(sim >= scoring.ACCURACY_THRESHOLD) if sim is not None else 0.0
            items.append(
                {
                    "prediction": p,
                    "gold": g,
                    "text_similarity": sim,
                    "accuracy": acc,
                    "levenshtein_accuracy": float(lev >= scoring.LEVENSHTEIN_THRESHOLD),
                }
            )
        return {
            "accuracy": mean(r["accuracy"] for r in items),
            "levenshtein_accuracy": mean(r["levenshtein_accuracy"] for r in items),
            "n_empty": len(preds) - len(scored),
            "per_item": items,
            "provenance": scoring.provenance(name),
        }
