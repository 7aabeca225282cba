"""Layered-VQA's 16 delivery schedules bound to the functions that build their turns,
and how a schedule delivers an item.

A *schedule* says what the model receives in each turn. :data:`SCHEDULES` is the one
table of all sixteen (:data:`lmms_scene.data.layered_vqa.schedules.TABLE` with its
builders); :func:`deliver` turns an item and a schedule into a list of :class:`Turn`,
each with its text, the images it shows and which layers each image holds
(:class:`View`).

>>> from lmms_scene.data.layered_vqa.sample import toy_item
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
from typing import Any

from lmms_scene import compositing
from lmms_scene.data.layered_vqa import schedules as _schedules
from lmms_scene.data.layered_vqa.schedules import task_name
from lmms_scene.data.layered_vqa.schema import n_layers, supporting, validate

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
#: and what each turn carries is :mod:`lmms_scene.data.layered_vqa.schedules`' table
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
        "lmms_scene.data.layered_vqa.delivery: the schedule table (schedules.TABLE) and the builders "
        f"(_BUILDERS) disagree: no builder for {sorted(set(_schedules.NAMES) - set(_BUILDERS))}, "
        f"no table row for {sorted(set(_BUILDERS) - set(_schedules.NAMES))}"
    )

#: The sixteen schedules (Table 10, and the paper's section 3 for the rest): the one table
#: (:data:`lmms_scene.data.layered_vqa.schedules.TABLE`, in its order) with its builders.
SCHEDULES: dict[str, Schedule] = {
    name: Schedule(name, family, shape, _BUILDERS[name]) for name, family, shape in _schedules.TABLE
}

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
