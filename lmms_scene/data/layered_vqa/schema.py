"""Layered-VQA's item schema: the columns of a row, explicit ``datasets.Features``,
:func:`validate` and the facts about an item the schedules and metrics read.

One row is one question about one scene (Sai Teja et al., "Composition, Not
Conversation", section 3): the composite RGB scene, its ordered RGBA ``layers`` (layer
0 the background) that alpha-composite back to it, the question ``Q`` split into
``shards`` (each with the layers supporting it; a shard may have none), and the
``minimal_sufficient_layers`` and ``distractor_layers`` of the question.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# -- the schema ------------------------------------------------------------------------

#: the six question types (Table 3), spelled as the paper does
QUESTION_TYPES: tuple[str, ...] = ("direct ask", "attribute binding", "occlusion", "counting", "spatial", "multi-hop")
#: question types about a relation between objects (Table 8's "relational"); the rest are single-object
RELATIONAL_TYPES: frozenset[str] = frozenset({"spatial", "multi-hop", "occlusion"})

#: the columns of a row, in order
COLUMNS: tuple[str, ...] = (
    "scene_id",
    "question_id",
    "question_type",
    "question",
    "answer",
    "composite",
    "layers",
    "layer_names",
    "shards",
    "minimal_sufficient_layers",
    "distractor_layers",
)
#: the ids of a scored row (:mod:`lmms_scene.metrics.rows`)
ID_FIELDS: tuple[str, ...] = ("scene_id", "question_id", "schedule", "repeat")


def features():
    """The item schema as explicit ``datasets.Features``."""
    from datasets import Features, Image, List, Value  # deferred: datasets (pyarrow, pandas) is heavy to import

    return Features(
        {
            "scene_id": Value("string"),
            "question_id": Value("string"),
            "question_type": Value("string"),  # one of QUESTION_TYPES
            "question": Value("string"),
            "answer": Value("string"),
            "composite": Image(),  # RGB
            "layers": List(Image()),  # RGBA, back to front; layer 0 is the background
            "layer_names": List(Value("string")),
            "shards": List({"text": Value("string"), "supporting_layers": List(Value("int32"))}),
            "minimal_sufficient_layers": List(Value("int32")),
            "distractor_layers": List(Value("int32")),
        }
    )


def item_where(item: Mapping[str, Any]) -> str:
    return f"item {item.get('question_id', '?')!r} (scene {item.get('scene_id', '?')!r})"


def _indices(value: Any, n_layers: int, where: str, name: str) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"{where}: {name}: expected a list of layer indices, got {value!r}")
    out = []
    for v in value:
        if isinstance(v, bool) or not isinstance(v, int):
            raise ValueError(f"{where}: {name}: layer index {v!r} is not an integer")
        if not 0 <= v < n_layers:
            raise ValueError(f"{where}: {name}: layer index {v} out of range (the scene has layers 0..{n_layers - 1})")
        out.append(int(v))
    if len(set(out)) != len(out):
        raise ValueError(f"{where}: {name}: repeated layer index in {out}")
    return tuple(out)


def validate(item: Mapping[str, Any], check_images: bool = True) -> None:
    """Raise ``ValueError`` naming the item, the field and the value when ``item`` breaks
    the schema: unknown question type, no shards, layer names not one per layer, a layer
    index out of range, minimal-sufficient and distractor layers overlapping, layers of
    different sizes (``check_images``)."""
    where = item_where(item)
    missing = [c for c in COLUMNS if c not in item]
    if missing:
        raise ValueError(f"{where}: missing fields {missing}")
    for name in ("scene_id", "question_id", "question", "answer"):
        if not isinstance(item[name], str) or not item[name].strip():
            raise ValueError(f"{where}: {name}: expected a non-empty string, got {item[name]!r}")
    if item["question_type"] not in QUESTION_TYPES:
        raise ValueError(f"{where}: question_type: {item['question_type']!r} is not one of {list(QUESTION_TYPES)}")
    layers = item["layers"]
    if not isinstance(layers, Sequence) or len(layers) < 1:
        raise ValueError(f"{where}: layers: expected at least one layer, got {layers!r}")
    n = len(layers)
    if len(item["layer_names"]) != n:
        raise ValueError(f"{where}: layer_names: {len(item['layer_names'])} names for {n} layers")
    shards = item["shards"]
    if not isinstance(shards, Sequence) or not shards:
        raise ValueError(f"{where}: shards: expected at least one shard, got {shards!r}")
    for i, shard in enumerate(shards):
        if not isinstance(shard, Mapping) or not isinstance(shard.get("text"), str) or not shard["text"].strip():
            raise ValueError(f"{where}: shards[{i}]: expected {{text, supporting_layers}} with a text, got {shard!r}")
        _indices(shard.get("supporting_layers", ()), n, where, f"shards[{i}].supporting_layers")
    minimal = _indices(item["minimal_sufficient_layers"], n, where, "minimal_sufficient_layers")
    distractors = _indices(item["distractor_layers"], n, where, "distractor_layers")
    if not minimal:
        raise ValueError(f"{where}: minimal_sufficient_layers: empty (every question needs some evidence)")
    both = sorted(set(minimal) & set(distractors))
    if both:
        raise ValueError(f"{where}: layers {both} are both minimal-sufficient and distractors")
    if check_images:
        sizes = [getattr(layer, "size", None) or (layer.shape[1], layer.shape[0]) for layer in layers]
        for i, size in enumerate(sizes):
            if tuple(size) != tuple(sizes[0]):
                raise ValueError(
                    f"{where}: layers[{i}]: size {size[0]}x{size[1]} differs from layer 0's {sizes[0][0]}x{sizes[0][1]}"
                )
        comp = item["composite"]
        csize = getattr(comp, "size", None) or (comp.shape[1], comp.shape[0])
        if tuple(csize) != tuple(sizes[0]):
            raise ValueError(
                f"{where}: composite: size {csize[0]}x{csize[1]} differs from the layers' {sizes[0][0]}x{sizes[0][1]}"
            )


def n_layers(item: Mapping[str, Any]) -> int:
    """The number of layers; from ``n_layers`` when the images were dropped (lmms-eval
    builds the round-0 prompt from a copy of the document without its image columns)."""
    if "layers" in item:
        return len(item["layers"])
    if "n_layers" in item:
        return int(item["n_layers"])
    raise KeyError(f"{item_where(item)}: neither 'layers' nor 'n_layers' in the document")


def depth(item: Mapping[str, Any]) -> int:
    """The number of layers (Table 7's "Layers": background included)."""
    return n_layers(item)


def is_relational(item: Mapping[str, Any]) -> bool:
    return item["question_type"] in RELATIONAL_TYPES


def supporting(item: Mapping[str, Any], shard: int) -> tuple[int, ...]:
    return tuple(int(i) for i in item["shards"][shard].get("supporting_layers") or ())


def repeated(values: Sequence[Any]) -> list[Any]:
    """The values that occur more than once, in order of their first repeat (one pass)."""
    seen: set[Any] = set()
    out: dict[Any, None] = {}
    for value in values:
        if value in seen:
            out.setdefault(value, None)
        seen.add(value)
    return list(out)
