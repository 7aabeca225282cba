"""Building SNUS from a local release (every record checked: errors name the row, field
and value), written as a local build (:mod:`lmms_scene.data.local`) with the task that
evaluates its test split; and the load-time check of a dataset the task reads.

``lmms-scene build snus --from-folder DIR --out OUT`` (:mod:`lmms_scene.cli.snus`).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from lmms_scene.data import local, recheck, release
from lmms_scene.data.snus.card import card
from lmms_scene.data.snus.schema import FIELDS, SPLITS, features
from lmms_scene.files import iter_jsonl, loads
from lmms_scene.registration import tasks_path

# -- converting a release ---------------------------------------------------------------


def _strings(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        value = [v.strip() for v in value.split(";")] if value.strip() else []
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where}: expected a list of strings (or a ';'-separated string), got {value!r}")
    return [v for v in value if v]


def _records(value: Any, keys: Sequence[str], where: str) -> list[dict[str, str]]:
    if value is None or value == "":
        return []
    if isinstance(value, str):
        value = loads(value, where=where, allow_nan=False)  # (a JSON text inside a CSV cell)
    out = []
    for i, item in enumerate(value if isinstance(value, list) else [value]):
        if isinstance(item, (list, tuple)) and len(item) == len(keys):
            item = dict(zip(keys, item))
        if not isinstance(item, Mapping) or set(keys) - set(item):
            raise ValueError(
                f"{where}[{i}]: expected an object with {list(keys)} (or a {len(keys)}-item list), got {item!r}"
            )
        out.append({k: str(item[k]) for k in keys})
    return out


def _image_id(raw: Mapping[str, Any], where: str) -> str | None:
    value = raw.get("image_id")
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(
            f"{where}: field 'image_id': expected a string (or an integer), got {type(value).__name__} {value!r}"
        )
    text = str(value).strip()
    if not text:
        raise ValueError(f"{where}: field 'image_id': expected a non-empty id, got {value!r}")
    return text


def convert_row(raw: Mapping[str, Any], folder: Path | None, number: int) -> dict[str, Any]:
    """One release record -> a SNUS row (errors name the row, field and value). The
    image is a file name inside the release ``folder`` (no absolute path, no ``..``, no
    symbolic link out of it: :func:`lmms_scene.data.release.inside`), decoded in full
    (a file that is not an image, or is cut short, is refused naming it)."""
    if not isinstance(raw, Mapping):
        raise ValueError(
            f"row {number}: expected an object of fields (image, caption, ...), got {type(raw).__name__} {str(raw)[:60]!r}"
        )
    label = raw.get("image_id") if isinstance(raw.get("image_id"), (str, int)) else None
    shown = raw.get("image") if isinstance(raw.get("image"), str) else None
    where = f"row {number} ({label or shown or '?'})"
    image = raw.get("image") if raw.get("image") is not None else raw.get("file_name")
    field = "image" if raw.get("image") is not None else "file_name"
    if image is None:
        raise ValueError(f"{where}: field 'image': missing (a file name relative to the release folder)")
    if not isinstance(image, str):
        raise ValueError(
            f"{where}: field {field!r}: expected a file name relative to the release folder, got {type(image).__name__} {image!r}"
        )
    if folder is None:
        raise ValueError(f"{where}: field {field!r}: a file name needs the release folder it is relative to")
    path, data = release.read_file(folder, image, where, field)
    try:
        release.decode_image(data, str(path))
    except ValueError as exc:
        raise ValueError(f"{where}: field {field!r}: {exc}") from None
    caption = raw.get("caption")
    if not isinstance(caption, str) or not caption.strip():
        raise ValueError(f"{where}: field 'caption': expected a non-empty negative caption, got {caption!r}")
    scene = raw.get("scene")
    if scene is not None and not isinstance(scene, str):
        raise ValueError(f"{where}: field 'scene': expected a string, got {type(scene).__name__} {scene!r}")
    return {
        "image_id": _image_id(raw, where) or path.stem,
        "image": {"bytes": data, "path": path.name},
        "caption": caption.strip(),
        "missing_objects": _strings(raw.get("missing_objects"), f"{where}: field 'missing_objects'"),
        "missing_attributes": _records(
            raw.get("missing_attributes"), ("object", "attribute"), f"{where}: field 'missing_attributes'"
        ),
        "missing_relations": _records(
            raw.get("missing_relations"), ("subject", "relation", "object"), f"{where}: field 'missing_relations'"
        ),
        "scene": scene or "",
    }


def read_metadata(path: Path) -> list[dict[str, Any]]:
    """Records of a ``.jsonl`` / ``.json`` (list) / ``.csv`` metadata file; a record that
    is not an object of fields is an error naming the file and the line (or item)."""
    path = Path(path)
    if path.suffix == ".jsonl":
        return [value for _, value in iter_jsonl(path, allow_nan=False)]
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(
            f"{path}: not UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); save it as UTF-8"
        ) from None
    if path.suffix == ".json":
        data = loads(text, where=str(path), allow_nan=False)  # repeated keys, absurd numbers: refused
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of records")
        for i, item in enumerate(data):
            if not isinstance(item, dict):
                raise ValueError(f"{path} item {i}: expected a JSON object (one record), got {type(item).__name__}")
        return data
    if path.suffix == ".csv":
        return list(csv.DictReader(io.StringIO(text)))
    raise ValueError(f"{path}: expected a .jsonl, .json or .csv metadata file")


def build(folder: Path, metadata: Path | None = None) -> dict[str, Any]:
    """The release under ``folder`` as a ``DatasetDict`` (one split per ``split`` value of
    the metadata; all ``test`` when it has none). ``metadata`` defaults to
    ``folder/metadata.{jsonl,json,csv}``."""
    from datasets import Dataset, DatasetDict  # deferred: datasets (pyarrow, pandas) is heavy to import

    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: not a folder (the release: images and metadata.jsonl/.json/.csv)")
    if metadata is None:
        found = [
            folder / f"metadata.{ext}" for ext in ("jsonl", "json", "csv") if (folder / f"metadata.{ext}").is_file()
        ]
        if not found:
            raise FileNotFoundError(f"{folder}: no metadata.jsonl/.json/.csv (give --metadata)")
        metadata = found[0]
    by_split: dict[str, list[dict[str, Any]]] = {}
    seen: dict[str, int] = {}
    for n, raw in enumerate(read_metadata(Path(metadata)), 1):
        if not isinstance(raw, Mapping):
            raise ValueError(f"row {n}: expected an object of fields, got {type(raw).__name__}")
        split = raw.get("split") or "test"
        if not isinstance(split, str) or split not in SPLITS:
            raise ValueError(f"row {n}: field 'split': expected one of {SPLITS}, got {split!r}")
        row = convert_row(raw, folder, n)
        if row["image_id"] in seen:
            raise ValueError(
                f"row {n}: field 'image_id': duplicate {row['image_id']!r} (first in row {seen[row['image_id']]})"
            )
        seen[row["image_id"]] = n
        by_split.setdefault(split, []).append(row)
    if not by_split:
        raise ValueError(f"{metadata}: no records")
    return DatasetDict({s: Dataset.from_list(rows, features=features()) for s, rows in by_split.items()})


# -- docs for the harness ---------------------------------------------------------------


def ensure_schema(dataset: Any) -> Any:
    """Check a loaded split before the model runs. Missing SNUS fields or a repeated
    ``image_id`` (rows are keyed by it) are errors; every row is re-checked
    (:func:`loaded_row_problem`: its image decoded in full, a non-empty reference
    caption, the missing-information lists) and a bad one becomes a stand-in carrying
    its reason (:mod:`lmms_scene.data.recheck`), recorded unscored by ``process_results``
    and counted in the report. The dataset is returned as is when every row is good."""
    missing = [f for f in FIELDS if f not in dataset.column_names]
    if missing:
        raise ValueError(
            f"SNUS data lacks the fields {missing}; it has {dataset.column_names}. Build it with `lmms-scene build snus`."
        )
    seen: dict[Any, int] = {}
    for i, image_id in enumerate(dataset["image_id"]):
        if image_id in seen:
            raise ValueError(
                f"SNUS row {i}: field 'image_id': {image_id!r} repeats row {seen[image_id]} (rows are keyed by image_id)"
            )
        seen[image_id] = i
    return recheck.screen(
        dataset,
        loaded_row_problem,
        _stand_in,
        what="the SNUS dataset",
        memo_key=("snus", getattr(dataset, "_fingerprint", None), len(dataset)),
    )


def loaded_row_problem(row: Mapping[str, Any], index: int) -> str | None:
    """Why a loaded SNUS row (undecoded) cannot be evaluated, or None."""
    image_id = row.get("image_id")
    where = f"SNUS row {index} ({image_id})" if isinstance(image_id, str) and image_id else f"SNUS row {index}"
    if not isinstance(image_id, str) or not image_id.strip():
        return f"{where}: field 'image_id': expected a non-empty string, got {image_id!r}"
    caption = row.get("caption")
    if not isinstance(caption, str) or not caption.strip():
        return f"{where}: field 'caption': empty reference caption {caption!r}"
    for name in ("missing_objects", "missing_attributes", "missing_relations"):
        if row.get(name) is not None and not isinstance(row[name], list):
            return f"{where}: field {name!r}: expected a list, got {type(row[name]).__name__}"
    _, problem = release.decode_row_image(row.get("image"), where)
    if problem:
        return problem
    return None


def _stand_in(row: Mapping[str, Any], index: int) -> dict[str, Any]:
    """A SNUS row standing in for a bad one: its id and caption where they are strings,
    a grey image, no missing information."""
    image_id = recheck.text(row.get("image_id")) or f"unusable_row_{index:06d}"
    return {
        "image_id": image_id,
        "image": recheck.stand_in_image(),
        "caption": recheck.text(row.get("caption")),
        "missing_objects": [],
        "missing_attributes": [],
        "missing_relations": [],
        "scene": recheck.text(row.get("scene")),
    }


# -- a locally built dataset, ready to evaluate -----------------------------------------
# The benchmark-independent part (layout, task YAMLs, the command) is
# :mod:`lmms_scene.data.local`; these are SNUS's uses of it.

#: our tasks a local build writes out, as ``<base>_<name>`` (they evaluate the test split)
LOCAL_BASES = ("snus",)


def local_task_configs(out: Path, name: str) -> dict[str, dict[str, Any]]:
    """The task config ``snus_NAME`` that evaluates the test split written under ``out``:
    our ``snus`` task with the data files swapped, written out in full (no ``include:``),
    declaring ``metadata.benchmark: snus``. A name that one of lmms-scene's own tasks or
    groups has is an error naming it."""
    suffix = local.slug(name)
    local.check_free([f"{base}_{suffix}" for base in LOCAL_BASES], name)
    return local.task_configs(out, name, "snus", LOCAL_BASES)


def write_local(
    dataset: Mapping[str, Any], out: Path, card: str, name: str | None = None, tool: str = "lmms-scene build snus"
) -> dict[str, Any]:
    """Write the splits of a built dataset to ``out`` in the layout every build writes
    (:mod:`lmms_scene.data.local`: ``data/<split>-00000-of-00001.parquet``, ``README.md``
    the ``card`` (:func:`~lmms_scene.data.snus.card.card`), ``tasks/snus_<name>.yaml`` when
    there is a test split).
    Returns what was written, with the task names and the ``--include_path`` to use."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out: {out} is a file; give a folder (it gets data/, README.md and tasks/)")
    unknown = [s for s in dataset if s not in SPLITS]
    if unknown:
        raise ValueError(f"splits: expected some of {SPLITS}, got {unknown}")
    configs = local_task_configs(out.resolve(), name or out.resolve().name) if "test" in dataset else {}
    return local.write_local(dict(dataset), out, card, configs, tool=tool)


def evaluate_command(
    written: Mapping[str, Any], model: str = "MODEL", model_args: str | None = "pretrained=CHECKPOINT"
) -> str:
    """The command that evaluates a dataset written by :func:`write_local`."""
    return local.evaluate_command(written, model=model, model_args=model_args)


def tasks_folder() -> Path:
    return tasks_path() / "snus"


def publish_build(out, *, folder=None, hub=None, metadata=None):
    """``lmms-scene publish snus --from-folder DIR [--metadata FILE]``: build into ``out``."""
    if hub is not None:
        raise ValueError("publish snus: --from-hub is only for cooco; give --from-folder DIR or --dataset D")
    if folder is None:
        raise ValueError("publish snus: give --from-folder DIR or --dataset D")
    dataset = build(folder, metadata)
    write_local(dataset, out, card(dataset, f"the local release {folder.resolve()}"), name="publish")
    return out, f"built by `lmms-scene publish snus` from the local release {folder.resolve()}"
