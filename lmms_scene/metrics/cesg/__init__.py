"""CESG: the Cognitive Expected Scene Graph score (Jiang et al., SNUS paper).

Polarity-aware scene-graph evaluation of negative captions: absent objects, negated
attributes and negated relations are extracted by a six-stage pipeline
(:mod:`~lmms_scene.metrics.cesg.construct`) and matched (:mod:`~lmms_scene.metrics.cesg.match`).

    from lmms_scene.metrics.cesg import cesg_score, cesg_graph
    cesg_score("The worker is not wearing a helmet.", ["The worker has no helmet."])

Importing this package loads no model.
"""

from lmms_scene.metrics.cesg.score import KEYS, cesg_graph, cesg_score, configuration, score_corpus

__all__ = ["KEYS", "cesg_graph", "cesg_score", "configuration", "score_corpus"]
