"""COOCO's embedded sample: procedural scenes drawn by our own code (never copied
data), built through the same builder as the release."""

from __future__ import annotations

import io
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

from lmms_scene import imaging
from lmms_scene.data.cooco.builder import build_dataset
from lmms_scene.data.cooco.schema import CONDITION_ALIASES

_SAMPLE_ITEMS = (
    ("kitchen", "cup", "bowl", "book", "tire"),
    ("bathroom", "toilet", "towel", "umbrella", "anchor"),
    ("street", "stop_sign", "bicycle", "chair", "cake"),
    ("cubicle_office", "laptop", "notebook", "box", "ham"),
    ("dining_room", "fork", "spoon", "candle", "hammer"),
    ("bedroom", "clock", "pillow", "guitar", "shovel"),
)
_SAMPLE_SIZES = ((96, 72), (72, 96), (88, 88), (112, 64), (64, 96), (104, 78))
_SAMPLE_SCORES = {"high": 0.55, "medium": 0.3, "low": 0.08}
SAMPLE_FILE = Path("sample") / "cooco_sample.parquet"


def _colour(label: str, rng: random.Random | None = None) -> tuple[int, int, int]:
    seed = imaging.noise_seed("colour", label)
    r = random.Random(seed)
    return (r.randrange(30, 226), r.randrange(30, 226), r.randrange(30, 226))


def _draw_object(draw, label: str, box: Sequence[float], variant: int) -> None:
    x, y, w, h = box
    x0, y0, x1, y1 = x, y, x + w - 1, y + h - 1
    colour = _colour(label)
    shape = imaging.noise_seed("shape", label) % 4
    if shape == 0:
        draw.ellipse((x0, y0, x1, y1), fill=colour, outline=(20, 20, 20))
    elif shape == 1:
        draw.rectangle((x0, y0, x1, y1), fill=colour, outline=(20, 20, 20))
    elif shape == 2:
        draw.polygon([((x0 + x1) / 2, y0), (x1, y1), (x0, y1)], fill=colour, outline=(20, 20, 20))
    else:
        draw.rounded_rectangle((x0, y0, x1, y1), radius=max(1, int(min(w, h) // 4)), fill=colour)
    # a second, label-specific mark so two objects of one shape still differ
    mark = _colour(label[::-1])
    mx, my = x0 + w * (0.3 + 0.1 * variant), y0 + h * 0.3
    draw.rectangle((mx, my, mx + w * 0.25, my + h * 0.2), fill=mark)


def _sample_scene(scene: str, size: tuple[int, int], seed: int):
    rng = random.Random(seed)
    width, height = size
    wall, floor = _colour(scene + "/wall"), _colour(scene + "/floor")
    image = Image.new("RGB", size, wall)
    draw = ImageDraw.Draw(image)
    horizon = int(height * rng.uniform(0.55, 0.7))
    draw.rectangle((0, horizon, width, height), fill=floor)
    for _ in range(4):  # furniture-like context shapes typical of the scene
        w, h = rng.randint(width // 8, width // 4), rng.randint(height // 8, height // 3)
        x, y = rng.randint(0, width - w), rng.randint(max(0, horizon - h), height - h)
        draw.rectangle((x, y, x + w, y + h), fill=_colour(f"{scene}/furniture/{rng.random():.3f}"))
    bw, bh = rng.randint(width // 4, width // 3), rng.randint(height // 4, height // 3)
    bx, by = rng.randint(1, width - bw - 1), rng.randint(1, height - bh - 1)
    return image, draw, (float(bx), float(by), float(bw), float(bh))


def sample_rows() -> list[dict[str, Any]]:
    """The embedded sample's raw rows (PIL images + metadata), deterministic."""
    rows = []
    for k, ((scene, target, high, medium, low), size) in enumerate(zip(_SAMPLE_ITEMS, _SAMPLE_SIZES)):
        coco_id = f"{990000000001 + k:012d}"  # outside COCO's id range: plainly synthetic
        variants = (
            ("original", "", target),
            ("relscore_same_target", target, target),
            ("relscore_high", high, high),
            ("relscore_middle", medium, medium),
            ("relscore_low", low, low),
            ("clean", "", None),
        )
        for v, (rel_level, swapped, drawn) in enumerate(variants):
            image, draw, box = _sample_scene(scene, size, seed=1000 + k)
            if drawn is not None:
                _draw_object(draw, drawn, box, variant=v % 2)
            parts = [coco_id, scene, target] + ([swapped] if swapped else []) + [rel_level]
            condition = CONDITION_ALIASES[rel_level]
            rows.append(
                {
                    "image": image,
                    "file_name": "_".join(parts) + ".jpg",
                    "scene": scene,
                    "target": target,
                    "swapped_object": swapped,
                    "target_bbox": list(box),
                    "rel_level": rel_level,
                    "rel_score": _SAMPLE_SCORES.get(condition),
                    # one excluded item keeps the task's filter honest
                    "excluded": (k, condition) == (5, "low"),
                }
            )
    return rows


def build_sample(folder: Path) -> list[Path]:
    """Write the embedded sample (``sample/cooco_sample.parquet``) under ``folder``
    (the ``tasks/cooco`` folder) and return the written paths."""
    folder = Path(folder)
    rows = []
    for row in sample_rows():
        buffer = io.BytesIO()
        row["image"].save(buffer, format="JPEG", quality=90)
        # JPEG is what the release ships; reopen so the stored bytes are kept as they are
        rows.append({**row, "image": {"bytes": buffer.getvalue(), "path": row["file_name"]}})
    dataset = build_dataset(rows, list(rows[0]))
    path = folder / SAMPLE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    dataset.to_parquet(str(path))
    return [path]
