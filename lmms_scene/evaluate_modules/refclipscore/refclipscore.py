"""RefCLIPScore (Hessel et al., 2021) as an ``evaluate`` metric: a thin wrapper over
:func:`lmms_scene.metrics.clip.ref_clip_components`."""

import datasets
import evaluate

from lmms_scene.metrics import clip
from lmms_scene.metrics.rows import mean

_CITATION = """@inproceedings{hessel2021clipscore,
  title     = {{CLIPScore}: A Reference-free Evaluation Metric for Image Captioning},
  author    = {Hessel, Jack and Holtzman, Ari and Forbes, Maxwell and Le Bras, Ronan and Choi, Yejin},
  booktitle = {EMNLP},
  year      = {2021}
}"""

_DESCRIPTION = """RefCLIP-S: the harmonic mean of CLIP-S = 2.5 * max(cos(image, candidate), 0)
and the best reference similarity max(max_r cos(candidate, r), 0), in CLIP embedding space
(Hessel et al. 2021, Eq. 1-2). Candidates are scored as given (COOCO passes
"A photo depicts a/an {name}")."""

_KWARGS_DESCRIPTION = """
Args:
    images (list of PIL images): one image per candidate.
    predictions (list of str): the candidate texts.
    references (list of list of str): reference texts per candidate.
    model (str, optional): CLIP checkpoint name or folder (default: lmms-scene's,
        openai/clip-vit-base-patch32 unless LMMS_SCENE_CLIP_MODEL says otherwise).
Returns:
    refclipscore, clip_score, reference_similarity: means over the items;
    scores: the per-item RefCLIP-S; clip_model: the checkpoint that computed them.
Examples:
    >>> metric = evaluate.load("refclipscore")  # doctest: +SKIP
    >>> metric.compute(images=[img], predictions=["A photo depicts a dog"], references=[["A photo depicts a dog"]])  # doctest: +SKIP
"""


@evaluate.utils.file_utils.add_start_docstrings(_DESCRIPTION, _KWARGS_DESCRIPTION)
class Refclipscore(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            module_type="metric",
            description=_DESCRIPTION,
            citation=_CITATION,
            inputs_description=_KWARGS_DESCRIPTION,
            features=datasets.Features(
                {
                    "images": datasets.Image(),
                    "predictions": datasets.Value("string"),
                    "references": datasets.Sequence(datasets.Value("string")),
                }
            ),
            reference_urls=["https://arxiv.org/abs/2104.08718"],
        )

    def _compute(self, images, predictions, references, model=None):
        name = clip.resolve_model(model)
        parts = clip.ref_clip_components(list(images), list(predictions), [list(r) for r in references], model=name)
        return {
            "refclipscore": mean(parts.ref_clip_score),
            "clip_score": mean(parts.clip_score),
            "reference_similarity": mean(parts.reference_similarity),
            "scores": list(parts.ref_clip_score),
            "clip_model": name,
        }
