"""The views of a COOCO row the lmms-eval task needs: the padded image, the noisy image,
the target crop, the prompt coordinates, and the naming / noise-grid document lists."""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

from lmms_scene import imaging
from lmms_scene.cache import memo
from lmms_scene.data.cooco.fields import size_warning
from lmms_scene.data.cooco.schema import (
    NAMING_CONDITIONS,
    NO_NOISE_AREA,
    NOISE_LEVELS,
    READINGS,
    label_key,
    parse_filename,
)

NOISE_AREAS: tuple[str, ...] = imaging.NOISE_AREAS


def padded(doc: Mapping[str, Any]):
    """The doc's image padded onto the grey square, and its target box shifted onto it.

    Raises ``ValueError`` naming the row when the decoded image's size is not the doc's
    ``width`` x ``height`` (the box and the prompt coordinates refer to that size; a
    mismatch means the image was transformed on decoding, e.g. by an EXIF rotation)."""
    image = doc["image"]
    if "width" in doc and "height" in doc:
        expected = (int(doc["width"]), int(doc["height"]))
        if tuple(image.size) != expected:
            raise ValueError(
                f"{doc.get('image_id', '?')}: decoded image is {image.size[0]}x{image.size[1]} but the row "
                f"says {expected[0]}x{expected[1]}; its target box and prompt coordinates would not match "
                f"the pixels (an EXIF-rotated image? rebuild the data with `lmms-scene build cooco`)"
            )
    return imaging.pad_to_square(image, doc["target_bbox"])


def noise_seed(doc: Mapping[str, Any]) -> int:
    """Seed of the doc's noise field: per (image, level), not per area, so the three
    areas share one field (``all`` = ``target`` inside the box, ``context`` outside)."""
    return imaging.noise_seed("cooco", doc["image_id"], float(doc["noise_level"]))


def warn_if_costly(doc: Mapping[str, Any]) -> str | None:
    """Warn, once per image, when padding and noise make an image costly (a 10000 x 50
    image becomes a 10000 x 10000 square for every view); returns the warning or None."""
    text = size_warning(int(doc.get("width") or doc["image"].size[0]), int(doc.get("height") or doc["image"].size[1]))
    if text is None:
        return None

    def once() -> str:
        warnings.warn(f"COOCO {doc.get('image_id', '?')}: {text}", UserWarning, stacklevel=3)
        return text

    return memo("cooco-size-warnings", str(doc.get("image_id")), once)


def visual(doc: Mapping[str, Any]):
    """What the model sees: the padded image with the doc's noise setting applied."""
    warn_if_costly(doc)
    image, box = padded(doc)
    level = float(doc.get("noise_level", 0.0))
    if level == 0:
        return image
    return imaging.add_gaussian_noise(image, box, doc["noise_area"], level, noise_seed(doc))


def gold_of(doc: Mapping[str, Any]) -> str:
    """What a doc's answer is scored against: its ``gold_label``; for a clean image
    (evaluated only with ``LMMS_SCENE_COOCO_CLEAN=include``) the removed target, so that
    its "accuracy" is the rate of naming an object that is no longer there."""
    if doc["condition"] == "clean":
        return str(doc["target"])
    return str(doc["gold_label"])


def doc_reading(doc: Mapping[str, Any]) -> str:
    """The reading a doc is scored in (``cleaned`` or ``authors``), from the run's
    ``selection`` counts (:func:`selection`); ``cleaned`` for rows without one."""
    return str((doc.get("selection") or {}).get("reading") or "cleaned")


def authors_spelling(doc: Mapping[str, Any], field: str) -> str:
    """A label as the authors' ``evaluate.py`` gives it to CLIP: the metadata's value with
    ``_`` read as a space and nothing else (``baseball_`` -> ``"baseball "``, trailing space
    kept). The built row keeps the label tidied (``baseball``); the file name keeps the
    THINGSplus spelling, so it is read from there when it names the same label (a ``/``,
    which file names write as ``_``, is kept as the row has it)."""
    label = str(
        doc["target"] if field == "target" else doc["gold_label"] if doc["condition"] != "clean" else doc["target"]
    )
    try:
        parsed = parse_filename(str(doc["image_id"]) + ".jpg")
    except ValueError:
        return label
    spelled = parsed["target" if field == "target" or doc["condition"] == "original" else "swapped_object"]
    if "/" in label or label_key(spelled) != label_key(label):
        return label
    return spelled.replace("_", " ")


def naming_item(doc: Mapping[str, Any], output: str | None) -> dict[str, Any]:
    """A doc and a model answer as the item :func:`lmms_scene.metrics.cooco.scoring.score_rows` scores."""
    reading = doc_reading(doc)
    spellings = (
        {"gold_spelling": authors_spelling(doc, "gold"), "target_spelling": authors_spelling(doc, "target")}
        if reading == "authors"
        else {}
    )
    return {
        "reading": reading,
        **spellings,
        "image_id": doc["image_id"],
        "condition": doc["condition"],
        "noise_area": doc.get("noise_area", "none"),
        "noise_level": float(doc.get("noise_level", 0.0)),
        "scene": doc["scene"],
        "target": doc["target"],
        "gold": gold_of(doc),
        "selection": doc.get("selection"),
        "output": output,
        "crop": target_crop(doc),
        # the noise-free crop is the same under every noise setting: encode it once
        "crop_key": (
            "cooco-crop",
            doc["image_id"],
            tuple(float(v) for v in doc["target_bbox"]),
            int(doc["width"]),
            int(doc["height"]),
        ),
    }


def target_crop(doc: Mapping[str, Any]):
    """The target box of the padded image before noise (the image RefCLIPScore scores)."""
    image, box = padded(doc)
    return imaging.crop_box(image, box)


#: Kosmos-2 location tokens index a 32 x 32 grid of the image (Peng et al. 2024).
KOSMOS_GRID = 32


def kosmos_patch_indices(norm_box: Sequence[float], grid: int = KOSMOS_GRID) -> tuple[int, int]:
    """Upper-left and lower-right patch indices of a normalised xyxy box on a
    ``grid x grid`` raster (row-major), as Kosmos-2's ``<patch_index_NNNN>`` tokens."""
    x1, y1, x2, y2 = norm_box
    col0, row0 = math.floor(x1 * grid), math.floor(y1 * grid)
    col1, row1 = math.ceil(x2 * grid) - 1, math.ceil(y2 * grid) - 1
    clamp = lambda v: min(max(v, 0), grid - 1)
    col0, row0, col1, row1 = clamp(col0), clamp(row0), clamp(max(col1, col0)), clamp(max(row1, row0))
    return row0 * grid + col0, row1 * grid + col1


def padded_geometry(doc: Mapping[str, Any]) -> tuple[int, imaging.Box]:
    """Side of the padded square and the target box on it, from the doc's stored
    ``width``/``height`` (no image decoding; lmms-eval hands ``doc_to_text`` docs
    without their image column)."""
    side, dx, dy = imaging.pad_offsets(int(doc["width"]), int(doc["height"]))
    x, y, w, h = (float(v) for v in doc["target_bbox"])
    return side, (x + dx, y + dy, w, h)


def prompt_context(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Box coordinates on the padded square in every form a prompt template uses:
    ``x1..y2`` absolute integer pixels (Qwen's format): each edge of the float box
    rounded to the nearest integer, the rectangle the RefCLIPScore crop takes
    (:func:`lmms_scene.imaging.crop_pixels`; x2/y2 exclusive); ``nx1..ny2`` the float box
    (xyxy) normalised by the side to [0, 1], ``cx, cy`` the float box's centre on a
    0-100 grid, ``side`` the square's side, ``patch_ul, patch_lr`` Kosmos-2 patch indices
    of the normalised float box. Only the integer pixels are rounded."""
    side, box = padded_geometry(doc)
    x1, y1, x2, y2 = imaging.crop_pixels(box, (side, side))
    clip01 = lambda v: min(max(v, 0.0), 1.0)
    norm = tuple(clip01(v / side) for v in imaging.xywh_to_xyxy(box))
    ul, lr = kosmos_patch_indices(norm)
    return {
        "x1": x1,
        "y1": y1,
        "x2": x2,
        "y2": y2,
        "nx1": norm[0],
        "ny1": norm[1],
        "nx2": norm[2],
        "ny2": norm[3],
        "cx": 100.0 * (norm[0] + norm[2]) / 2,
        "cy": 100.0 * (norm[1] + norm[3]) / 2,
        "side": side,
        "patch_ul": ul,
        "patch_lr": lr,
    }


def _with_setting(dataset, area: str, level: float):
    """``dataset`` with constant ``noise_area``/``noise_level`` columns. ``add_column``
    on a dataset without an indices mapping concatenates Arrow columns: the image
    bytes are shared, not copied or decoded."""
    from datasets import Value  # deferred: datasets (pyarrow, pandas) is heavy to import

    n = len(dataset)
    dataset = dataset.add_column("noise_area", [area] * n, feature=Value("string"))
    return dataset.add_column("noise_level", [float(level)] * n, feature=Value("float32"))


#: ``LMMS_SCENE_COOCO_CLEAN`` values (any case)
CLEAN_SKIP, CLEAN_INCLUDE = ("skip", "no", "0", "false", ""), ("include", "yes", "1", "true")


def clean_option(value: str | bool | None) -> bool:
    """Whether the tasks evaluate the clean images, from ``LMMS_SCENE_COOCO_CLEAN``
    (``skip``, the default and the authors' reading, or ``include``); anything else is
    an error naming the variable and the value."""
    if isinstance(value, bool):
        return value
    word = str(value or "").strip().lower()
    if word in CLEAN_SKIP:
        return False
    if word in CLEAN_INCLUDE:
        return True
    raise ValueError(f"LMMS_SCENE_COOCO_CLEAN={value!r}: expected 'skip' (the default) or 'include'")


def reading_option(value: str | None, include_clean: bool = False) -> str:
    """The reading the tasks score in, from ``LMMS_SCENE_COOCO_READING``: ``cleaned`` (the
    default) or ``authors`` (the authors' inputs: :mod:`lmms_scene.metrics.cooco.scoring`).
    Anything else is an error naming the variable and the value, and so is ``authors``
    with clean images included (their evaluation never scores a clean image)."""
    word = str(value or "").strip().lower() or "cleaned"
    if word not in READINGS:
        raise ValueError(f"LMMS_SCENE_COOCO_READING={value!r}: expected 'cleaned' (the default) or 'authors'")
    if word == "authors" and include_clean:
        raise ValueError(
            "LMMS_SCENE_COOCO_READING=authors with LMMS_SCENE_COOCO_CLEAN=include: the authors' "
            "evaluation skips clean images; drop one of the two"
        )
    return word


def selection(dataset, include_clean: bool = False, reading: str = "cleaned") -> dict[str, Any]:
    """Which rows of ``dataset`` the tasks evaluate, as the authors' evaluation reads the
    release: ``excluded`` rows never (the authors' verification rejected them), clean
    images (target removed) only with ``include_clean``; and the ``reading`` every row is
    scored in. Counts read two columns only."""
    conditions, excluded = dataset["condition"], dataset["excluded"]
    n_excluded = sum(bool(e) for e in excluded)
    n_clean = sum(1 for c, e in zip(conditions, excluded) if c == "clean" and not e)
    kept = sum(
        1
        for c, e in zip(conditions, excluded)
        if not e and (c in NAMING_CONDITIONS or (include_clean and c == "clean"))
    )
    return {
        "release_rows": len(conditions),
        "evaluated": kept,
        "skipped_excluded": n_excluded,
        "skipped_clean": 0 if include_clean else n_clean,
        "clean_included": bool(include_clean),
        "reading": reading,
    }


def _selection_feature():
    from datasets import Value  # deferred: datasets (pyarrow, pandas) is heavy to import

    return {
        "release_rows": Value("int32"),
        "evaluated": Value("int32"),
        "skipped_excluded": Value("int32"),
        "skipped_clean": Value("int32"),
        "clean_included": Value("bool"),
        "reading": Value("string"),
    }


def _naming_filter(dataset, include_clean: bool = False):
    wanted = set(NAMING_CONDITIONS) | ({"clean"} if include_clean else set())
    # input_columns keeps the images encoded; the result is an indices mapping (no copy)
    return dataset.filter(lambda c, e: c in wanted and not e, input_columns=["condition", "excluded"])


def _with_selection(dataset, include_clean: bool, reading: str = "cleaned"):
    """``dataset`` with a constant ``selection`` column (:func:`selection`), so every
    scored row says what the run left out and which reading scores it."""
    counts = selection(dataset, include_clean, reading)
    return dataset.add_column("selection", [counts] * len(dataset), feature=_selection_feature())


def naming_docs(dataset, include_clean: bool = False, reading: str = "cleaned"):
    """Rows that are naming items (not ``clean``, not ``excluded``) at noise level 0; with
    ``include_clean`` the clean images too (scored against the removed target, reported
    apart). Each carries the run's ``selection`` counts."""
    base = dataset.flatten_indices() if dataset._indices else dataset
    return _naming_filter(
        _with_selection(_with_setting(base, NO_NOISE_AREA, 0.0), include_clean, reading), include_clean
    )


def noise_grid_docs(
    dataset,
    areas: Sequence[str] = NOISE_AREAS,
    levels: Sequence[float] = NOISE_LEVELS,
    include_clean: bool = False,
    reading: str = "cleaned",
):
    """Every naming item once per (noise area, noise level): ``len(areas) * len(levels)``
    rows per item, each carrying its setting, item by item (so ``--limit`` still
    covers every setting), and the run's ``selection`` counts.

    Built by concatenating per-setting views of the same Arrow data and reordering
    through an indices mapping, so the full release is not copied six times on disk
    (a batched ``map`` would write every image once per setting)."""
    from datasets import concatenate_datasets  # deferred: datasets (pyarrow, pandas) is heavy to import

    base = dataset.flatten_indices() if dataset._indices else dataset
    base = _with_selection(base, include_clean, reading)
    views = [_naming_filter(_with_setting(base, a, lv), include_clean) for a in areas for lv in levels]
    n = len(views[0])
    grid = concatenate_datasets(views)
    return grid.select([k * n + i for i in range(n) for k in range(len(views))])
