"""Object label readers for Pfram's gold system G_obj.

Each reader returns an ordered ``dict`` from an image file name (the key the
feature extractor stores) to the frozen set of object names in that image.

- :func:`read_amber`: AMBER ``annotations.json``; its ``generative`` records list
  the objects truly present (``truth``). The Pfram paper keeps images with at
  least 5 objects, 638 images, counted on the raw ``truth`` list (two of those
  images repeat a word and have 4 distinct objects).
- :func:`read_coco`: COCO instance annotations (``instances_*.json``); an
  image's labels are the category names of its instances (crowd regions included).
- :func:`read_label_map`: a plain JSON object ``{"image.jpg": ["cat", "sofa"], ...}``.
- :func:`read_labels`: any of the three, recognised by its content.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ImageLabels = dict[str, frozenset[str]]

__all__ = ["ImageLabels", "labels_for", "read_amber", "read_coco", "read_label_map", "read_labels"]


def _load(path: str | Path) -> Any:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"labels file not found: {path}")
    with path.open(encoding="utf-8") as f:
        return json.load(f)


def _check_min(min_objects: int) -> None:
    if not isinstance(min_objects, int) or min_objects < 0:
        raise ValueError(f"min_objects: expected a non-negative integer, got {min_objects!r}")


def _amber(records: list[Any], min_objects: int, distinct: bool) -> ImageLabels:
    out: ImageLabels = {}
    for rec in records:
        if not isinstance(rec, Mapping) or rec.get("type") != "generative":
            continue
        truth = rec.get("truth")
        if not isinstance(truth, list):
            raise ValueError(f"AMBER record {rec.get('id')!r}: 'truth' is not a list")  # noqa: TRY004 (bad file content)
        size = len(set(truth)) if distinct else len(truth)
        if size >= min_objects and truth:
            out[f"AMBER_{int(rec['id'])}.jpg"] = frozenset(str(t) for t in truth)
    return out


def read_amber(path: str | Path, *, min_objects: int = 5, distinct: bool = False) -> ImageLabels:
    """AMBER generative records with at least ``min_objects`` objects (Pfram paper, Sec. 4.1).

    ``distinct=False`` counts the raw ``truth`` list as the paper did (638 images
    at 5); ``distinct=True`` counts distinct object names (636 images).
    Keys are ``AMBER_<id>.jpg``, the image names of AMBER's query files.
    """
    _check_min(min_objects)
    data = _load(path)
    if not isinstance(data, list):
        raise ValueError(f"{path}: expected AMBER annotations (a JSON array of records)")  # noqa: TRY004
    return _amber(data, min_objects, distinct)


def _coco(data: Mapping[str, Any], min_objects: int, image_dir: Path | None) -> ImageLabels:
    names = {c["id"]: str(c["name"]) for c in data["categories"]}
    per_image: dict[int, set[str]] = {}
    for ann in data["annotations"]:
        per_image.setdefault(ann["image_id"], set()).add(names[ann["category_id"]])
    out: ImageLabels = {}
    for img in data["images"]:
        labels = per_image.get(img["id"], set())
        if len(labels) < max(min_objects, 1):
            continue
        if image_dir is not None and not (image_dir / img["file_name"]).is_file():
            continue
        out[str(img["file_name"])] = frozenset(labels)
    return out


def read_coco(path: str | Path, *, min_objects: int = 1, image_dir: str | Path | None = None) -> ImageLabels:
    """COCO instance annotations: category names per image.

    Images with fewer than ``min_objects`` distinct categories are dropped; images
    with none are always dropped (no labels, no G_obj). With ``image_dir``, only
    images whose file exists there are kept.
    """
    _check_min(min_objects)
    data = _load(path)
    if not (isinstance(data, Mapping) and {"images", "annotations", "categories"} <= set(data)):
        raise ValueError(f"{path}: expected COCO instances JSON with images, annotations and categories")
    return _coco(data, min_objects, Path(image_dir) if image_dir is not None else None)


def read_label_map(path: str | Path, *, min_objects: int = 1) -> ImageLabels:
    """A JSON object mapping image names to lists of object names."""
    _check_min(min_objects)
    data = _load(path)
    if not isinstance(data, Mapping) or not all(isinstance(v, list) for v in data.values()):
        raise ValueError(f"{path}: expected a JSON object of image name -> list of object names")
    return {str(k): frozenset(str(x) for x in v) for k, v in data.items() if len(set(v)) >= max(min_objects, 1)}


def read_labels(path: str | Path, *, min_objects: int | None = None) -> ImageLabels:
    """Read AMBER, COCO instances or a plain label map, recognised by content.

    ``min_objects`` defaults to 5 for AMBER (the paper's filter) and 1 otherwise.
    """
    data = _load(path)
    if isinstance(data, list) and any(isinstance(r, Mapping) and r.get("type") == "generative" for r in data):
        m = 5 if min_objects is None else min_objects
        _check_min(m)
        return _amber(data, m, False)
    if isinstance(data, Mapping) and {"images", "annotations", "categories"} <= set(data):
        m = 1 if min_objects is None else min_objects
        _check_min(m)
        return _coco(data, m, None)
    return read_label_map(path, min_objects=1 if min_objects is None else min_objects)


def labels_for(image_ids: list[str], labels: Mapping[str, frozenset[str]]) -> list[frozenset[str]]:
    """Labels in the order of ``image_ids``; a clear error names images without labels."""
    missing = [i for i in image_ids if i not in labels]
    if missing:
        raise KeyError(
            f"{len(missing)} image(s) have no labels in the labels file (e.g. {missing[:5]});"
            " extract features only for labelled images or pass a matching labels file"
        )
    return [labels[i] for i in image_ids]
