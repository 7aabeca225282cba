"""``scene_blind``'s text prior for Layered-VQA: the most frequent answer per question
type, counted on the embedded sample (our own generated items) **without the scored
scene** (a sample doc is answered from the sample's other scenes: leave one scene out; a
doc of any other data, ``layered_vqa_synth`` or a build, from the whole sample, which it
does not contain), never looking at an image (:data:`PRIOR_SOURCE`).

For the ``all-lyr`` and ``oracle`` schedules, whose prompt asks which layers were
needed, it also names the layer most often minimal-sufficient in those items (the text
alone says how many layers there are, not what they show).

>>> blind_answer({"question_type": "counting"}, "How many circles?") in PRIOR_FALLBACK.values() or True
True
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from lmms_scene.cache import cached
from lmms_scene.registration import tasks_path

#: used when the sample has no answer of a type (never in the shipped sample)
PRIOR_FALLBACK = {
    "direct ask": "A circle.",
    "attribute binding": "Red.",
    "occlusion": "The red circle.",
    "counting": "Two.",
    "spatial": "To the left.",
    "multi-hop": "Red.",
}


#: where the answers come from, in a sentence (``show``, the report and the demo print it)
PRIOR_SOURCE = ("the most frequent answer per question type in the embedded sample, the scored scene left out "
                "(leave one scene out on the sample; the whole sample for layered_vqa_synth and builds, which it does not contain)")  # fmt: skip


def _rows() -> list[dict[str, Any]]:
    import pyarrow.parquet as pq  # deferred: pyarrow is heavy to import

    path = tasks_path() / "layered_vqa" / "sample" / "layered_vqa_sample.parquet"
    return pq.read_table(path, columns=["scene_id", "question_type", "answer", "minimal_sufficient_layers"]).to_pylist()


def _table(left_out: str | None) -> dict[str, Any]:
    by_type: dict[str, Counter] = {}
    layers: Counter = Counter()
    for row in cached(("layered_vqa", "blind_prior", "rows"), _rows):
        if row["scene_id"] == left_out:
            continue
        by_type.setdefault(row["question_type"], Counter())[row["answer"]] += 1
        layers.update(row["minimal_sufficient_layers"])
    # ties broken by the answer text, so the prior is deterministic
    answers = {t: min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] for t, c in by_type.items()}
    top_layer = min(layers.items(), key=lambda kv: (-kv[1], kv[0]))[0] if layers else 1
    return {"answers": answers, "layer": top_layer}


def prior(scene_id: str | None = None) -> dict[str, Any]:
    """The prior's table for a doc of scene ``scene_id``: counted without that scene when
    the sample holds it (None: the whole sample)."""
    scenes = {row["scene_id"] for row in cached(("layered_vqa", "blind_prior", "rows"), _rows)}
    left_out = scene_id if scene_id in scenes else None
    return cached(("layered_vqa", "blind_prior", "without", left_out), lambda: _table(left_out))


def blind_answer(doc: dict, prompt: str) -> str:
    qtype = doc.get("question_type")
    table = prior(doc.get("scene_id"))
    answer = table["answers"].get(qtype) or PRIOR_FALLBACK.get(qtype, "Yes.")
    if "Layers:" in (prompt or ""):
        answer += f"\nLayers: {table['layer']}"
    return answer
