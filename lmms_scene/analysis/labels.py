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

__all__ = ["ImageLabels", "labels_for", "read_amber", "read_coco", "read_json", "read_label_map", "read_labels"]


class _RepeatedKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object whose keys are all distinct (``json``'s default keeps the last of a
    repeated key without a word: an image's labels, or a record's field, would be lost)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _RepeatedKey(key)
        out[key] = value
    return out


def _load(path: str | Path, what: str = "labels file") -> Any:
    """JSON from ``path``; a missing file, bad encoding, malformed JSON or a key repeated
    in one object is an error naming the file (and the line and column of a syntax
    error, the repeated key)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} not found: {path}")
    try:
        with path.open(encoding="utf-8-sig") as f:  # -sig: a BOM (Excel, some editors) is dropped
            return json.load(f, object_pairs_hook=_unique_keys)
    except _RepeatedKey as exc:
        raise ValueError(
            f"{path}: key {exc.args[0]!r} appears more than once in one JSON object; JSON keeps only the last, "
            f"so the others would be lost silently: merge them into one entry"
        ) from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None


def read_json(path: str | Path, what: str = "file") -> Any:
    """Public form of the reader above, for the other Pfram inputs (descriptions, scores, results)."""
    return _load(path, what)


def _is_label(x: Any) -> bool:
    """An object label: a name (or a category number), not a list, null or boolean."""
    return isinstance(x, (str, int)) and not isinstance(x, bool)


def _check_min(min_objects: int) -> None:
    if not isinstance(min_objects, int) or min_objects < 0:
        raise ValueError(f"min_objects: expected a non-negative integer, got {min_objects!r}")


def _amber(records: list[Any], min_objects: int, distinct: bool, path: Path) -> ImageLabels:
    out: ImageLabels = {}
    for n, rec in enumerate(records):
        if not isinstance(rec, Mapping) or rec.get("type") != "generative":
            continue
        rid = rec.get("id")
        if isinstance(rid, bool) or not isinstance(rid, (int, str)) or not str(rid).strip().isdigit():
            raise ValueError(f"{path}: AMBER record {n}: 'id' must be an integer, got {rid!r}")
        truth = rec.get("truth")
        if not isinstance(truth, list) or not all(_is_label(t) for t in truth):
            raise ValueError(
                f"{path}: AMBER record {n} (id {rid!r}): 'truth' must be a list of object names, got {truth!r}"
            )
        name = f"AMBER_{int(rid)}.jpg"
        if name in out:
            raise ValueError(f"{path}: AMBER id {rid!r} appears in more than one generative record")
        size = len(set(truth)) if distinct else len(truth)
        if size >= min_objects and truth:
            out[name] = frozenset(str(t) for t in truth)
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
    return _amber(data, min_objects, distinct, Path(path))


def _coco_field(path: Path, part: str, n: int, item: Any, key: str) -> Any:
    if not isinstance(item, Mapping) or key not in item:
        raise ValueError(f"{path}: {part}[{n}] has no {key!r} (got {str(item)[:80]})")
    return item[key]


def _coco(data: Mapping[str, Any], min_objects: int, image_dir: Path | None, path: Path) -> ImageLabels:
    for part in ("categories", "annotations", "images"):
        if not isinstance(data[part], list):
            raise ValueError(f"{path}: COCO {part!r} must be a list, got {type(data[part]).__name__}")  # noqa: TRY004
    names = {
        _coco_field(path, "categories", n, c, "id"): str(_coco_field(path, "categories", n, c, "name"))
        for n, c in enumerate(data["categories"])
    }
    per_image: dict[Any, set[str]] = {}
    for n, ann in enumerate(data["annotations"]):
        cat = _coco_field(path, "annotations", n, ann, "category_id")
        image_id = _coco_field(path, "annotations", n, ann, "image_id")
        if cat not in names:
            raise ValueError(f"{path}: annotations[{n}] (image_id {image_id!r}): unknown category_id {cat!r}")
        per_image.setdefault(image_id, set()).add(names[cat])
    out: ImageLabels = {}
    for n, img in enumerate(data["images"]):
        image_id = _coco_field(path, "images", n, img, "id")
        file_name = _coco_field(path, "images", n, img, "file_name")
        if not isinstance(file_name, str) or not file_name:
            raise ValueError(
                f"{path}: images[{n}] (id {image_id!r}): file_name must be a non-empty string, got {file_name!r}"
            )
        labels = per_image.get(image_id, set())
        if len(labels) < max(min_objects, 1):
            continue
        if image_dir is not None and not (image_dir / file_name).is_file():
            continue
        if file_name in out:
            raise ValueError(f"{path}: file_name {file_name!r} is listed for more than one image")
        out[file_name] = frozenset(labels)
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
    return _coco(data, min_objects, Path(image_dir) if image_dir is not None else None, Path(path))


def read_label_map(path: str | Path, *, min_objects: int = 1) -> ImageLabels:
    """A JSON object mapping image names to lists of object names."""
    _check_min(min_objects)
    return _label_map(_load(path), min_objects, Path(path))


def _label_map(data: Any, min_objects: int, path: Path) -> ImageLabels:
    if not isinstance(data, Mapping):
        raise ValueError(  # noqa: TRY004 (bad file content)
            f"{path}: expected a JSON object of image name -> list of object names"
            f" (or AMBER annotations, or COCO instances), got a JSON {type(data).__name__}"
        )
    for k, v in data.items():
        if not isinstance(v, list) or not all(_is_label(x) for x in v):
            raise ValueError(
                f"{path}: image {k!r}: expected a JSON object of image name -> list of object names, got {v!r}"
            )
    return {str(k): frozenset(str(x) for x in v) for k, v in data.items() if len(set(v)) >= max(min_objects, 1)}


def read_labels(path: str | Path, *, min_objects: int | None = None) -> ImageLabels:
    """Read AMBER, COCO instances or a plain label map, recognised by content.

    ``min_objects`` defaults to 5 for AMBER (the paper's filter) and 1 otherwise.
    """
    data = _load(path)
    if isinstance(data, list) and any(isinstance(r, Mapping) and r.get("type") == "generative" for r in data):
        m = 5 if min_objects is None else min_objects
        _check_min(m)
        return _amber(data, m, False, Path(path))
    if isinstance(data, Mapping) and {"images", "annotations", "categories"} <= set(data):
        m = 1 if min_objects is None else min_objects
        _check_min(m)
        return _coco(data, m, None, Path(path))
    m = 1 if min_objects is None else min_objects
    _check_min(m)
    return _label_map(data, m, Path(path))


def labels_for(image_ids: list[str], labels: Mapping[str, frozenset[str]]) -> list[frozenset[str]]:
    """Labels in the order of ``image_ids``; a clear error names images without labels."""
    missing = [i for i in image_ids if i not in labels]
    if missing:
        raise KeyError(
            f"{len(missing)} image(s) have no labels in the labels file (e.g. {missing[:5]});"
            " extract features only for labelled images or pass a matching labels file"
        )
    return [labels[i] for i in image_ids]
