"""``scene_blind``'s text prior for Layered-VQA: the most frequent answer per question
type, never looking at an image, counted on a **prior split** of lmms-scene's scene
generator that no task scores (generator v1, seed :data:`PRIOR_SEED`, :data:`PRIOR_SCENES`
scenes, scene ids ``prior-NNNN``): disjoint from the embedded sample (seed 0), from
``layered_vqa_synth`` (seed 1) and from any release (:data:`PRIOR_SOURCE`). It is generated
once per process (a few seconds; only its text is kept).

For the ``all-lyr`` and ``oracle`` schedules, whose prompt asks which layers were
needed, it also names the layer most often minimal-sufficient in that split (the text
alone says how many layers there are, not what they show).

>>> blind_answer({"question_type": "counting"}, "How many circles?") in PRIOR_FALLBACK.values() or True
True
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from lmms_scene.cache import cached
from lmms_scene.data.layered_vqa import synth

#: used when the sample has no answer of a type (never in the shipped sample)
PRIOR_FALLBACK = {
    "direct ask": "A circle.",
    "attribute binding": "Red.",
    "occlusion": "The red circle.",
    "counting": "Two.",
    "spatial": "To the left.",
    "multi-hop": "Red.",
}


#: the prior split: generated scenes no task scores (seed 0 is the sample's, seed 1 the
#: generated split's), at the size of both
PRIOR_SEED = 2
PRIOR_SCENES = 200
PRIOR_SIZE = (160, 120)
#: where the answers come from, in a sentence (``show``, the report and the demo print it)
PRIOR_SOURCE = (
    f"the most frequent answer per question type in a prior split of lmms-scene's scene generator that no task "
    f"scores ({PRIOR_SCENES} scenes, seed {PRIOR_SEED}; disjoint from the sample, layered_vqa_synth and any release)"
)


def _rows() -> list[dict[str, Any]]:
    items = synth.generate(PRIOR_SCENES, seed=PRIOR_SEED, size=PRIOR_SIZE, id_prefix="prior")
    return [
        {k: item[k] for k in ("scene_id", "question_type", "answer", "minimal_sufficient_layers")} for item in items
    ]


def _table() -> dict[str, Any]:
    by_type: dict[str, Counter] = {}
    layers: Counter = Counter()
    for row in _rows():
        by_type.setdefault(row["question_type"], Counter())[row["answer"]] += 1
        layers.update(row["minimal_sufficient_layers"])
    # ties broken by the answer text, so the prior is deterministic
    answers = {t: min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] for t, c in by_type.items()}
    top_layer = min(layers.items(), key=lambda kv: (-kv[1], kv[0]))[0] if layers else 1
    return {"answers": answers, "layer": top_layer}


def prior() -> dict[str, Any]:
    """The prior's table (counted once per process)."""
    return cached(("layered_vqa", "blind_prior", PRIOR_SEED, PRIOR_SCENES), _table)


def blind_answer(doc: dict, prompt: str) -> str:
    qtype = doc.get("question_type")
    table = prior()
    answer = table["answers"].get(qtype) or PRIOR_FALLBACK.get(qtype, "Yes.")
    if "Layers:" in (prompt or ""):
        answer += f"\nLayers: {table['layer']}"
    return answer
