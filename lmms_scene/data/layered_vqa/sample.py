"""Layered-VQA's embedded sample (procedural scenes from
:mod:`lmms_scene.data.layered_vqa.synth`) and :func:`toy_item`, the tiny hand-built item
of the doctests, tests and benchmarks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from lmms_scene import compositing
from lmms_scene.data.layered_vqa import synth
from lmms_scene.data.layered_vqa.views import write_placeholder


def toy_item(n_layers: int = 3, size: tuple[int, int] = (8, 6)) -> dict[str, Any]:
    """A tiny hand-built item (for doctests, tests and benchmarks): a grey background, a
    red square (layer 1) and a blue square (layer 2); three shards."""
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


#: the generated split of the shipped ``layered_vqa_synth`` task: procedural scenes (never
#: the paper's data, never ranked as the benchmark), fixed by its version, seed and size;
#: disjoint from the embedded sample (other scenes, other scene ids). A change to the
#: generator that changes this split must bump SYNTH_VERSION (tests/test_layered_vqa_synth.py
#: pins the split's content fingerprint).
SYNTH_VERSION = 1
SYNTH_SEED = 1
SYNTH_SCENES = 60
SYNTH_SIZE = (160, 120)
SYNTH_FILE = Path("synth") / "layered_vqa_synth.parquet"
SYNTH_ID_PREFIX = f"gen{SYNTH_VERSION}"


def synth_description() -> str:
    """What the ``layered_vqa_synth`` task reads, in one sentence (its task metadata, the
    report's note, the docs)."""
    return (
        f"generated scenes (lmms-scene's procedural generator v{SYNTH_VERSION}: {SYNTH_SCENES} scenes, seed {SYNTH_SEED}, "
        f"{SYNTH_SIZE[0]}x{SYNTH_SIZE[1]}), not the paper's data; never ranked as the benchmark"
    )


def build_sample(folder: str | Path, scenes: int = 4, seed: int = 0) -> list[Path]:
    """Write the embedded sample (``sample/layered_vqa_sample.parquet``) into ``folder``:
    procedurally generated scenes (see :mod:`lmms_scene.data.layered_vqa.synth`); the
    generated split of ``layered_vqa_synth`` (:data:`SYNTH_FILE`); and the placeholder the
    shipped schedule tasks read until their data location is set (:func:`write_placeholder`)."""
    folder = Path(folder)
    out = folder / "sample" / "layered_vqa_sample.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    dataset = synth.dataset(scenes=scenes, seed=seed, size=(160, 120))
    dataset.to_parquet(str(out))
    return [out, build_synth(folder), write_placeholder(folder)]


def build_synth(folder: str | Path) -> Path:
    """Write the generated split of ``layered_vqa_synth`` (:data:`SYNTH_FILE`) into ``folder``."""
    out = Path(folder) / SYNTH_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    synth.dataset(scenes=SYNTH_SCENES, seed=SYNTH_SEED, size=SYNTH_SIZE, id_prefix=SYNTH_ID_PREFIX).to_parquet(str(out))
    return out
