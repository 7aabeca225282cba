"""COOCO (Common Objects Out-of-Context; Merlo et al. 2025): schema, builder, sample,
and the views of a row the lmms-eval task needs (padded image, noisy image, prompt
coordinates).

The released data is the hub dataset ``fmerlo/COOCO`` (18,395 images) or a folder of
images named ``{id12}_{scene}_{target}[_{replacement}]_{condition}.jpg`` with optional
metadata. :func:`build_dataset` converts either into one ``datasets.Dataset`` with the
explicit :data:`FEATURES`; every row is validated and a bad row raises
:class:`CoocoBuildError` naming it. Noise is never stored: the task applies it at
evaluation time, deterministically per (image, noise level); the three noise areas
share one noise field.

Command line (through ``lmms-scene build cooco``)::

    lmms-scene build cooco --from-hub fmerlo/COOCO --out data/cooco
    lmms-scene build cooco --from-folder COOCO/images --metadata COOCO/metadata.csv --out data/cooco
    lmms-scene build cooco ... --push-to-hub me/cooco-lmms-scene
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import random
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from lmms_scene import imaging

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
    """A row of the source data cannot be converted; the message names the row."""


# -- parsing ------------------------------------------------------------------------


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


def _label(value: Any) -> str:
    return " ".join(str(value or "").replace("_", " ").split())


def _bbox(value: Any) -> list[float]:
    if isinstance(value, str):
        value = json.loads(value.replace("(", "[").replace(")", "]"))
    box = [float(v) for v in value]
    if len(box) != 4:
        raise ValueError(f"target_bbox needs 4 numbers (x, y, w, h), got {len(box)}")
    return box


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "y", "t")
    return bool(value) if value is not None else False


def _score(value: Any) -> float | None:
    if value is None or value == "":
        return None
    score = float(value)
    return None if math.isnan(score) else score


def _image_bytes(image: Any, base: Path | None) -> tuple[bytes, tuple[int, int], str]:
    """Load an image given as PIL, ``{"bytes", "path"}`` or a path; return bytes to
    store, the size and a note. RGB JPEG/PNG bytes are kept as they are; any other
    mode is converted to RGB (transparency composited onto the padding grey) and
    stored as PNG.

    An EXIF Orientation tag other than 1 would make ``datasets``' ``Image`` feature
    rotate the image when decoding it, while the size and the target box refer to the
    raw pixels. Such an image is stored as its raw (unrotated) pixels, re-encoded
    losslessly as PNG without the tag, so decoding gives the pixels the box refers to."""
    from PIL import Image

    data: bytes | None = None
    if isinstance(image, Image.Image):
        pil = image
    else:
        if isinstance(image, Mapping):
            data = image.get("bytes")
            path = image.get("path")
        else:
            path = image
        if data is None:
            if not path:
                raise FileNotFoundError("no image given")
            file = Path(path)
            if base is not None and not file.is_absolute():
                file = base / file
            if not file.is_file():
                raise FileNotFoundError(f"image file not found: {file}")
            data = file.read_bytes()
        pil = Image.open(io.BytesIO(data))
    # Image.open reads only the header: size, mode and EXIF come without decoding pixels.
    orientation = pil.getexif().get(_EXIF_ORIENTATION)
    oriented = orientation is not None and orientation != 1
    if data is not None and pil.mode == "RGB" and pil.format in ("JPEG", "PNG") and not oriented:
        return data, pil.size, "kept"
    pil.load()
    rgb = imaging.to_rgb(pil)
    buffer = io.BytesIO()
    # PNG is written without EXIF unless asked for: the Orientation tag is dropped.
    rgb.save(buffer, format="PNG")
    note = f"EXIF orientation {orientation} dropped, raw pixels kept" if oriented else f"converted from {pil.mode}"
    return buffer.getvalue(), rgb.size, note


#: EXIF tag 0x0112 (Orientation).
_EXIF_ORIENTATION = 0x0112


def convert_row(raw: Mapping[str, Any], index: int, base: Path | None = None) -> dict[str, Any]:
    """One source row (already renamed to our field names) -> a validated COOCO row."""
    image_value = raw.get("image")
    name = raw.get("file_name") or (image_value.get("path") if isinstance(image_value, Mapping) else None)
    where = f"row {index}" + (f" ({Path(str(name)).name})" if name else "")
    try:
        given = {k: v for k, v in raw.items() if v is not None and v != ""}
        try:
            parsed = parse_filename(Path(str(name)).name) if name else {}
        except ValueError:
            # a name outside the authors' scheme is fine when the metadata says it all
            if not all(f in given for f in (*REQUIRED_FIELDS, "rel_level")):
                raise
            parsed = {}
        if parsed and "rel_level" in given and canonical_condition(given["rel_level"]) != parsed["condition"]:
            raise ValueError(
                f"condition {given['rel_level']!r} in the metadata contradicts the file name's {parsed['rel_level']!r}"
            )
        fields = {**parsed, **given}
        missing = [f for f in REQUIRED_FIELDS if f not in fields]
        if missing:
            raise ValueError(f"missing fields {missing}")
        if "rel_level" not in fields:
            raise ValueError("no condition: neither a rel_level column nor a parsable file name")
        condition = canonical_condition(fields["rel_level"])
        image = image_value if image_value is not None else name
        data, size, _note = _image_bytes(image, base)
        box = _bbox(fields["target_bbox"])
        imaging.validate_box(box, size)
        scene, target = _label(fields["scene"]), _label(fields["target"])
        swapped = _label(fields.get("swapped_object", ""))
        if condition in ("high", "medium", "low") and not swapped:
            raise ValueError(f"condition {condition!r} needs a swapped_object")
        if condition == "same_target" and not swapped:
            swapped = target
        gold = {"original": target, "clean": ""}.get(condition, swapped)
        stem = parsed.get("image_id") or (Path(str(name)).stem if name else f"cooco_{index:06d}")
    except (ValueError, TypeError, KeyError, OSError) as exc:
        raise CoocoBuildError(f"{where}: {exc}") from exc
    return {
        "image": {"bytes": data, "path": None},
        "image_id": stem,
        "coco_id": str(parsed.get("coco_id", "")),
        "scene": scene,
        "target": target,
        "swapped_object": "" if condition in ("original", "clean") else swapped,
        "gold_label": gold,
        "condition": condition,
        "target_bbox": box,
        "width": int(size[0]),
        "height": int(size[1]),
        "rel_level": str(fields["rel_level"]),
        "rel_score": _score(fields.get("rel_score")),
        "excluded": _bool(fields.get("excluded")),
    }


def map_columns(columns: Iterable[str], overrides: Mapping[str, str | None] | None = None) -> dict[str, str | None]:
    """Source column -> our field. Raises ``CoocoBuildError`` listing every column the
    builder does not know, so a changed release schema fails loudly instead of
    silently losing a field."""
    mapping = {**COLUMN_MAP, **(overrides or {})}
    columns = list(columns)
    unknown = [c for c in columns if c not in mapping]
    if unknown:
        raise CoocoBuildError(
            f"unknown COOCO source columns {unknown} (columns seen: {columns}). Map them "
            f"explicitly with --column-map SOURCE=FIELD (FIELD one of "
            f"{sorted({v for v in COLUMN_MAP.values() if v})}) or drop them with SOURCE=-."
        )
    chosen = {c: mapping[c] for c in columns}
    fields = {v for v in chosen.values() if v}
    if "image" not in fields and "file_name" not in fields:
        raise CoocoBuildError(f"no image column among {columns}; map one with --column-map SOURCE=image")
    return chosen


def _rename(row: Mapping[str, Any], mapping: Mapping[str, str | None]) -> dict[str, Any]:
    return {mapping[k]: v for k, v in row.items() if mapping.get(k)}


# -- sources ------------------------------------------------------------------------


def read_metadata(path: Path) -> list[dict[str, Any]]:
    """Rows of a metadata file (``.csv``, ``.jsonl`` or ``.json`` list)."""
    path = Path(path)
    if path.suffix == ".csv":
        with path.open(newline="", encoding="utf-8") as handle:
            return list(csv.DictReader(handle))
    if path.suffix == ".jsonl":
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if path.suffix == ".json":
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, list) else data["rows"]
    raise CoocoBuildError(f"{path}: metadata must be .csv, .jsonl or .json")


def folder_rows(folder: Path, metadata: Path | None = None) -> tuple[list[dict[str, Any]], list[str]]:
    """Raw rows from a folder of images (plus optional metadata) and their columns."""
    folder = Path(folder)
    if not folder.is_dir():
        raise CoocoBuildError(f"{folder}: not a folder")
    if metadata is not None and not Path(metadata).is_file():
        raise CoocoBuildError(f"{metadata}: metadata file not found")
    if metadata is None:
        for candidate in ("metadata.jsonl", "metadata.csv", "metadata.json"):
            if (folder / candidate).is_file():
                metadata = folder / candidate
                break
    if metadata is not None:
        rows = read_metadata(metadata)
        columns = list(dict.fromkeys(k for r in rows for k in r))
        return rows, columns
    files = sorted(p for p in folder.iterdir() if p.suffix.lower() in (".jpg", ".jpeg", ".png"))
    if not files:
        raise CoocoBuildError(f"{folder}: no images and no metadata file")
    # Without metadata the file name carries everything but the box, which COOCO
    # cannot do without; fail now rather than per row.
    raise CoocoBuildError(
        f"{folder}: {len(files)} images but no metadata (metadata.jsonl/.csv/.json with file_name, "
        f"scene, target, swapped_object, target_bbox, rel_level, rel_score, excluded); target boxes "
        f"exist only in the metadata"
    )


def generate_rows(
    rows: Iterable[Mapping[str, Any]], mapping: Mapping[str, str | None], base: Path | None = None
) -> Iterator[dict[str, Any]]:
    seen: dict[str, int] = {}
    for index, raw in enumerate(rows):
        row = convert_row(_rename(raw, mapping), index, base)
        if row["image_id"] in seen:
            raise CoocoBuildError(f"row {index} ({row['image_id']}): duplicate of row {seen[row['image_id']]}")
        seen[row["image_id"]] = index
        yield row


def build_dataset(
    rows: Iterable[Mapping[str, Any]],
    columns: Sequence[str],
    base: Path | None = None,
    column_map: Mapping[str, str | None] | None = None,
):
    """Validated rows -> ``datasets.Dataset`` with :func:`features`."""
    from datasets import Dataset

    mapping = map_columns(columns, column_map)
    return Dataset.from_list(list(generate_rows(rows, mapping, base)), features=features())


def ensure_schema(dataset):
    """``dataset`` in COOCO's :func:`features`: returned as is when it already has them
    (a dataset built by :func:`main` or the sample), else converted row by row with the
    explicit :data:`COLUMN_MAP` (the hub release), failing loudly on unknown columns."""
    from datasets import Image

    ours = set(features())
    if ours <= set(dataset.column_names):
        _check_unique_ids(dataset)
        return dataset
    mapping = map_columns(dataset.column_names)
    if "image" in dataset.column_names:
        dataset = dataset.cast_column("image", Image(decode=False))
    converted = dataset.map(
        lambda row, index: convert_row(_rename(row, mapping), index),
        with_indices=True,
        remove_columns=dataset.column_names,
        features=features(),
    )
    _check_unique_ids(converted)
    return converted


def _check_unique_ids(dataset) -> None:
    """Raise :class:`CoocoBuildError` naming every ``image_id`` that occurs more than once
    (the builder rejects them too: rows are keyed by image id when scores are gathered)."""
    seen: dict[str, int] = {}
    duplicates: dict[str, list[int]] = {}
    for index, image_id in enumerate(dataset["image_id"]):
        if image_id in seen:
            duplicates.setdefault(image_id, [seen[image_id]]).append(index)
        else:
            seen[image_id] = index
    if duplicates:
        listed = "; ".join(f"{k} (rows {', '.join(map(str, v))})" for k, v in list(duplicates.items())[:10])
        more = f" and {len(duplicates) - 10} more" if len(duplicates) > 10 else ""
        raise CoocoBuildError(f"duplicate image_id in {len(duplicates)} cases: {listed}{more}")


def load_hub_rows(repo: str = HUB_REPO, split: str | None = None):
    """The released rows from the hub, images left encoded (no decode/re-encode)."""
    from datasets import Image, load_dataset

    try:
        data = load_dataset(repo, split=split) if split else load_dataset(repo)
    except Exception as exc:
        raise CoocoBuildError(f"could not load {repo!r} from the hub ({type(exc).__name__}: {exc})") from exc
    if hasattr(data, "keys"):  # a DatasetDict: concatenate its splits
        from datasets import concatenate_datasets

        data = concatenate_datasets([data[k] for k in data])
    if "image" in data.column_names:
        data = data.cast_column("image", Image(decode=False))
    return data, list(data.column_names)


# -- dataset card -------------------------------------------------------------------

CITATION = """@inproceedings{merlo2025cooco,
  title     = {{COOCO} -- Common Objects Out-of-Context -- Semantic Violation in Scenes:
               Investigating Multimodal Context in Referential Communication},
  author    = {Merlo, Filippo and Takmaz, Ece and Chen, Wenkai and Gatt, Albert},
  year      = {2025},
  eprint    = {2506.22274},
  archivePrefix = {arXiv}
}"""


def dataset_card(dataset, source: str) -> str:
    """A Hugging Face dataset card (README.md) for a built COOCO dataset."""
    from collections import Counter

    counts = Counter(dataset["condition"])
    table = "\n".join(f"| {c} | {counts.get(c, 0)} |" for c in CONDITIONS)
    return f"""---
license: other
task_categories:
- image-to-text
pretty_name: COOCO (lmms-scene build)
configs:
- config_name: default
  data_files:
  - split: {SPLIT}
    path: data/{SPLIT}-*
---

# COOCO: Common Objects Out-of-Context (lmms-scene build)

Object naming under scene-object (in)congruence (Merlo, Takmaz, Chen and Gatt, 2025,
arXiv:2506.22274). Each image shows a COCO-Search18 scene whose target object was kept
(`original`), removed (`clean`), or replaced by inpainting with an object of the same
category (`same_target`) or of high, medium or low relatedness to the scene.

- **Source:** `{source}`, converted by `lmms-scene build cooco` (lmms-scene). Images are
  stored as released (RGB JPEG/PNG bytes kept as they are; other modes converted to
  RGB). Noise is not stored: the lmms-eval tasks add it at evaluation time.
- **License:** the COOCO release's terms apply (images derive from COCO 2017, whose
  images carry their Flickr licenses; annotations CC BY 4.0). Check the authors'
  repository, https://github.com/cs-nlp-uu/scenereg, before redistributing.
- **Split:** `{SPLIT}` only ({len(dataset)} rows).

| condition | rows |
|---|---|
{table}

## Fields

- `image`, `image_id` (file stem), `coco_id`, `scene`, `target` (original object),
  `swapped_object` (replacement; empty for original/clean), `gold_label` (what a correct
  answer names: the target for `original`, the replacement otherwise, empty for `clean`),
  `condition` (`original|same_target|high|medium|low|clean`; the authors' `relscore_middle`
  is `medium`), `target_bbox` (COCO `[x, y, w, h]` in pixels of `image`), `rel_level` (the
  source's own spelling), `rel_score` (scene-object relatedness), `excluded`.

## Citation

```bibtex
{CITATION}
```
"""


# -- command line -------------------------------------------------------------------


def _parse_column_map(items: Sequence[str]) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for item in items:
        source, sep, field = item.partition("=")
        if not sep or not source:
            raise SystemExit(f"--column-map expects SOURCE=FIELD or SOURCE=-, got {item!r}")
        out[source] = None if field in ("", "-") else field
    return out


def main(argv: list[str]) -> int:
    """``lmms-scene build cooco``: convert the COOCO release into an HF dataset."""
    parser = argparse.ArgumentParser(prog="lmms-scene build cooco", description=main.__doc__)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--from-hub", metavar="REPO", help=f"hub dataset, e.g. {HUB_REPO}")
    source.add_argument("--from-folder", metavar="DIR", type=Path, help="folder of images in the authors' naming scheme")
    parser.add_argument("--metadata", type=Path, help="metadata .csv/.jsonl/.json (default: DIR/metadata.*)")
    parser.add_argument("--split", help="hub split to read (default: all, concatenated)")
    parser.add_argument("--column-map", action="append", default=[], metavar="SOURCE=FIELD", help="map or drop (SOURCE=-) a source column")
    parser.add_argument("--out", type=Path, help="save_to_disk folder (a DatasetDict with split 'test') + README.md")
    parser.add_argument("--push-to-hub", metavar="REPO", help="also push the dataset and its card to this hub repo")
    parser.add_argument("--private", action="store_true", help="with --push-to-hub: create a private repo")
    args = parser.parse_args(argv)
    if not args.out and not args.push_to_hub:
        parser.error("give --out and/or --push-to-hub")
    overrides = _parse_column_map(args.column_map)
    try:
        if args.from_hub:
            rows, columns = load_hub_rows(args.from_hub, args.split)
            base, label = None, f"hf://datasets/{args.from_hub}"
        else:
            rows, columns = folder_rows(args.from_folder, args.metadata)
            base, label = Path(args.from_folder), str(args.from_folder)
        dataset = build_dataset(rows, columns, base, overrides)
    except CoocoBuildError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    from datasets import DatasetDict

    card = dataset_card(dataset, label)
    ddict = DatasetDict({SPLIT: dataset})
    if args.out:
        ddict.save_to_disk(str(args.out))
        (Path(args.out) / "README.md").write_text(card, encoding="utf-8")
        print(f"wrote {len(dataset)} rows to {args.out}")
    if args.push_to_hub:
        ddict.push_to_hub(args.push_to_hub, private=args.private)
        from huggingface_hub import DatasetCard

        DatasetCard(card).push_to_hub(args.push_to_hub)
        print(f"pushed {len(dataset)} rows to {args.push_to_hub}")
    return 0


# -- views of a row used by the lmms-eval task -------------------------------------


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


def visual(doc: Mapping[str, Any]):
    """What the model sees: the padded image with the doc's noise setting applied."""
    image, box = padded(doc)
    level = float(doc.get("noise_level", 0.0))
    if level == 0:
        return image
    return imaging.add_gaussian_noise(image, box, doc["noise_area"], level, noise_seed(doc))


def naming_item(doc: Mapping[str, Any], output: str | None) -> dict[str, Any]:
    """A doc and a model answer as the item :func:`lmms_scene.metrics.naming.score_rows` scores."""
    return {
        "image_id": doc["image_id"],
        "condition": doc["condition"],
        "noise_area": doc.get("noise_area", "none"),
        "noise_level": float(doc.get("noise_level", 0.0)),
        "scene": doc["scene"],
        "target": doc["target"],
        "gold": doc["gold_label"],
        "output": output,
        "crop": target_crop(doc),
        # the noise-free crop is the same under every noise setting: encode it once
        "crop_key": ("cooco-crop", doc["image_id"], tuple(float(v) for v in doc["target_bbox"]), int(doc["width"]), int(doc["height"])),
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
    width, height = int(doc["width"]), int(doc["height"])
    side = max(width, height)
    x, y, w, h = (float(v) for v in doc["target_bbox"])
    # same offsets as imaging.pad_to_square
    return side, (x + (side - width) // 2, y + (side - height) // 2, w, h)


def prompt_context(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Box coordinates on the padded square in every form a prompt template uses:
    ``x1..y2`` absolute integer pixels (the covered pixel rectangle, x2/y2 exclusive;
    Qwen's format), ``nx1..ny2`` the float box (xyxy) normalised by the side to [0, 1],
    ``cx, cy`` the float box's centre on a 0-100 grid, ``side`` the square's side,
    ``patch_ul, patch_lr`` Kosmos-2 patch indices of the normalised float box. Only the
    integer pixels are rounded (as the crop and the noise mask are)."""
    side, box = padded_geometry(doc)
    x1, y1, x2, y2 = imaging.box_pixels(box, (side, side))
    clip01 = lambda v: min(max(v, 0.0), 1.0)
    norm = tuple(clip01(v / side) for v in imaging.xywh_to_xyxy(box))
    ul, lr = kosmos_patch_indices(norm)
    return {
        "x1": x1, "y1": y1, "x2": x2, "y2": y2,
        "nx1": norm[0], "ny1": norm[1], "nx2": norm[2], "ny2": norm[3],
        "cx": 100.0 * (norm[0] + norm[2]) / 2, "cy": 100.0 * (norm[1] + norm[3]) / 2,
        "side": side, "patch_ul": ul, "patch_lr": lr,
    }


NOISE_AREAS: tuple[str, ...] = imaging.NOISE_AREAS
NOISE_LEVELS: tuple[float, ...] = (0.5, 1.0)
NO_NOISE_AREA = "none"


def _with_setting(dataset, area: str, level: float):
    """``dataset`` with constant ``noise_area``/``noise_level`` columns. ``add_column``
    on a dataset without an indices mapping concatenates Arrow columns: the image
    bytes are shared, not copied or decoded."""
    from datasets import Value

    n = len(dataset)
    dataset = dataset.add_column("noise_area", [area] * n, feature=Value("string"))
    return dataset.add_column("noise_level", [float(level)] * n, feature=Value("float32"))


def _naming_filter(dataset):
    # input_columns keeps the images encoded; the result is an indices mapping (no copy)
    return dataset.filter(lambda c, e: c in NAMING_CONDITIONS and not e, input_columns=["condition", "excluded"])


def naming_docs(dataset):
    """Rows that are naming items (not ``clean``, not ``excluded``) at noise level 0."""
    return _naming_filter(_with_setting(dataset.flatten_indices() if dataset._indices else dataset, NO_NOISE_AREA, 0.0))


def noise_grid_docs(dataset, areas: Sequence[str] = NOISE_AREAS, levels: Sequence[float] = NOISE_LEVELS):
    """Every naming item once per (noise area, noise level): ``len(areas) * len(levels)``
    rows per item, each carrying its setting, item by item (so ``--limit`` still
    covers every setting).

    Built by concatenating per-setting views of the same Arrow data and reordering
    through an indices mapping, so the full release is not copied six times on disk
    (a batched ``map`` would write every image once per setting)."""
    from datasets import concatenate_datasets

    base = dataset.flatten_indices() if dataset._indices else dataset
    views = [_naming_filter(_with_setting(base, a, lv)) for a in areas for lv in levels]
    n = len(views[0])
    grid = concatenate_datasets(views)
    return grid.select([k * n + i for i in range(n) for k in range(len(views))])


# -- embedded sample ------------------------------------------------------------------

# (scene, target, high, medium, low): procedural stand-ins, chosen to read like COOCO items.
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
    from PIL import Image, ImageDraw

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
            ("original", "", target), ("relscore_same_target", target, target), ("relscore_high", high, high),
            ("relscore_middle", medium, medium), ("relscore_low", low, low), ("clean", "", None),
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


def build_sample(out_dir: Path) -> list[Path]:
    """Write the embedded sample (``sample/cooco_sample.parquet``) under ``out_dir``
    (the ``tasks/cooco`` folder) and return the written paths."""
    out_dir = Path(out_dir)
    rows = []
    for row in sample_rows():
        buffer = io.BytesIO()
        row["image"].save(buffer, format="JPEG", quality=90)
        # JPEG is what the release ships; reopen so the stored bytes are kept as they are
        rows.append({**row, "image": {"bytes": buffer.getvalue(), "path": row["file_name"]}})
    dataset = build_dataset(rows, list(rows[0]))
    path = out_dir / SAMPLE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    dataset.to_parquet(str(path))
    return [path]
