"""COOCO's schema: conditions, scene and target vocabularies, the released column names,
the authors' file-naming scheme and the ``datasets.Features`` of a built dataset."""

from __future__ import annotations

from pathlib import Path

HUB_REPO = "fmerlo/COOCO"
SPLIT = "test"

#: Conditions as our rows name them; ``clean`` (target removed) is not a naming item.
CONDITIONS: tuple[str, ...] = ("original", "same_target", "high", "medium", "low", "clean")
NAMING_CONDITIONS: tuple[str, ...] = CONDITIONS[:-1]
#: How the authors' files and metadata spell each condition.
CONDITION_ALIASES: dict[str, str] = {
    "original": "original",
    "clean": "clean",
    "relscore_same_target": "same_target",
    "same_target": "same_target",
    "relscore_high": "high",
    "high": "high",
    "relscore_middle": "medium",
    "relscore_medium": "medium",
    "middle": "medium",
    "medium": "medium",
    "relscore_low": "low",
    "low": "low",
}
#: Condition suffixes of the authors' file names, longest first for parsing.
_FILE_CONDITIONS = sorted((k for k in CONDITION_ALIASES if k in ("original", "clean") or k.startswith("relscore_")), key=len, reverse=True)

#: The 25 COOCO scene labels (Appendix A, Table 2), in the file-name spelling.
SCENES: tuple[str, ...] = (
    "arrival_gate_outdoor", "art_studio", "bakery_shop", "banquet_hall", "bathroom", "bedroom",
    "coffee_shop", "cubicle_office", "delicatessen", "dining_room", "dorm_room", "fastfood_restaurant",
    "gas_station", "home_office", "kitchen", "living_room", "market_outdoor", "music_studio",
    "pantry", "parking_lot", "physics_laboratory", "restaurant", "street", "tower", "train_railway",
)
#: The 18 COCO-Search18 target categories (COOCO's original targets).
TARGETS: tuple[str, ...] = (
    "bottle", "bowl", "car", "chair", "clock", "cup", "fork", "keyboard", "knife", "laptop",
    "microwave", "mouse", "oven", "potted_plant", "sink", "stop_sign", "toilet", "tv",
)

#: Source column -> our field, for the metadata the authors describe. ``None`` drops a
#: column on purpose. A source column in none of these is an error (see build_dataset).
COLUMN_MAP: dict[str, str | None] = {
    "image": "image",
    "file_name": "file_name",
    "filename": "file_name",
    "image_path": "file_name",
    "image_name": "file_name",
    "scene": "scene",
    "target": "target",
    "swapped_object": "swapped_object",
    "target_bbox": "target_bbox",
    "rel_level": "rel_level",
    "condition": "rel_level",
    "rel_score": "rel_score",
    "excluded": "excluded",
    "image_id": None,  # recomputed from the file name
}
REQUIRED_FIELDS = ("scene", "target", "target_bbox")


def features():
    """The COOCO schema as ``datasets.Features`` (import deferred: no work at import)."""
    from datasets import Features, Image, Value
    from datasets import Sequence as Seq

    return Features(
        {
            "image": Image(),
            "image_id": Value("string"),  # file stem, unique per image
            "coco_id": Value("string"),  # 12-digit COCO image id the scene comes from
            "scene": Value("string"),
            "target": Value("string"),  # the original object
            "swapped_object": Value("string"),  # the replacement ("" for original/clean)
            "gold_label": Value("string"),  # what a correct answer names ("" for clean)
            "condition": Value("string"),  # one of CONDITIONS
            "target_bbox": Seq(Value("float32"), length=4),  # COCO x, y, w, h in image pixels
            "width": Value("int32"),  # image size, so prompts need not decode the image
            "height": Value("int32"),
            "rel_level": Value("string"),  # the source's own spelling, e.g. relscore_middle
            "rel_score": Value("float32"),  # scene-object relatedness (None if not given)
            "excluded": Value("bool"),
        }
    )


class CoocoBuildError(ValueError):
    """The source data cannot be converted; the message names the file, row, field and
    value at fault."""


class CoocoBuildWarning(UserWarning):
    """Something in the source is allowed but costly or unusual (e.g. a very large or
    elongated image); the builder also records it in the dataset card."""


def canonical_condition(value: str) -> str:
    key = str(value).strip().lower().replace("-", "_").replace(" ", "_")
    if key not in CONDITION_ALIASES:
        raise ValueError(f"unknown condition {value!r}; known: {sorted(CONDITION_ALIASES)}")
    return CONDITION_ALIASES[key]


def parse_filename(name: str) -> dict[str, str]:
    """Split ``{id12}_{scene}_{target}[_{replacement}]_{condition}.jpg``.

    Scene and target labels may contain underscores, so they are matched against the
    known :data:`SCENES` and :data:`TARGETS` (longest match first); the rest, if any, is
    the replacement object.

    >>> parse_filename("000000064659_cubicle_office_laptop_box_relscore_middle.jpg")["condition"]
    'medium'
    """
    stem = Path(name).stem
    coco_id, _, rest = stem.partition("_")
    if not (len(coco_id) == 12 and coco_id.isdigit()):
        raise ValueError(f"{name}: does not start with a 12-digit COCO id")
    raw_condition = next((c for c in _FILE_CONDITIONS if rest.endswith("_" + c)), None)
    if raw_condition is None:
        raise ValueError(f"{name}: unknown condition suffix; expected one of {_FILE_CONDITIONS}")
    rest = rest[: -len(raw_condition) - 1]
    scene = next((s for s in sorted(SCENES, key=len, reverse=True) if rest.startswith(s + "_")), None)
    if scene is None:
        raise ValueError(f"{name}: scene not among the 25 COOCO scenes")
    rest = rest[len(scene) + 1 :]
    target = next((t for t in sorted(TARGETS, key=len, reverse=True) if rest == t or rest.startswith(t + "_")), None)
    if target is None:
        raise ValueError(f"{name}: target not among the COCO-Search18 categories")
    replacement = rest[len(target) + 1 :]
    return {
        "coco_id": coco_id,
        "image_id": stem,
        "scene": scene,
        "target": target,
        "swapped_object": replacement,
        "rel_level": raw_condition,
        "condition": CONDITION_ALIASES[raw_condition],
    }



#: Noise settings of the ``cooco_noise`` grid (Section 4.2); level 0 is the headline task.
NOISE_LEVELS: tuple[float, ...] = (0.5, 1.0)
NO_NOISE_AREA = "none"
