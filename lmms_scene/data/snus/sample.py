"""SNUS's embedded sample: our own procedural scenes and template captions."""

from __future__ import annotations

import io
import random
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from lmms_scene.data.snus.schema import SAMPLE_FILE, features

# -- the embedded sample (our own procedural scenes and captions) -------------------------

# (scene, subject, where) and the safety elements the generator may leave out
_SCENES = [
    ("construction site", "worker", "scaffold"),
    ("road works", "flagger", "road"),
    ("warehouse", "forklift driver", "loading dock"),
    ("workshop", "welder", "workbench"),
    ("roof repair", "roofer", "roof"),
    ("kitchen", "cook", "stove"),
]
_OBJECTS = ["guardrail", "warning sign", "fire extinguisher", "safety net", "traffic cone", "first aid kit"]
_WORN = ["helmet", "harness", "safety vest", "gloves", "goggles", "face shield"]
_PLURALS = {"gloves", "goggles"}
_ATTRS = [("ladder", "secured"), ("floor", "dry"), ("cable", "insulated"), ("exit", "marked")]


def _caption(subject: str, where: str, objects: list[str], worn: list[str], attrs: list[tuple[str, str]]) -> str:
    parts = []
    if worn:
        items = " or ".join(w if w in _PLURALS else f"a {w}" for w in worn)
        parts.append(f"The {subject} on the {where} is not wearing {items}.")
    for o in objects:
        parts.append(f"There is no {o} near the {where}.")
    for obj, attr in attrs:
        parts.append(f"The {obj} is not {attr}.")
    return " ".join(parts)


def sample_rows(n: int = 12, seed: int = 0) -> list[dict[str, Any]]:
    """``n`` procedural SNUS rows (images drawn here, captions from templates)."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        scene, subject, where = _SCENES[i % len(_SCENES)]
        worn = rng.sample(_WORN, rng.randint(1, 2))
        objects = rng.sample(_OBJECTS, rng.randint(0, 2))
        attrs = rng.sample(_ATTRS, rng.randint(0, 1))
        rows.append(
            {
                "image_id": f"snus_sample_{i:03d}",
                "image": _draw(i, scene, rng),
                "caption": _caption(subject, where, objects, worn, attrs),
                "missing_objects": worn + objects,
                "missing_attributes": [{"object": o, "attribute": a} for o, a in attrs],
                "missing_relations": [{"subject": subject, "relation": "wear", "object": w} for w in worn],
                "scene": scene,
            }
        )
    return rows


def _draw(i: int, scene: str, rng: random.Random):
    img = Image.new("RGB", (160, 120), (200 + (i * 7) % 50, 210, 225))
    d = ImageDraw.Draw(img)
    d.rectangle([0, 90, 160, 120], fill=(120, 110, 100))  # ground
    x = rng.randint(20, 100)
    d.rectangle([x, 20, x + 50, 88], outline=(90, 60, 30), width=3)  # scaffold / shelf frame
    px = rng.randint(10, 130)
    d.ellipse([px, 40, px + 12, 52], fill=(230, 190, 160))  # head (no helmet drawn)
    d.rectangle([px + 2, 52, px + 10, 78], fill=(40, 80, 160))  # body
    d.line([px + 4, 78, px + 1, 90], fill=(20, 20, 20), width=2)
    d.line([px + 8, 78, px + 11, 90], fill=(20, 20, 20), width=2)
    d.text((4, 4), scene[:20], fill=(0, 0, 0))
    return img


def build_sample(folder: Path) -> list[Path]:
    """Write ``sample/snus_sample.parquet`` under ``folder`` (``tasks/snus``)."""
    from datasets import Dataset  # deferred: datasets (pyarrow, pandas) is heavy to import

    rows = []
    for row in sample_rows():
        buffer = io.BytesIO()
        row["image"].save(buffer, format="PNG")
        rows.append({**row, "image": {"bytes": buffer.getvalue(), "path": f"{row['image_id']}.png"}})
    path = Path(folder) / SAMPLE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    Dataset.from_list(rows, features=features()).to_parquet(str(path))
    return [path]
