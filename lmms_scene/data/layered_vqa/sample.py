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



def build_sample(folder: str | Path, scenes: int = 4, seed: int = 0) -> list[Path]:
    """Write the embedded sample (``sample/layered_vqa_sample.parquet``) into ``folder``:
    procedurally generated scenes (see :mod:`lmms_scene.data.layered_vqa.synth`); and
    the placeholder the shipped schedule tasks read until their data location is set
    (:func:`write_placeholder`)."""
    folder = Path(folder)
    out = folder / "sample" / "layered_vqa_sample.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    dataset = synth.dataset(scenes=scenes, seed=seed, size=(160, 120))
    dataset.to_parquet(str(out))
    return [out, write_placeholder(folder)]
