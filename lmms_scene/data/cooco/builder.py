"""Building the COOCO dataset from its releases: the hub dataset ``fmerlo/COOCO`` or a
folder of images in the authors' naming scheme with metadata. Every row is validated;
a bad row raises :class:`CoocoBuildError` naming it."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from lmms_scene import imaging
from lmms_scene.data.cooco.schema import (
    COLUMN_MAP,
    HUB_REPO,
    REQUIRED_FIELDS,
    CoocoBuildError,
    canonical_condition,
    features,
    parse_filename,
)


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


# -- a locally built dataset, ready to evaluate ----------------------------------------


def build(
    *,
    hub: str | None = None,
    folder: Path | None = None,
    metadata: Path | None = None,
    split: str | None = None,
    column_map: Mapping[str, str | None] | None = None,
):
    """Build COOCO from the hub release (``hub``) or a local folder; returns the dataset
    and a label naming its source (for the card)."""
    if (hub is None) == (folder is None):
        raise ValueError("give exactly one source: hub=REPO or folder=DIR")
    if hub is not None:
        rows, columns = load_hub_rows(hub, split)
        base, label = None, f"hf://datasets/{hub}"
    else:
        rows, columns = folder_rows(Path(folder), metadata)
        base, label = Path(folder), str(folder)
    return build_dataset(rows, columns, base, column_map), label


#: where :func:`write_local` puts things inside its output folder
DATA_FILE = Path("data") / "test-00000-of-00001.parquet"
TASKS_DIR = "tasks"


def _slug(name: str) -> str:
    import re

    slug = re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")
    if not slug:
        raise ValueError(f"--name: {name!r} has no letters or digits to name a task with")
    return slug


def local_task_configs(out: Path, name: str) -> dict[str, dict[str, Any]]:
    """The task configs (``cooco_NAME``, ``cooco_noise_NAME``) that evaluate the dataset
    written under ``out``: our own COOCO tasks with the data files swapped, written out
    in full (no ``include:``), declaring ``metadata.benchmark: cooco``."""
    from lmms_scene.registration import our_task_configs

    ours = our_task_configs()
    slug = _slug(name)
    configs = {}
    for base in ("cooco", "cooco_noise"):
        task = f"{base}_{slug}"
        if task in ours:
            raise ValueError(f"--name {name!r}: task {task!r} is one of lmms-scene's own tasks; choose another name")
        config = {k: v for k, v in ours[base].items() if not k.startswith("__")}
        config.update(
            task=task,
            dataset_path="parquet",
            # relative to the YAML's folder, so the built folder can be moved as a whole
            dataset_kwargs={"data_files": {"test": str(Path("..") / DATA_FILE)}},
            test_split="test",
        )
        config["metadata"] = {**(config.get("metadata") or {}), "benchmark": "cooco", "built_from": str(out)}
        configs[task] = config
    return configs


def write_local(dataset, out: Path, card: str, name: str | None = None) -> dict[str, Any]:
    """Write a built dataset to ``out``: ``data/*.parquet`` (the hub layout, so
    ``datasets.load_dataset(out)`` reads it too), ``README.md`` (the card) and
    ``tasks/*.yaml`` (tasks that evaluate it). Returns what was written, with the task
    names and the ``--include_path`` to use."""
    from lmms_scene.registration import dump_task_yaml

    out = Path(out)
    configs = local_task_configs(out.resolve(), name or out.resolve().name)
    (out / DATA_FILE).parent.mkdir(parents=True, exist_ok=True)
    dataset.to_parquet(str(out / DATA_FILE))
    (out / "README.md").write_text(card, encoding="utf-8")
    tasks_dir = out / TASKS_DIR
    tasks_dir.mkdir(exist_ok=True)
    for task, config in configs.items():
        header = f"# Written by `lmms-scene build cooco`: evaluates {out.resolve() / DATA_FILE}.\n"
        (tasks_dir / f"{task}.yaml").write_text(header + dump_task_yaml(config), encoding="utf-8")
    return {"data": out / DATA_FILE, "card": out / "README.md", "include_path": tasks_dir.resolve(), "tasks": list(configs)}


def evaluate_command(
    written: Mapping[str, Any], model: str = "MODEL", model_args: str | None = "pretrained=CHECKPOINT"
) -> str:
    """The command that evaluates a dataset written by :func:`write_local`."""
    import shlex

    args = f" --model_args {model_args}" if model_args else ""
    return (
        f"lmms-scene eval --include_path {shlex.quote(str(written['include_path']))} "
        f"--tasks {written['tasks'][0]} --model {model}{args} --output_path results/ --log_samples"
    )
