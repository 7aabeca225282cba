"""Layered-VQA: the item schema, the 16 delivery schedules and how a schedule delivers an item.

One row is one question about one scene (Sai Teja et al., "Composition, Not
Conversation", section 3): the composite RGB scene, its ordered RGBA ``layers`` (layer
0 the background) that alpha-composite back to it, the question ``Q`` split into
``shards`` (each with the layers supporting it; a shard may have none), and the
``minimal_sufficient_layers`` and ``distractor_layers`` of the question.

A *schedule* says what the model receives in each turn. :data:`SCHEDULES` is the one
table of all sixteen; :func:`deliver` turns an item and a schedule into a list of
:class:`Turn`, each with its text, the images it shows and which layers each image
holds (:class:`View`). The harness wiring (:func:`simple_round`, :func:`chat_messages`)
replays every earlier turn, model replies included, in each round, because no model in
lmms-eval 0.7.3 keeps a conversation history.

>>> item = toy_item()
>>> [len(deliver(item, s)) for s in ("full", "sharded-q", "recap-q", "sharded-v")]
[1, 3, 4, 3]
>>> deliver(item, "oracle")[0].views[0].layers
(1,)
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lmms_scene import compositing
from lmms_scene.data import layered_vqa_schedules as _schedules
from lmms_scene.data.layered_vqa_schedules import FAMILIES, task_name  # noqa: F401 (FAMILIES: re-exported)

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
    from datasets import Features, Image, List, Value

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


def _where(item: Mapping[str, Any]) -> str:
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
    where = _where(item)
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
                raise ValueError(f"{where}: layers[{i}]: size {size[0]}x{size[1]} differs from layer 0's {sizes[0][0]}x{sizes[0][1]}")
        comp = item["composite"]
        csize = getattr(comp, "size", None) or (comp.shape[1], comp.shape[0])
        if tuple(csize) != tuple(sizes[0]):
            raise ValueError(f"{where}: composite: size {csize[0]}x{csize[1]} differs from the layers' {sizes[0][0]}x{sizes[0][1]}")


def n_layers(item: Mapping[str, Any]) -> int:
    """The number of layers; from ``n_layers`` when the images were dropped (lmms-eval
    builds the round-0 prompt from a copy of the document without its image columns)."""
    if "layers" in item:
        return len(item["layers"])
    if "n_layers" in item:
        return int(item["n_layers"])
    raise KeyError(f"{_where(item)}: neither 'layers' nor 'n_layers' in the document")


def depth(item: Mapping[str, Any]) -> int:
    """The number of layers (Table 7's "Layers": background included)."""
    return n_layers(item)


def is_relational(item: Mapping[str, Any]) -> bool:
    return item["question_type"] in RELATIONAL_TYPES


def supporting(item: Mapping[str, Any], shard: int) -> tuple[int, ...]:
    return tuple(int(i) for i in item["shards"][shard].get("supporting_layers") or ())


# -- turns -----------------------------------------------------------------------------

#: what an image of a turn is: one layer alone, or some layers composited into one image
LAYER, COMPOSITE = "layer", "composite"


@dataclass(frozen=True)
class View:
    """One image of a turn: ``layers`` it shows, as one ``layer`` alone or a ``composite``."""

    kind: str
    layers: tuple[int, ...]

    def caption(self, n_layers: int) -> str:
        if self.kind == LAYER or len(self.layers) == 1:
            return f"[layer {self.layers[0]} of the scene]"
        if len(self.layers) == n_layers:
            return "[the scene]"
        return f"[the scene composed of layers {', '.join(map(str, self.layers))}]"


@dataclass(frozen=True)
class Turn:
    """What the model receives in one turn.

    ``text`` is the user message; ``views`` the images it shows, in order (``images``
    renders them); ``shards`` the shard indices whose text the turn carries;
    ``question`` whether it carries the whole question ``Q``; ``selection`` whether it
    asks which layers were needed; ``evidence_complete`` whether, with this turn, every
    shard (or ``Q``) and every minimal-sufficient layer has been delivered.
    """

    index: int
    text: str
    views: tuple[View, ...] = ()
    shards: tuple[int, ...] = ()
    question: bool = False
    selection: bool = False
    evidence_complete: bool = False
    _item: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def layers(self) -> tuple[int, ...]:
        """Every layer index this turn's images show, in order of first appearance."""
        seen: dict[int, None] = {}
        for view in self.views:
            for i in view.layers:
                seen.setdefault(i, None)
        return tuple(seen)

    @property
    def images(self) -> list:
        """The turn's images as RGB PIL images (rendered on demand)."""
        if self._item is None:
            raise ValueError(f"turn {self.index}: delivered without its item, so it has no images")
        return [render_view(self._item, v) for v in self.views]


def render_view(item: Mapping[str, Any], view: View):
    """One view as an RGB PIL image: the released composite for all layers, the layers'
    own composite for a subset. Where no opaque background layer is among them (a lone
    object layer), the transparent pixels show a colour far from every colour of the
    layers (:func:`lmms_scene.compositing.lone_layer_background`), never white on white."""
    layers = item["layers"]
    if view.kind == COMPOSITE and len(view.layers) == len(layers) and item.get("composite") is not None:
        comp = item["composite"]
        return comp.convert("RGB") if getattr(comp, "mode", "RGB") != "RGB" else comp
    chosen = [layers[i] for i in view.layers]
    return compositing.composite_image(chosen, background=compositing.lone_layer_background)


# Every fixed phrase a schedule adds around the item's own text (documented in docs/layered_vqa.md).
PHRASES: dict[str, str] = {
    "next_layer": "Here is another layer of the same scene.",
    "more_layers": "Here is the same scene with more layers added.",
    "layers_intro": "The scene is given as separate layers, numbered from 0 (the background).",
    "selection": (
        "Answer the question. Then, on a last line, write which layers you needed, "
        "as 'Layers: ' followed by their numbers separated by commas."
    ),
}


def _join(*parts: str) -> str:
    return "\n".join(p for p in parts if p)


def _layer_views(indices: Sequence[int]) -> tuple[View, ...]:
    return tuple(View(LAYER, (int(i),)) for i in indices)


def _scene(item) -> View:
    return View(COMPOSITE, tuple(range(n_layers(item))))


@dataclass(frozen=True)
class _Draft:
    text: str
    views: tuple[View, ...] = ()
    shards: tuple[int, ...] = ()
    question: bool = False
    selection: bool = False


def _captioned(item, views: Sequence[View], *texts: str) -> str:
    n = n_layers(item)
    captions = " ".join(v.caption(n) for v in views if not (v.kind == COMPOSITE and len(v.layers) == n))
    return _join(captions, *texts)


# Each builder returns the drafts of one schedule; ``rng`` is seeded per item and schedule.
def _full(item, rng):
    return [_Draft(item["question"], (_scene(item),), question=True)]


def _concat_q(item, rng):
    shards = item["shards"]
    return [_Draft(" ".join(s["text"] for s in shards), (_scene(item),), tuple(range(len(shards))))]


def _sharded_q(item, rng):
    shards = item["shards"]
    return [_Draft(s["text"], (_scene(item),) if i == 0 else (), (i,)) for i, s in enumerate(shards)]


def _recap_q(item, rng):
    # Table 10: "As sharded-q, then a final turn repeating Q with I" (Q itself, nothing added)
    final = _Draft(item["question"], (_scene(item),), question=True)
    return [*_sharded_q(item, rng), final]


def _snowball_q(item, rng):
    shards = item["shards"]
    return [
        _Draft(" ".join(s["text"] for s in shards[: i + 1]), (_scene(item),) if i == 0 else (), tuple(range(i + 1)))
        for i in range(len(shards))
    ]


def _concat_v(item, rng):
    views = _layer_views(range(n_layers(item)))
    return [_Draft(_captioned(item, views, PHRASES["layers_intro"], item["question"]), views, question=True)]


def _sharded_v(item, rng):
    out = []
    for i in range(n_layers(item)):
        views = _layer_views([i])
        if i == 0:
            out.append(_Draft(_captioned(item, views, PHRASES["layers_intro"], item["question"]), views, question=True))
        else:
            out.append(_Draft(_captioned(item, views, PHRASES["next_layer"]), views))
    return out


def _recap_v(item, rng):
    # as recap-q: the restored stream ends with Q itself and the scene
    final = _Draft(item["question"], (_scene(item),), question=True)
    return [*_sharded_v(item, rng), final]


def _snowball_v(item, rng):
    out = []
    for i in range(n_layers(item)):
        views = (View(COMPOSITE, tuple(range(i + 1))),)
        if i == 0:
            out.append(_Draft(_captioned(item, views, item["question"]), views, question=True))
        else:
            out.append(_Draft(_captioned(item, views, PHRASES["more_layers"]), views))
    return out


def _shard_turn(item, i: int, layers: Sequence[int]) -> _Draft:
    views = _layer_views(layers)
    return _Draft(_captioned(item, views, item["shards"][i]["text"]), views, (i,))


def _aligned(item, rng):
    return [_shard_turn(item, i, supporting(item, i)) for i in range(len(item["shards"]))]


def _misaligned(item, rng):
    # Shard i gets the supporting layers of the next shard (cyclically) that has any,
    # minus its own; a shard left with nothing gets one layer that does not support it
    # (a distractor first), chosen by the seeded rng. So the turns carry as much
    # imagery as aligned, never a shard's own evidence.
    n, n_lyr = len(item["shards"]), n_layers(item)
    out = []
    for i in range(n):
        own = set(supporting(item, i))
        layers: list[int] = []
        for step in range(1, n + 1):
            other = [j for j in supporting(item, (i + step) % n) if j not in own]
            if other:
                layers = other
                break
        if not layers and own:
            pool = [j for j in item["distractor_layers"] if j not in own] or [j for j in range(n_lyr) if j not in own]
            layers = [rng.choice(pool)] if pool else []
        out.append(_shard_turn(item, i, layers))
    return out


def supporting_layers(item) -> tuple[int, ...]:
    """The layers the question rests on: every shard's supporting layers and the
    minimal-sufficient ones (index order). The rest (``non_supporting_layers``) are the
    background when no shard needs it, distractors and unrelated objects."""
    found = {int(i) for s in range(len(item["shards"])) for i in supporting(item, s)}
    found |= {int(i) for i in item["minimal_sufficient_layers"]}
    return tuple(sorted(found))


def non_supporting_layers(item) -> tuple[int, ...]:
    support = set(supporting_layers(item))
    return tuple(i for i in range(n_layers(item)) if i not in support)


def _deal(item, order: Sequence[int], placement: str, rng) -> list[_Draft]:
    # The order family: the shards in order, one per turn, and every layer of the scene
    # handed over once, in ``order``, spread over the turns. With more turns than layers,
    # one layer a turn in the first turns ("front"), the last ones ("back") or turns drawn
    # by the seeded rng ("random"); with fewer, consecutive blocks as even as possible,
    # the larger blocks at the front or the back.
    n = len(item["shards"])
    layers = list(order)
    blocks: list[list[int]] = [[] for _ in range(n)]
    if len(layers) <= n:
        if placement == "front":
            slots = list(range(len(layers)))
        elif placement == "back":
            slots = list(range(n - len(layers), n))
        else:
            slots = sorted(rng.sample(range(n), len(layers)))
        for slot, layer in zip(slots, layers):
            blocks[slot].append(layer)
    else:
        size, extra = divmod(len(layers), n)
        sizes = [size + (1 if k < extra else 0) for k in range(n)]
        if placement == "back":
            sizes.reverse()
        start = 0
        for k, s in enumerate(sizes):
            blocks[k] = layers[start : start + s]
            start += s
    return [_shard_turn(item, i, blocks[i]) for i in range(n)]


def _evidence_last(item, rng):
    # the non-supporting layers first, the supporting ones in the final turns (each group in index order)
    return _deal(item, [*non_supporting_layers(item), *supporting_layers(item)], "back", rng)


def _evidence_first(item, rng):
    # exactly the reverse of ev-last: the supporting layers first (front-most first), the rest after
    order = [*non_supporting_layers(item), *supporting_layers(item)]
    return _deal(item, order[::-1], "front", rng)


def _shuffled(item, rng):
    order = list(range(n_layers(item)))
    rng.shuffle(order)
    return _deal(item, order, "random", rng)


def _all_layers(item, rng):
    views = _layer_views(range(n_layers(item)))
    text = _captioned(item, views, PHRASES["layers_intro"], item["question"], PHRASES["selection"])
    return [_Draft(text, views, question=True, selection=True)]


def _oracle(item, rng):
    views = _layer_views(sorted(item["minimal_sufficient_layers"]))
    text = _captioned(item, views, PHRASES["layers_intro"], item["question"], PHRASES["selection"])
    return [_Draft(text, views, question=True, selection=True)]


@dataclass(frozen=True)
class Schedule:
    """One delivery schedule: its name, its family (Table 1's column groups), what each
    turn carries, and the function building its turns."""

    name: str
    family: str
    shape: str
    build: Callable[[Mapping[str, Any], random.Random], list[_Draft]] = field(repr=False)

    @property
    def task(self) -> str:
        return task_name(self.name)


#: what builds each schedule's turns; which schedules exist, in which order, their family
#: and what each turn carries is :mod:`lmms_scene.data.layered_vqa_schedules`' table
_BUILDERS: dict[str, Callable[[Mapping[str, Any], random.Random], list[_Draft]]] = {
    "full": _full,
    "concat-q": _concat_q,
    "sharded-q": _sharded_q,
    "recap-q": _recap_q,
    "snowball-q": _snowball_q,
    "concat-v": _concat_v,
    "sharded-v": _sharded_v,
    "recap-v": _recap_v,
    "snowball-v": _snowball_v,
    "aligned": _aligned,
    "misaligned": _misaligned,
    "ev-first": _evidence_first,
    "ev-last": _evidence_last,
    "shuffled": _shuffled,
    "all-lyr": _all_layers,
    "oracle": _oracle,
}
if set(_BUILDERS) != set(_schedules.NAMES):
    raise ImportError(
        "lmms_scene.data.layered_vqa: the schedule table (layered_vqa_schedules.TABLE) and the builders "
        f"(_BUILDERS) disagree: no builder for {sorted(set(_schedules.NAMES) - set(_BUILDERS))}, "
        f"no table row for {sorted(set(_BUILDERS) - set(_schedules.NAMES))}"
    )

#: The sixteen schedules (Table 10, and the paper's section 3 for the rest): the one table
#: (:data:`lmms_scene.data.layered_vqa_schedules.TABLE`, in its order) with its builders.
SCHEDULES: dict[str, Schedule] = {name: Schedule(name, family, shape, _BUILDERS[name]) for name, family, shape in _schedules.TABLE}

#: schedules whose evidence comes in one turn (Table 5's "in one turn")
SINGLE_TURN: frozenset[str] = frozenset({"full", "concat-q", "concat-v", "all-lyr", "oracle"})
#: schedules that ask for an evidence selection (Table 2)
SELECTION: frozenset[str] = frozenset({"all-lyr", "oracle"})


def schedule_of_task(task: str) -> str | None:
    for name in SCHEDULES:
        if task == task_name(name):
            return name
    return None


def _seed(item: Mapping[str, Any], schedule: str, seed: int) -> int:
    digest = hashlib.sha256(f"{seed}|{schedule}|{item['scene_id']}|{item['question_id']}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def deliver(item: Mapping[str, Any], schedule: str, seed: int = 0, *, check: bool = True) -> list[Turn]:
    """The turns ``schedule`` delivers ``item`` in (``seed`` drives ``shuffled`` and the
    fallback of ``misaligned``; the same item, schedule and seed always give the same
    turns). ``check`` validates the item first (see :func:`validate`)."""
    try:
        spec = SCHEDULES[schedule]
    except (KeyError, TypeError):
        raise ValueError(f"schedule: unknown schedule {schedule!r}; known: {', '.join(SCHEDULES)}") from None
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed: expected an integer, got {seed!r}")
    if check:
        validate(item, check_images=False)
    drafts = spec.build(item, random.Random(_seed(item, schedule, seed)))
    n_shards = len(item["shards"])
    needed = set(int(i) for i in item["minimal_sufficient_layers"])
    shards_seen: set[int] = set()
    layers_seen: set[int] = set()
    has_q = False
    turns = []
    for index, d in enumerate(drafts):
        shards_seen.update(d.shards)
        has_q = has_q or d.question
        for view in d.views:
            layers_seen.update(view.layers)
        complete = (has_q or len(shards_seen) == n_shards) and needed <= layers_seen
        turns.append(Turn(index, d.text, d.views, d.shards, d.question, d.selection, complete, item))
    return turns


def toy_item(n_layers: int = 3, size: tuple[int, int] = (8, 6)) -> dict[str, Any]:
    """A tiny hand-built item (for doctests, tests and benchmarks): a grey background, a
    red square (layer 1) and a blue square (layer 2); three shards."""
    import numpy as np

    w, h = size
    layers = []
    bg = np.zeros((h, w, 4), np.uint8)
    bg[...] = (128, 128, 128, 255)
    layers.append(bg)
    colours = [(255, 0, 0), (0, 0, 255), (0, 200, 0), (250, 250, 0), (0, 250, 250)]
    for k in range(1, n_layers):
        arr = np.zeros((h, w, 4), np.uint8)
        x = (k - 1) % max(1, w - 1)
        arr[1:3, x : x + 2, :3] = colours[(k - 1) % len(colours)]
        arr[1:3, x : x + 2, 3] = 255
        layers.append(arr)
    images = [compositing.to_image(a) for a in layers]
    return {
        "scene_id": "toy",
        "question_id": "toy-0",
        "question_type": "direct ask",
        "question": "What is the red thing to the left of the blue square?",
        "answer": "A red square.",
        "composite": compositing.composite_image(layers),
        "layers": images,
        "layer_names": ["background", *[f"object {k}" for k in range(1, n_layers)]],
        "shards": [
            {"text": "Can you help me identify a thing in this image?", "supporting_layers": []},
            {"text": "It is red.", "supporting_layers": [1]},
            {"text": "It is to the left of the blue square.", "supporting_layers": [1, 2] if n_layers > 2 else [1]},
        ],
        "minimal_sufficient_layers": [1, 2] if n_layers > 2 else [1],
        "distractor_layers": list(range(3, n_layers)),
    }


# -- the harness's multi-round protocol ---------------------------------------------------

#: hard cap on rounds for any schedule (chat vllm has none of its own)
MAX_ROUNDS = 32
#: the most layers a scene may have: recap-v delivers it in one turn per layer plus one
MAX_LAYERS = MAX_ROUNDS - 1


def turns_of(doc: Mapping[str, Any]) -> list[Turn]:
    """The turns of a task document (a row with its ``schedule`` and ``repeat_seed``)."""
    schedule = doc.get("schedule")
    if schedule is None:
        raise ValueError(f"{_where(doc)}: the document has no 'schedule' (process_docs adds it)")
    return deliver(doc, schedule, int(doc.get("seed", 0) or 0), check=False)


class KeepRepeats:
    """lmms-eval filter (the tasks' ``filter_list``) keeping every sample of a request.

    The harness's default filter (``take_first``) keeps only the first of the ``--repeats``
    samples; this one hands all of them on, marked, so :func:`conversations` tells them
    from the rounds of one conversation. Every reply is sanitised on the way
    (:func:`lmms_scene.metrics.outputs.clean_response`), and lone surrogates in the
    harness's raw record are replaced so that its samples file can be written
    (:class:`lmms_scene.metrics.outputs.SanitiseResponses` does that for SNUS and
    COOCO, whose row functions then sanitise and record what they changed)."""

    def __init__(self, **kwargs: Any) -> None:
        if kwargs:
            raise TypeError(f"KeepRepeats takes no arguments, got {sorted(kwargs)}")

    def apply(self, resps, docs):
        # sanitised for scoring; in the harness's raw record only lone surrogates are
        # replaced (U+FFFD), else lmms-eval cannot write its samples file at all
        from lmms_scene.metrics.outputs import clean_response, make_writable

        out = []
        for r in resps:
            if isinstance(r, list):
                make_writable(r)
            out.append({REPEATS_KEY: clean_response(list(r))})
        return out


REPEATS_KEY = "lmms_scene_repeats"


def conversations(results: Any) -> list[Any]:
    """The conversations in a multi-round document's ``results``, one per repeat. With
    :class:`KeepRepeats` they come as ``[{"lmms_scene_repeats": [c0, c1, ...]}]``;
    without it one entry per request, each a list of per-round outputs or, from the
    simple qwen classes, the string of a tuple. A flat list of plain strings is one
    conversation (one output per round)."""
    if isinstance(results, (list, tuple)) and len(results) == 1 and isinstance(results[0], Mapping) and REPEATS_KEY in results[0]:
        found = list(results[0][REPEATS_KEY])
        if not found:
            return [[]]
        return [[c] if isinstance(c, str) else c for c in found]
    if isinstance(results, (list, tuple)) and len(results) > 1:
        if all(isinstance(r, (list, tuple)) or (isinstance(r, str) and r.startswith("(") and r.endswith(")")) for r in results):
            return [[r] if isinstance(r, str) else r for r in results]
    return [results]


def transcript(turns: Sequence[Turn], outputs: Sequence[str]) -> str:
    """The conversation so far as one prompt for models without a chat history: every
    earlier turn with the assistant's reply, then the new turn. One turn is its text alone."""
    if len(turns) == 1:
        return turns[0].text
    lines = []
    for k, turn in enumerate(turns):
        lines.append(f"User: {turn.text}")
        if k < len(turns) - 1:
            reply = outputs[k] if k < len(outputs) else ""
            lines.append(f"Assistant: {reply}")
    lines.append("Assistant:")
    return "\n".join(lines)


def simple_round(doc: Mapping[str, Any], previous_output: Sequence[str] | None = None, round_idx: int | None = None):
    """``doc_to_text`` for simple models. Round 0 (no ``round_idx``): the first turn's
    text. Round k: ``(visuals, text, terminal, previous_output, round_info)`` where the
    visuals are every image shown so far and the text the whole transcript; terminal
    once every turn has been answered (always, so no model loops for ever)."""
    turns = turns_of(doc)
    if round_idx is None:
        return turns[0].text
    previous = [str(o) for o in (previous_output or [])]
    info = {"turns": len(turns), "round": round_idx}
    if round_idx >= len(turns) or round_idx >= MAX_ROUNDS:
        return None, None, True, previous, info
    upto = turns[: round_idx + 1]
    visuals = [img for t in upto for img in t.images]
    return visuals, transcript(upto, previous), False, previous, info


def first_visuals(doc: Mapping[str, Any]) -> list:
    return turns_of(doc)[0].images


def _user(turn: Turn) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "image", "url": img} for img in turn.images]
    content.append({"type": "text", "text": turn.text})
    return {"role": "user", "content": content}


def chat_messages(doc: Mapping[str, Any], previous_output: Sequence[str] | None = None, round_idx: int | None = None):
    """``doc_to_messages`` for chat models: the whole conversation so far (user turns
    with their images, assistant turns with the earlier replies). Round 0: the messages;
    round k: ``(messages, terminal, previous_output, round_info)``, terminal after the
    last turn."""
    turns = turns_of(doc)
    if round_idx is None:
        return [_user(turns[0])]
    previous = [str(o) for o in (previous_output or [])]
    info = {"turns": len(turns), "round": round_idx}
    if round_idx >= len(turns) or round_idx >= MAX_ROUNDS:
        return None, True, previous, info
    messages = []
    for k, turn in enumerate(turns[: round_idx + 1]):
        messages.append(_user(turn))
        if k < round_idx:
            messages.append({"role": "assistant", "content": [{"type": "text", "text": previous[k] if k < len(previous) else ""}]})
    return messages, False, previous, info


# -- task documents --------------------------------------------------------------------


def schedule_docs(dataset, schedules: Sequence[str], seed: int = 0):
    """The task documents: every item under every schedule in ``schedules`` (item-major,
    so ``--limit len(schedules)`` runs one item under each), with ``schedule``, ``n_layers``
    and ``seed`` columns. Before the model runs: the shipped placeholder stops the run
    with :func:`not_built_message`; a missing column, a repeated item id or an item
    needing more than :data:`MAX_ROUNDS` turns under a schedule is an error naming it;
    every row is re-checked (:func:`loaded_row_problem`: images decoded in full, the
    schema of :func:`validate`) and a bad one becomes a stand-in carrying its reason
    (:mod:`lmms_scene.data.recheck`), recorded unscored by ``process_results``."""
    from lmms_scene.data import recheck

    check_built(dataset)
    unknown = [s for s in schedules if s not in SCHEDULES]
    if unknown or not schedules:
        raise ValueError(f"schedules: unknown or none {unknown or list(schedules)}; known: {', '.join(SCHEDULES)}")
    missing = [c for c in COLUMNS if c not in dataset.column_names]
    if missing:
        raise ValueError(f"Layered-VQA data lacks the fields {missing}; it has {dataset.column_names}. "
                         "Build it with `lmms-scene build layered-vqa` (or layered-synth).")  # fmt: skip
    ids = list(zip(dataset["scene_id"], dataset["question_id"]))
    twice = repeated(ids)
    if twice:
        first = ids.index(twice[0])
        raise ValueError(f"row {ids.index(twice[0], first + 1)}: item {twice[0][1]!r} (scene {twice[0][0]!r}) repeats row "
                         f"{first} (rows are keyed by scene and question id)")  # fmt: skip
    dataset = recheck.screen(dataset, _row_checker(), _stand_in, what="the Layered-VQA dataset",
                             memo_key=("layered_vqa", getattr(dataset, "_fingerprint", None), len(dataset)))  # fmt: skip
    # the round cap from the text columns only (no image is decoded again)
    texts = dataset.select_columns([c for c in dataset.column_names if c not in ("composite", "layers")])
    names = texts["layer_names"]
    for k, row in enumerate(texts):
        if recheck.problem_of(row):
            continue
        row = {**row, "n_layers": len(names[k])}
        for schedule in schedules:
            n_turns = len(deliver(row, schedule, seed, check=False))
            if n_turns > MAX_ROUNDS:
                raise ValueError(
                    f"row {k}: {_where(row)}: schedule {schedule!r} needs {n_turns} turns, more than the "
                    f"{MAX_ROUNDS} rounds lmms-scene runs (MAX_ROUNDS); split the question into fewer shards"
                )
    n = len(dataset)
    index = [k for k in range(n) for _ in schedules]
    out = dataset.select(index)
    out = out.add_column("schedule", [s for _ in range(n) for s in schedules])
    out = out.add_column("n_layers", [len(names[k]) for k in index])
    return out.add_column("seed", [int(seed)] * len(index))


def _row_checker():
    """:func:`loaded_row_problem` with a cache of decoded images for one pass (the
    questions of a scene share its images)."""
    decoded: dict[str, Any] = {}

    def check(row: Mapping[str, Any], index: int) -> str | None:
        return loaded_row_problem(row, index, decoded)

    return check


def loaded_row_problem(row: Mapping[str, Any], index: int, decoded: dict[str, Any] | None = None) -> str | None:
    """Why a loaded Layered-VQA row (undecoded) cannot be evaluated, or None: the
    composite and every layer decoded in full (``decoded`` caches them by content), then
    :func:`validate` with the images (question type, shards, layer indices, sizes)."""
    import hashlib as _hashlib

    from lmms_scene.data import release

    where = f"row {index}: {_where(row)}"
    cache = decoded if decoded is not None else {}

    def image(cell: Any, field: str, mode: str):
        data, _ = release.image_cell_bytes(cell, where, field, release.hub_roots())
        key = _hashlib.sha256(data).hexdigest() + mode
        if key not in cache:
            name = Path(str(cell["path"])).name if isinstance(cell, Mapping) and cell.get("path") else "(the row's bytes)"
            try:
                cache[key] = release.decode_image(data, name).convert(mode)
            except ValueError as exc:
                cache[key] = ValueError(f"{where}: field {field!r}: {exc}")
        if isinstance(cache[key], Exception):
            raise cache[key]
        return cache[key]

    try:
        layers = row.get("layers")
        if not isinstance(layers, list) or not layers:
            return f"{where}: field 'layers': expected at least one layer image, got {type(layers).__name__}"
        item = dict(row)
        item["composite"] = image(row.get("composite"), "composite", "RGB")
        item["layers"] = [image(cell, f"layers[{k}]", "RGBA") for k, cell in enumerate(layers)]
        validate(item)
    except (ValueError, OSError, TypeError) as exc:
        text = str(exc)
        return text if text.startswith(f"row {index}") else f"row {index}: {text}"
    return None


def _stand_in(row: Mapping[str, Any], index: int) -> dict[str, Any]:
    """A Layered-VQA item standing in for a bad one: its ids and answer where they are
    strings, one grey layer (its own composite), one shard, and the notice
    :data:`lmms_scene.data.recheck.UNUSABLE_PROMPT` as the question."""
    from lmms_scene.data import recheck

    text = recheck.text
    kind = row.get("question_type") if row.get("question_type") in QUESTION_TYPES else QUESTION_TYPES[0]
    return {
        "scene_id": text(row.get("scene_id")) or f"unusable_scene_{index:06d}",
        "question_id": text(row.get("question_id")) or f"unusable_row_{index:06d}",
        "question_type": kind, "question": recheck.UNUSABLE_PROMPT, "answer": text(row.get("answer")),
        "composite": recheck.stand_in_image("RGB"), "layers": [recheck.stand_in_image("RGBA")], "layer_names": ["background"],
        "shards": [{"text": recheck.UNUSABLE_PROMPT, "supporting_layers": []}],
        "minimal_sufficient_layers": [0], "distractor_layers": [],
    }  # fmt: skip


def build_sample(folder: str | Path, scenes: int = 4, seed: int = 0) -> list[Path]:
    """Write the embedded sample (``sample/layered_vqa_sample.parquet``) into ``folder``:
    procedurally generated scenes (see :mod:`lmms_scene.data.layered_vqa_synth`); and
    the placeholder the shipped schedule tasks read until their data location is set
    (:func:`write_placeholder`)."""
    from lmms_scene.data import layered_vqa_synth

    folder = Path(folder)
    out = folder / "sample" / "layered_vqa_sample.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    dataset = layered_vqa_synth.dataset(scenes=scenes, seed=seed, size=(160, 120))
    dataset.to_parquet(str(out))
    return [out, write_placeholder(folder)]


# -- the shipped schedule tasks' data location ------------------------------------------

#: The file the shipped ``layered_vqa_<schedule>`` tasks and the ``layered_vqa`` group read
#: (relative to the task folder) until someone sets their data location, the one place
#: being ``dataset_path`` / ``dataset_kwargs`` in ``tasks/layered_vqa/_default_template_yaml``:
#: one row, one column (:data:`PLACEHOLDER_COLUMN`). The public hub location of the
#: dataset is not known yet; ``process_docs`` (:func:`schedule_docs`) sees the placeholder
#: and stops the run before the model is loaded, with :func:`not_built_message`.
PLACEHOLDER_FILE = Path("placeholder") / "not_built.parquet"
PLACEHOLDER_COLUMN = "lmms_scene_layered_vqa_placeholder"


def not_built_message() -> str:
    """What a run of the shipped schedule tasks says while they read the placeholder."""
    return (
        "Layered-VQA: the shipped tasks layered_vqa_<schedule> and the group layered_vqa read "
        f"tasks/layered_vqa/{PLACEHOLDER_FILE.as_posix()}, a placeholder: the public location of the dataset "
        "is not set in this version. Build the data into a folder of your own, then run the command the "
        "build prints (its own tasks, layered_vqa_<schedule>_NAME and the group layered_vqa_NAME):\n"
        "  lmms-scene build layered-synth --scenes 20 --seed 0 --out DIR --name NAME   (generated scenes)\n"
        "  lmms-scene build layered-vqa --release RELEASE --out DIR --name NAME      (a release folder; "
        "layout in docs/layered_vqa.md)\n"
        "  lmms-scene eval --include_path DIR/tasks --tasks layered_vqa_NAME --model ... --batch_size 1 "
        "--output_path results/ --log_samples\n"
        "Or point the shipped tasks at data: set dataset_path/dataset_kwargs in "
        "tasks/layered_vqa/_default_template_yaml (lmms-scene tasks-path prints the folder) to "
        "DIR/data/test-00000-of-00001.parquet or to the hub dataset. "
        "layered_vqa_sample (the embedded sample) runs as it is."
    )


def write_placeholder(folder: str | Path) -> Path:
    """Write :data:`PLACEHOLDER_FILE` under ``folder`` (the task folder)."""
    from datasets import Dataset

    path = Path(folder) / PLACEHOLDER_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    Dataset.from_dict({PLACEHOLDER_COLUMN: ["Layered-VQA data not set: see not_built_message()"]}).to_parquet(str(path))
    return path


def check_built(dataset) -> None:
    """Raise ``FileNotFoundError`` (:func:`not_built_message`) when ``dataset`` is the
    placeholder rather than Layered-VQA items."""
    if PLACEHOLDER_COLUMN in (getattr(dataset, "column_names", None) or ()):
        raise FileNotFoundError(not_built_message())


# -- building a dataset from a local release --------------------------------------------

#: what a release folder holds (docs/layered_vqa.md, "Building from a release")
RELEASE_LAYOUT = """\
RELEASE/
  questions.jsonl            one question per line: scene_id, question_id, question_type, question,
                             answer, shards [{text, supporting_layers}], minimal_sufficient_layers,
                             distractor_layers
  scenes/<scene_id>/composite.png
  scenes/<scene_id>/layers/<k>_<name>.png   k = 0 (background), 1, 2, ... back to front
"""


@dataclass(frozen=True)
class BuildReport:
    """What a build wrote: ``out`` the parquet file, ``card`` its card, and (for a local
    build, :func:`write_local`) ``written``: the task folder, task and group names."""

    rows: int
    scenes: int
    max_difference: dict[str, int]
    out: Path
    card: Path
    written: Mapping[str, Any] = field(default_factory=dict)

    @property
    def include_path(self) -> Path:
        return self.written["include_path"]

    @property
    def tasks(self) -> list[str]:
        return list(self.written.get("tasks", ()))

    @property
    def groups(self) -> list[str]:
        return list(self.written.get("groups", ()))


def _read_questions(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no question file (expected layout:\n{RELEASE_LAYOUT})")
    from lmms_scene.files import iter_jsonl

    out = []
    for lineno, record in iter_jsonl(path):
        record["_line"] = lineno
        out.append(record)
    if not out:
        raise ValueError(f"{path}: no questions")
    return out


def _release_image(release: Path, path: Path, mode: str, where: str):
    """One image file of the release: confined to the release folder (a symbolic link
    out of it is refused), decoded in full, converted to ``mode``."""
    from lmms_scene.data import release as files

    relative = path.relative_to(release).as_posix()
    _, data = files.read_file(release, relative, where, "image")
    try:
        return files.decode_image(data, str(path)).convert(mode)
    except ValueError as exc:
        raise ValueError(f"{where}: {exc}") from None


def _scene_images(folder: Path, scene_id: str):
    from lmms_scene.data import release as files

    where = f"scene {scene_id!r}"
    if "/" in scene_id or "\\" in scene_id:
        raise ValueError(f"{where}: field 'scene_id': a scene id names one folder under scenes/, got {scene_id!r}")
    scene_dir = files.inside(folder, f"scenes/{scene_id}", where, "scene_id")
    comp_path = scene_dir / "composite.png"
    if not comp_path.is_file():
        raise FileNotFoundError(f"scene {scene_id!r}: {comp_path} not found")
    files_ = []
    for p in sorted((scene_dir / "layers").glob("*.png")):
        head, _, name = p.stem.partition("_")
        if not head.isdigit():
            raise ValueError(f"scene {scene_id!r}: layer file {p.name} does not start with its index (e.g. 0_background.png)")
        files_.append((int(head), name or f"layer {head}", p))
    files_.sort()
    if not files_:
        raise FileNotFoundError(f"scene {scene_id!r}: no layer PNGs in {scene_dir / 'layers'}")
    indices = [k for k, _, _ in files_]
    if indices != list(range(len(files_))):
        raise ValueError(f"scene {scene_id!r}: layer indices {indices} are not 0..{len(files_) - 1}")
    if len(files_) > MAX_LAYERS:
        raise ValueError(
            f"scene {scene_id!r}: {len(files_)} layers, more than the {MAX_LAYERS} a scene may have: the recap-v "
            f"schedule delivers a scene in one turn per layer plus one, and lmms-scene runs at most {MAX_ROUNDS} "
            f"rounds (MAX_ROUNDS); merge layers or split the scene"
        )
    layers = [_release_image(folder, p, "RGBA", f"scene {scene_id!r}: layer {k}") for k, _, p in files_]
    for k, layer in enumerate(layers):
        if layer.size != layers[0].size:
            raise ValueError(f"scene {scene_id!r}: layer {k} ({files_[k][2].name}) is {layer.size[0]}x{layer.size[1]}, layer 0 is {layers[0].size[0]}x{layers[0].size[1]}")
    composite = _release_image(folder, comp_path, "RGB", f"scene {scene_id!r}: composite")
    return composite, layers, [n for _, n, _ in files_]


def max_turns(item: Mapping[str, Any]) -> tuple[int, str]:
    """The most turns any schedule delivers ``item`` in, and that schedule."""
    counts = [(len(deliver(item, name, check=False)), name) for name in SCHEDULES]
    return max(counts, key=lambda c: c[0])


def repeated(values: Sequence[Any]) -> list[Any]:
    """The values that occur more than once, in order of their first repeat (one pass)."""
    seen: set[Any] = set()
    out: dict[Any, None] = {}
    for value in values:
        if value in seen:
            out.setdefault(value, None)
        seen.add(value)
    return list(out)


def release_items(release: str | Path, tolerance: int = compositing.DEFAULT_TOLERANCE) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """The validated items of a local release folder (:data:`RELEASE_LAYOUT`) and the max
    pixel difference per scene. Every file is read inside the release folder (no
    ``..``, no symbolic link out of it) and decoded in full; every scene's layers must
    alpha-composite back to its composite within ``tolerance``, every referenced layer
    index must exist, every schedule must fit in :data:`MAX_ROUNDS` turns, question ids
    must be unique; an error names the scene or the question and its line."""
    from lmms_scene.data import release as files

    release = Path(release)
    if (release / "questions.jsonl").is_file():  # not a link out of the release
        files.inside(release, "questions.jsonl", "the release", "questions.jsonl")
    questions = _read_questions(release / "questions.jsonl")
    scenes: dict[str, Any] = {}
    diffs: dict[str, int] = {}
    items = []
    for q in questions:
        where = f"questions.jsonl line {q['_line']}"
        scene_id = q.get("scene_id")
        if not isinstance(scene_id, str) or not scene_id:
            raise ValueError(f"{where}: scene_id: expected a non-empty string, got {scene_id!r}")
        if scene_id not in scenes:
            try:
                composite, layers, names = _scene_images(release, scene_id)
            except (ValueError, FileNotFoundError) as err:
                raise type(err)(f"{where}: {err}") from None
            check = compositing.check_recomposition(layers, composite, tolerance, name=f"scene {scene_id!r}")
            diffs[scene_id] = check.max_difference
            scenes[scene_id] = (composite, layers, names)
        composite, layers, names = scenes[scene_id]
        item = {k: q.get(k) for k in COLUMNS if k not in ("composite", "layers", "layer_names")}
        item.update(composite=composite, layers=layers, layer_names=names)
        for key in ("shards", "minimal_sufficient_layers", "distractor_layers"):
            if item[key] is None:
                raise ValueError(f"{where}: {_where(item)}: missing field {key!r}")
        if not isinstance(item["shards"], list):
            raise ValueError(f"{where}: {_where(item)}: shards: expected a list of {{text, supporting_layers}}, got {item['shards']!r}")
        item["shards"] = [{"text": s.get("text"), "supporting_layers": list(s.get("supporting_layers") or [])} if isinstance(s, Mapping) else s for s in item["shards"]]
        try:
            validate(item)
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from None
        turns, schedule = max_turns(item)
        if turns > MAX_ROUNDS:
            raise ValueError(
                f"{where}: {_where(item)}: schedule {schedule!r} needs {turns} turns, more than the {MAX_ROUNDS} rounds "
                f"lmms-scene runs (MAX_ROUNDS): every evaluation of this release would fail; split the question into "
                f"fewer shards (at most {MAX_ROUNDS - 1})"
            )
        items.append(item)
    dupes = repeated([i["question_id"] for i in items])
    if dupes:
        raise ValueError(f"questions.jsonl: repeated question_id {dupes[:5]}")
    return items, diffs


def build_release(
    release: str | Path,
    out: str | Path,
    tolerance: int = compositing.DEFAULT_TOLERANCE,
    source: str = "local release",
    name: str | None = None,
) -> BuildReport:
    """``lmms-scene build layered-vqa``: a local release folder (:data:`RELEASE_LAYOUT`,
    checked by :func:`release_items`) written to the folder ``out`` with its card and
    the tasks that evaluate it (:func:`write_local`; ``name`` default: the folder's
    name). Nothing is written when a check fails."""
    items, diffs = release_items(release, tolerance)
    card = card_text(items, source=source, max_difference=max(diffs.values()), tolerance=tolerance)
    written = write_local(items, out, card, name=name, tool="lmms-scene build layered-vqa")
    return BuildReport(len(items), len(diffs), diffs, written["data"], written["card"], written)


def card_text(items: Sequence[Mapping[str, Any]], *, source: str, max_difference: int, tolerance: int,
              license: str = "see the release", license_id: str = "other") -> str:  # fmt: skip
    """The dataset card: where the data came from, license (``license_id`` the hub's
    identifier, ``license`` in words), split, counts, features."""
    from collections import Counter

    from lmms_scene.prompts import render

    text = render(
        "layered_vqa/card.md.jinja",
        source=source,
        license=license,
        rows=len(items),
        scenes=len({i["scene_id"] for i in items}),
        types=sorted(Counter(i["question_type"] for i in items).items()),
        depths=sorted(Counter(len(i["layers"]) for i in items).items()),
        max_difference=max_difference,
        tolerance=tolerance,
        features=list(COLUMNS),
    )
    from lmms_scene.data.card import front_matter

    head = front_matter(license=license_id, source=source, pretty_name="Layered-VQA", splits=["test"],
                        task_categories=["visual-question-answering"], license_terms=license)  # fmt: skip
    return head + text.lstrip("\n") + "\n"


def build_synthetic(
    out: str | Path, scenes: int, seed: int = 0, size: tuple[int, int] = (320, 240), name: str | None = None
) -> BuildReport:
    """``lmms-scene build layered-synth``: generated scenes written to the folder ``out``
    with their card and the tasks that evaluate them (:func:`write_local`)."""
    from lmms_scene.data import layered_vqa_synth

    items = layered_vqa_synth.generate(scenes, seed, size)
    card = card_text(
        items, source=f"lmms-scene procedural generator (layered_vqa_synth), {scenes} scenes, seed {seed}, {size[0]}x{size[1]}",
        max_difference=0, tolerance=0, license="CC0-1.0 (generated by lmms-scene)", license_id="cc0-1.0",
    )  # fmt: skip
    written = write_local(items, out, card, name=name, tool="lmms-scene build layered-synth")
    return BuildReport(len(items), len({i["scene_id"] for i in items}), {}, written["data"], written["card"], written)


# -- a locally built dataset, ready to evaluate (lmms_scene.data.local) -----------------

#: our group a local build models its group on (same aggregate metrics)
GROUP = _schedules.GROUP


def local_names(name: str) -> tuple[list[str], str]:
    """The task names (``layered_vqa_<schedule>_NAME``, in schedule order) and the group
    name (``layered_vqa_NAME``) of a local build called ``name``."""
    from lmms_scene.data import local

    suffix = local.slug(name)
    return [f"{task}_{suffix}" for task in _schedules.TASKS], f"{GROUP}_{suffix}"


def local_task_configs(out: Path, name: str) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """The task configs (the 16 schedule tasks) and the group config that evaluate the
    dataset written under ``out``: our own tasks with the data files swapped, written out
    in full, declaring ``metadata.benchmark: layered_vqa``; the group with our
    ``layered_vqa`` group's aggregate metrics. A name that one of lmms-scene's own tasks
    or groups has (``--name sample`` makes the group ``layered_vqa_sample``) is an error
    naming it."""
    from lmms_scene.data import local

    tasks, group = local_names(name)
    local.check_free([*tasks, group], name)
    # our generated schedule tasks (tasks/layered_vqa/_generate_config.py writes them from the
    # same table), copied in full with the data swapped: a local build cannot diverge from them
    configs = local.task_configs(out, name, "layered_vqa", list(_schedules.TASKS))
    return configs, {group: local.group_config(group, list(configs), GROUP, "layered_vqa", out)}


def write_local(items_or_dataset, out: str | Path, card: str, name: str | None = None, tool: str = "lmms-scene build layered-vqa") -> dict[str, Any]:
    """Write Layered-VQA items (or a ``datasets.Dataset`` in :func:`features`) to the
    folder ``out`` (layout: :mod:`lmms_scene.data.local`) with ``card``, the 16 schedule
    tasks and the group (:func:`local_task_configs`; ``name`` default: the folder's
    name). Names are checked before anything is written."""
    from datasets import Dataset

    from lmms_scene.data import local

    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out: {out} is a file; give a folder (it gets data/, README.md and tasks/)")
    tasks, groups = local_task_configs(out.resolve(), name or out.resolve().name)
    dataset = items_or_dataset if isinstance(items_or_dataset, Dataset) else Dataset.from_list(list(items_or_dataset), features=features())
    return local.write_local(dataset, out, card, tasks, groups, tool=tool)


#: how the printed command runs a model with native multi-round support (docs/layered_vqa.md)
MULTI_ROUND_MODEL = ("qwen2_5_vl", "pretrained=Qwen/Qwen2.5-VL-7B-Instruct", ("--force_simple", "--batch_size", "1"))


def evaluate_commands(written: Mapping[str, Any]) -> dict[str, str]:
    """The commands that evaluate a local build: ``model`` (a multi-round-capable model,
    the simple ``qwen2_5_vl`` class at batch size 1) and ``scene_blind`` (the text-prior
    baseline); both run the group (all 16 schedules)."""
    from lmms_scene.data import local

    model, args, extra = MULTI_ROUND_MODEL
    return {
        "model": local.evaluate_command(written, model=model, model_args=args, extra=extra),
        "scene_blind": local.evaluate_command(written, model="scene_blind", model_args=None),
    }


def publish_build(out, *, folder=None, hub=None, metadata=None):
    """``lmms-scene publish layered-vqa --from-folder RELEASE``: build into ``out``."""
    if hub is not None:
        raise ValueError("publish layered-vqa: --from-hub is only for cooco; give --from-folder DIR or --dataset D")
    if folder is None:
        raise ValueError("publish layered-vqa: give --from-folder DIR or --dataset D")
    if metadata is not None:
        raise ValueError("publish layered-vqa: --metadata does not apply (the release folder holds its items)")
    build_release(folder, out, source=str(folder), name="publish")
    return out, f"built by `lmms-scene publish layered-vqa` from the local release {folder.resolve()}"
