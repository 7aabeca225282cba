"""Procedurally drawn Layered-VQA scenes: fresh, uncontaminated items with exact answers.

A scene is a background (layer 0: sky and ground) and 1-5 flat shapes, each on its own
RGBA layer, drawn back to front; the layers composite exactly (alpha is 0 or 255) to the
scene. Every object has a unique colour, so "the red object" always names one layer.
From the scene's own geometry each scene gets questions of the six types, each with its
exact answer, its shards and their supporting layers, its minimal-sufficient layers
(the layers the answer depends on) and distractor layers (objects sharing the target's
shape or size, which a model could confuse with it):

==================  ===========================================================  =================
type                question                                                     answer
==================  ===========================================================  =================
direct ask          What shape is the red object?                                A circle.
attribute binding   What colour is the large triangle?                           Blue.
occlusion           Which object is partly hidden behind the green square?       The red circle.
counting            How many objects are circles, and how many are squares?      Two circles and one square.
spatial             Where is the red circle relative to the blue triangle?       To the left of the blue triangle.
multi-hop           What colour is the other object with the same shape as ...?  Yellow.
==================  ===========================================================  =================

Everything is drawn from ``random.Random(seed)``: the same arguments give the same bytes.

>>> items = generate(scenes=2, seed=1, size=(64, 48))
>>> sorted({i["question_type"] for i in items}) <= sorted(QUESTION_TYPES)
True
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

from lmms_scene import compositing
from lmms_scene.data.layered_vqa.schema import (
    COLUMNS,
    QUESTION_TYPES,
    features,
    validate,
)
from lmms_scene.progress import progress

COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "green": (30, 170, 60),
    "blue": (40, 70, 220),
    "yellow": (240, 210, 20),
    "purple": (140, 50, 170),
    "orange": (245, 130, 20),
    "black": (20, 20, 20),
    "white": (250, 250, 250),
}
SHAPES = ("circle", "square", "triangle")
SIZES = ("small", "large")
NUMBER_WORDS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten")


@dataclass
class Obj:
    layer: int
    colour: str
    shape: str
    size: str
    box: tuple[int, int, int, int]  # x0, y0, x1, y1
    mask: np.ndarray

    @property
    def name(self) -> str:
        return f"{self.colour} {self.shape}"

    @property
    def centre(self) -> tuple[float, float]:
        return ((self.box[0] + self.box[2]) / 2, (self.box[1] + self.box[3]) / 2)


def _background(w: int, h: int, rng: random.Random) -> np.ndarray:
    horizon = int(h * rng.uniform(0.45, 0.65))
    sky_top = np.array([rng.randint(120, 170), rng.randint(170, 210), 235], np.float32)
    sky_low = np.array([215, 230, 245], np.float32)
    ground = np.array([rng.randint(120, 160), rng.randint(150, 190), rng.randint(90, 120)], np.float32)
    arr = np.zeros((h, w, 4), np.uint8)
    t = np.linspace(0, 1, max(horizon, 1), dtype=np.float32)[:, None]
    arr[:horizon, :, :3] = (sky_top * (1 - t) + sky_low * t)[:, None, :].astype(np.uint8)
    arr[horizon:, :, :3] = ground.astype(np.uint8)
    arr[..., 3] = 255
    return arr


def _draw(w: int, h: int, shape: str, box: tuple[int, int, int, int], colour: tuple[int, int, int]) -> np.ndarray:
    img = Image.new("RGBA", (w, h), (0, 0, 0, 0))
    draw = ImageDraw.Draw(img)
    fill = (*colour, 255)
    x0, y0, x1, y1 = box
    if shape == "circle":
        draw.ellipse(box, fill=fill)
    elif shape == "square":
        draw.rectangle(box, fill=fill)
    else:
        draw.polygon([((x0 + x1) / 2, y0), (x1, y1), (x0, y1)], fill=fill)
    return np.asarray(img).copy()


#: every object keeps at least this share of its pixels visible in the composite (later
#: layers are in front), so every question's supporting objects can be seen
MIN_VISIBLE = 0.5
#: placements tried per object before it goes where it hides nothing
MAX_TRIES = 50


def _visible_fractions(masks: Sequence[np.ndarray]) -> list[float]:
    """Per mask (back to front), the share of its pixels no later mask covers."""
    out = []
    covered = np.zeros_like(masks[0]) if masks else None
    for k in range(len(masks) - 1, -1, -1):  # front to back
        m = masks[k]
        total = int(m.sum())
        out.append(float((m & ~covered).sum()) / total if total else 0.0)
        covered = covered | m
    return out[::-1]


def _place(w: int, h: int, side: int, objects: list, rng: random.Random) -> tuple[int, int]:
    if objects and rng.random() < 0.5:
        # overlap an earlier object on purpose, so occlusion questions exist
        other = rng.choice(objects)
        cx, cy = other.centre
        x0 = int(cx + rng.choice((-1, 1)) * side * rng.uniform(0.3, 0.6) - side / 2)
        y0 = int(cy + rng.uniform(-0.3, 0.3) * side - side / 2)
    else:
        x0, y0 = rng.randint(0, w - side - 1), rng.randint(0, h - side - 1)
    return max(0, min(w - side - 1, x0)), max(0, min(h - side - 1, y0))


def _scene(index: int, rng: random.Random, size: tuple[int, int], n_objects: int):
    w, h = size
    layers = [_background(w, h, rng)]
    colours = rng.sample(list(COLOURS), n_objects)
    objects: list[Obj] = []
    for k in range(n_objects):
        shape = rng.choice(SHAPES)
        size_name = rng.choice(SIZES)
        side = int(min(w, h) * (0.34 if size_name == "large" else 0.2))
        # a placement that leaves every earlier object at least MIN_VISIBLE visible (the
        # new one is in front, fully visible); after MAX_TRIES, the least hiding one
        best = None
        for _ in range(MAX_TRIES):
            x0, y0 = _place(w, h, side, objects, rng)
            box = (x0, y0, x0 + side, y0 + side)
            arr = _draw(w, h, shape, box, COLOURS[colours[k]])
            worst = min(_visible_fractions([o.mask for o in objects] + [arr[..., 3] > 0])[:-1], default=1.0)
            if best is None or worst > best[0]:
                best = (worst, box, arr)
            if worst >= MIN_VISIBLE:
                break
        worst, box, arr = best
        if worst < MIN_VISIBLE:  # nowhere it hides little enough: leave it out of this scene
            continue
        layers.append(arr)
        objects.append(Obj(len(objects) + 1, colours[k], shape, size_name, box, arr[..., 3] > 0))
    # visible mask of each object (later layers are in front)
    for i, obj in enumerate(objects):
        covered = np.zeros_like(obj.mask)
        for later in objects[i + 1 :]:
            covered |= later.mask
        obj.visible = obj.mask & ~covered  # type: ignore[attr-defined]
    return f"synth-{index:04d}", layers, objects


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def _plural(shape: str, n: int) -> str:
    return shape if n == 1 else shape + "s"


def _distractors(target: Obj, objects: Sequence[Obj], minimal: set[int]) -> list[int]:
    return sorted(
        o.layer for o in objects if o.layer not in minimal and (o.shape == target.shape or o.size == target.size)
    )


def _question(qtype, question, answer, shards, minimal, distractors):
    return {
        "question_type": qtype,
        "question": question,
        "answer": answer,
        "shards": [{"text": t, "supporting_layers": sorted(s)} for t, s in shards],
        "minimal_sufficient_layers": sorted(minimal),
        "distractor_layers": sorted(set(distractors) - set(minimal)),
    }


def _direct(objects, rng):
    t = rng.choice(objects)
    m = {t.layer}
    return _question(
        "direct ask",
        f"What shape is the {t.colour} object?",
        f"A {t.shape}.",
        [
            ("Can you help me identify a particular thing in this image?", []),
            ("The answer should name a shape.", [t.layer]),
            (f"The target is the {t.colour} object.", [t.layer]),
        ],
        m,
        _distractors(t, objects, m),
    )


def _binding(objects, rng):
    unique = [o for o in objects if sum(1 for p in objects if (p.size, p.shape) == (o.size, o.shape)) == 1]
    if not unique:
        return None
    t = rng.choice(unique)
    m = {t.layer}
    return _question(
        "attribute binding",
        f"What colour is the {t.size} {t.shape}?",
        f"{_cap(t.colour)}.",
        [
            ("Can you help me figure out a property of a particular thing?", []),
            ("The answer should name a colour.", [t.layer]),
            (f"The target thing is a {t.shape}.", [t.layer]),
            (f"The target {t.shape} is the {t.size} one.", [o.layer for o in objects if o.shape == t.shape]),
        ],
        m,
        [o.layer for o in objects if o.shape == t.shape and o.layer != t.layer],
    )


def _occlusion(objects, rng):
    pairs = []
    for front in objects:
        hidden = [o for o in objects if o.layer < front.layer and (o.mask & front.mask).any() and o.visible.any()]
        if len(hidden) == 1:
            pairs.append((front, hidden[0]))
    if not pairs:
        return None
    front, back = rng.choice(pairs)
    m = {front.layer, back.layer}
    return _question(
        "occlusion",
        f"Which object is partly hidden behind the {front.name}?",
        f"The {back.name}.",
        [
            ("Can you help me identify a particular thing in this image?", []),
            ("The answer should name an object.", [back.layer]),
            ("The target object is partly hidden.", [back.layer, front.layer]),
            (f"It is hidden behind the {front.name}.", [front.layer]),
        ],
        m,
        _distractors(back, objects, m),
    )


def _counting(objects, rng):
    counts = {s: sum(1 for o in objects if o.shape == s) for s in SHAPES}
    present = [s for s in SHAPES if counts[s]]
    if len(present) >= 2 and rng.random() < 0.6:
        a, b = rng.sample(present, 2)
        m = {o.layer for o in objects if o.shape in (a, b)}
        answer = f"{_cap(NUMBER_WORDS[counts[a]])} {_plural(a, counts[a])} and {NUMBER_WORDS[counts[b]]} {_plural(b, counts[b])}."
        return _question(
            "counting",
            f"How many objects are {a}s, and how many are {b}s?",
            answer,
            [
                ("Can you help me figure out the counts for two groups of things?", sorted(m)),
                ("Each requested result is a count.", []),
                (f"Count the {a}s.", [o.layer for o in objects if o.shape == a]),
                (f"Include a count of the {b}s.", [o.layer for o in objects if o.shape == b]),
            ],
            m,
            [o.layer for o in objects if o.layer not in m],
        )
    s = rng.choice(present)
    m = {o.layer for o in objects if o.shape == s}
    return _question(
        "counting",
        f"How many {s}s are there in this scene?",
        f"{_cap(NUMBER_WORDS[counts[s]])}.",
        [
            ("Can you help me figure out a quantity?", sorted(m)),
            ("The requested quantity is a count.", []),
            (f"The things to count are {s}s.", sorted(m)),
            ("Restrict the count to this scene.", [0]),
        ],
        m,
        [o.layer for o in objects if o.layer not in m],
    )


def _relation(a: Obj, b: Obj) -> str | None:
    (ax, ay), (bx, by) = a.centre, b.centre
    dx, dy = ax - bx, ay - by
    side = (b.box[2] - b.box[0]) * 0.25
    if abs(dx) >= 2 * abs(dy) and abs(dx) > side:
        return "to the left of" if dx < 0 else "to the right of"
    if abs(dy) >= 2 * abs(dx) and abs(dy) > side:
        return "above" if dy < 0 else "below"
    return None


def _spatial(objects, rng):
    pairs = [(a, b, r) for a in objects for b in objects if a is not b for r in [_relation(a, b)] if r]
    if not pairs:
        return None
    a, b, rel = rng.choice(pairs)
    m = {a.layer, b.layer}
    return _question(
        "spatial",
        f"Where is the {a.name} relative to the {b.name}?",
        f"{_cap(rel)} the {b.name}.",
        [
            ("Can you help me figure out a spatial property of a particular thing?", []),
            ("The answer should report where the thing is located.", []),
            (f"The target thing is the {a.name}.", [a.layer]),
            (f"Determine its position relative to the {b.name}.", [b.layer]),
        ],
        m,
        _distractors(a, objects, m),
    )


def _multihop(objects, rng):
    pairs = [
        (r, t)
        for r in objects
        for t in objects
        if r is not t and r.shape == t.shape and sum(1 for o in objects if o.shape == r.shape) == 2
    ]
    if not pairs:
        return None
    ref, t = rng.choice(pairs)
    m = {ref.layer, t.layer}
    return _question(
        "multi-hop",
        f"What colour is the other object that has the same shape as the {ref.colour} object?",
        f"{_cap(t.colour)}.",
        [
            ("Can you help me figure out a property of a particular thing?", []),
            ("The answer should name a colour.", [t.layer]),
            (f"The target has the same shape as the {ref.colour} object.", [ref.layer, t.layer]),
            (f"The target is not the {ref.colour} object itself.", [ref.layer]),
        ],
        m,
        [o.layer for o in objects if o.layer not in m],
    )


BUILDERS = {
    "direct ask": _direct,
    "attribute binding": _binding,
    "occlusion": _occlusion,
    "counting": _counting,
    "spatial": _spatial,
    "multi-hop": _multihop,
}


def generate(
    scenes: int, seed: int = 0, size: tuple[int, int] = (320, 240), max_objects: int = 5, id_prefix: str = "synth"
) -> list[dict[str, Any]]:
    """``scenes`` scenes as Layered-VQA items (one per question; every type a scene
    allows). The first ``max_objects`` scenes have ``max_objects`` .. 1 objects. Scene ids
    are ``<id_prefix>-0000``, ``<id_prefix>-0001``, ... (two splits meant to be disjoint
    take two prefixes)."""
    if isinstance(scenes, bool) or not isinstance(scenes, int) or scenes < 1:
        raise ValueError(f"scenes: expected a positive integer, got {scenes!r}")
    w, h = size
    if w < 32 or h < 32:
        raise ValueError(f"size: expected at least 32x32 pixels, got {w}x{h}")
    if not 1 <= max_objects <= len(COLOURS):
        raise ValueError(f"max_objects: expected 1..{len(COLOURS)}, got {max_objects}")
    rng = random.Random(seed)
    items = []

    for index in progress(range(scenes), "layered scenes", unit="scene"):
        # the first scenes take every depth once, deepest first (a one-object scene
        # allows the fewest question types); later ones draw a depth at random
        n_objects = max_objects - index if index < max_objects else rng.randint(1, max_objects)
        scene_id, layers, objects = _scene(index, rng, size, n_objects)
        scene_id = f"{id_prefix}-{index:04d}"
        images = [compositing.to_image(a) for a in layers]
        composite = compositing.composite_image(layers)
        names = ["background", *[o.name for o in objects]]
        for qtype in QUESTION_TYPES:
            q = BUILDERS[qtype](objects, rng)
            if q is None:
                continue
            item = {
                "scene_id": scene_id,
                "question_id": f"{scene_id}-q{len([i for i in items if i['scene_id'] == scene_id])}",
                **q,
                "composite": composite,
                "layers": images,
                "layer_names": names,
            }
            validate(item)
            items.append({k: item[k] for k in _columns()})
    return items


def _columns():
    return COLUMNS


def dataset(
    scenes: int, seed: int = 0, size: tuple[int, int] = (320, 240), max_objects: int = 5, id_prefix: str = "synth"
):
    """:func:`generate` as a ``datasets.Dataset`` with the Layered-VQA features."""
    from datasets import Dataset  # deferred: datasets (pyarrow, pandas) is heavy to import

    items = generate(scenes, seed, size, max_objects, id_prefix)
    return Dataset.from_list(items, features=features())
