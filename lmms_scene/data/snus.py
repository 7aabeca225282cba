"""SNUS: the schema, the builder from a local release, the dataset card, the embedded sample.

A SNUS row is one image with its negative caption (what safety-relevant things are
absent) and the structured missing information behind it (paper, "SNUS Dataset"):
missing objects, missing attributes (object, attribute) and missing relations
(subject, relation, object).

The public hub location is not known yet: :data:`HUB_REPO` (mirrored in
``tasks/snus/_default_template_yaml``, the one place a user edits) names where the
``snus`` task reads from; ``lmms-scene build snus --from-folder DIR --out OUT`` converts a
local release and writes a task that reads it.
"""

from __future__ import annotations

import io
import json
import random
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

#: where the ``snus`` task reads the release (placeholder until the authors publish it)
HUB_REPO = "snus-benchmark/SNUS"
SPLITS = ("train", "validation", "test")
SAMPLE_FILE = "sample/snus_sample.parquet"
CARD_FILE = "README.md"
FIELDS = ("image_id", "image", "caption", "missing_objects", "missing_attributes", "missing_relations", "scene")


def features():
    """The explicit ``datasets.Features`` of a SNUS split."""
    from datasets import Features, Image, Sequence as Seq, Value

    return Features(
        {
            "image_id": Value("string"),
            "image": Image(),
            "caption": Value("string"),
            "missing_objects": Seq(Value("string")),
            # lists of records (a list literal: Sequence(dict) would store a dict of lists)
            "missing_attributes": [{"object": Value("string"), "attribute": Value("string")}],
            "missing_relations": [{"subject": Value("string"), "relation": Value("string"), "object": Value("string")}],
            "scene": Value("string"),
        }
    )


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
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise ValueError(f"{where}: expected a JSON list of objects with {list(keys)}, got {value!r}") from None
    out = []
    for i, item in enumerate(value if isinstance(value, list) else [value]):
        if isinstance(item, (list, tuple)) and len(item) == len(keys):
            item = dict(zip(keys, item))
        if not isinstance(item, Mapping) or set(keys) - set(item):
            raise ValueError(f"{where}[{i}]: expected an object with {list(keys)} (or a {len(keys)}-item list), got {item!r}")
        out.append({k: str(item[k]) for k in keys})
    return out


def _image_id(raw: Mapping[str, Any], where: str) -> str | None:
    value = raw.get("image_id")
    if value is None or value == "":
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"{where}: field 'image_id': expected a string (or an integer), got {type(value).__name__} {value!r}")
    text = str(value).strip()
    if not text:
        raise ValueError(f"{where}: field 'image_id': expected a non-empty id, got {value!r}")
    return text


def convert_row(raw: Mapping[str, Any], folder: Path | None, number: int) -> dict[str, Any]:
    """One release record -> a SNUS row (errors name the row, field and value). The
    image is a file name inside the release ``folder`` (no absolute path, no ``..``, no
    symbolic link out of it: :func:`lmms_scene.data.release.inside`), decoded in full
    (a file that is not an image, or is cut short, is refused naming it)."""
    from lmms_scene.data import release

    if not isinstance(raw, Mapping):
        raise ValueError(f"row {number}: expected an object of fields (image, caption, ...), got {type(raw).__name__} {str(raw)[:60]!r}")
    label = raw.get("image_id") if isinstance(raw.get("image_id"), (str, int)) else None
    shown = raw.get("image") if isinstance(raw.get("image"), str) else None
    where = f"row {number} ({label or shown or '?'})"
    image = raw.get("image") if raw.get("image") is not None else raw.get("file_name")
    field = "image" if raw.get("image") is not None else "file_name"
    if image is None:
        raise ValueError(f"{where}: field 'image': missing (a file name relative to the release folder)")
    if not isinstance(image, str):
        raise ValueError(f"{where}: field {field!r}: expected a file name relative to the release folder, got {type(image).__name__} {image!r}")
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
        "missing_attributes": _records(raw.get("missing_attributes"), ("object", "attribute"), f"{where}: field 'missing_attributes'"),
        "missing_relations": _records(raw.get("missing_relations"), ("subject", "relation", "object"), f"{where}: field 'missing_relations'"),
        "scene": scene or "",
    }


def read_metadata(path: Path) -> list[dict[str, Any]]:
    """Records of a ``.jsonl`` / ``.json`` (list) / ``.csv`` metadata file; a record that
    is not an object of fields is an error naming the file and the line (or item)."""
    path = Path(path)
    if path.suffix == ".jsonl":
        from lmms_scene.files import iter_jsonl

        return [value for _, value in iter_jsonl(path)]
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); save it as UTF-8") from None
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path} line {exc.lineno}: not JSON ({exc.msg})") from None
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected a JSON list of records")
        for i, item in enumerate(data):
            if not isinstance(item, dict):
                raise ValueError(f"{path} item {i}: expected a JSON object (one record), got {type(item).__name__}")
        return data
    if path.suffix == ".csv":
        import csv

        return list(csv.DictReader(io.StringIO(text)))
    raise ValueError(f"{path}: expected a .jsonl, .json or .csv metadata file")


def build(folder: Path, metadata: Path | None = None) -> dict[str, Any]:
    """The release under ``folder`` as a ``DatasetDict`` (one split per ``split`` value of
    the metadata; all ``test`` when it has none). ``metadata`` defaults to
    ``folder/metadata.{jsonl,json,csv}``."""
    from datasets import Dataset, DatasetDict

    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: not a folder (the release: images and metadata.jsonl/.json/.csv)")
    if metadata is None:
        found = [folder / f"metadata.{ext}" for ext in ("jsonl", "json", "csv") if (folder / f"metadata.{ext}").is_file()]
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
            raise ValueError(f"row {n}: field 'image_id': duplicate {row['image_id']!r} (first in row {seen[row['image_id']]})")
        seen[row["image_id"]] = n
        by_split.setdefault(split, []).append(row)
    if not by_split:
        raise ValueError(f"{metadata}: no records")
    return DatasetDict({s: Dataset.from_list(rows, features=features()) for s, rows in by_split.items()})


def card(dataset: Mapping[str, Any], source: str) -> str:
    """The dataset card (source, license, splits, fields)."""
    from lmms_scene.data.card import front_matter

    splits = "\n".join(f"| {name} | {len(ds)} |" for name, ds in dataset.items())
    head = front_matter(license="other", source=str(source), pretty_name="SNUS", splits=list(dataset),
                        data_path="data/{split}.parquet", task_categories=["image-to-text"],
                        license_terms="as the original release", language=["en"])  # fmt: skip
    return head + f"""# SNUS (Scene Negation Understanding under Safety cognition)

Converted by `lmms-scene build snus` from {source}.
Paper: Jiang et al., "Benchmarking MLLMs via Cognitive Expected Scene Graph for
Safety-Critical Visual Negation Understanding". License: as the original release.

| split | rows |
|---|---|
{splits}

Fields: `image_id`, `image`, `caption` (the negative caption), `missing_objects`,
`missing_attributes` (object, attribute), `missing_relations` (subject, relation, object), `scene`.
"""


def write(dataset: Mapping[str, Any], out: Path, source: str) -> list[Path]:
    """Write each split to ``out/data/<split>.parquet`` and the card. A split file an
    earlier build wrote into ``out/data`` that this build does not (a rebuild with fewer
    splits) is removed: ``publish`` reads every file there."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out: {out} is a file; give a folder (it gets data/, README.md and tasks/)")
    (out / "data").mkdir(parents=True, exist_ok=True)
    for split in SPLITS:
        if split in dataset:
            continue
        for stale in [out / "data" / f"{split}.parquet", *(out / "data").glob(f"{split}-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9].parquet")]:
            if stale.is_file():
                stale.unlink()
    if "test" not in dataset:
        _remove_tasks(out)  # an earlier build's task would read a test split that is gone
    written = []
    for name, ds in dataset.items():
        path = out / "data" / f"{name}.parquet"
        ds.to_parquet(str(path))
        written.append(path)
    (out / CARD_FILE).write_text(card(dataset, source))
    return [*written, out / CARD_FILE]


_TASK_HEADER = "# Written by `lmms-scene build snus`"


def _remove_tasks(out: Path) -> None:
    """Remove the task files an earlier ``build snus`` wrote into ``out/tasks`` (only ours)."""
    for old in (Path(out) / "tasks").glob("*.yaml"):
        with open(old, encoding="utf-8", errors="replace") as handle:
            if handle.readline().startswith(_TASK_HEADER):
                old.unlink()


def write_task(out: Path, name: str) -> Path:
    """``out/tasks/snus_NAME.yaml``: our ``snus`` task written out in full (no
    ``include:``) reading ``out/data/test.parquet`` (relative, so the folder can move)."""
    import re

    from lmms_scene.registration import dump_task_yaml, our_task_configs

    slug = re.sub(r"[^0-9a-zA-Z]+", "_", name).strip("_").lower() or "local"
    task = f"snus_{slug}"
    ours = our_task_configs()
    if task in ours:
        raise ValueError(f"--name {name!r}: task {task!r} is one of lmms-scene's own tasks; choose another name")
    config = {k: v for k, v in ours["snus"].items() if not k.startswith("__")}
    config.update(task=task, dataset_path="parquet", dataset_kwargs={"data_files": {"test": "../data/test.parquet"}}, test_split="test")
    config["metadata"] = {**(config.get("metadata") or {}), "benchmark": "snus", "built_from": str(Path(out).resolve())}
    path = Path(out) / "tasks" / f"{task}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_tasks(out)  # a rebuild under another name: the earlier task goes
    path.write_text(f"{_TASK_HEADER}: evaluates {Path(out).resolve() / 'data' / 'test.parquet'}.\n" + dump_task_yaml(config))
    return path


def tasks_folder() -> Path:
    from lmms_scene.registration import tasks_path

    return tasks_path() / "snus"


# -- docs for the harness ---------------------------------------------------------------


def ensure_schema(dataset: Any) -> Any:
    """Check a loaded split before the model runs. Missing SNUS fields or a repeated
    ``image_id`` (rows are keyed by it) are errors; every row is re-checked
    (:func:`loaded_row_problem`: its image decoded in full, a non-empty reference
    caption, the missing-information lists) and a bad one becomes a stand-in carrying
    its reason (:mod:`lmms_scene.data.recheck`), recorded unscored by ``process_results``
    and counted in the report. The dataset is returned as is when every row is good."""
    from lmms_scene.data import recheck

    missing = [f for f in FIELDS if f not in dataset.column_names]
    if missing:
        raise ValueError(f"SNUS data lacks the fields {missing}; it has {dataset.column_names}. Build it with `lmms-scene build snus`.")
    seen: dict[Any, int] = {}
    for i, image_id in enumerate(dataset["image_id"]):
        if image_id in seen:
            raise ValueError(f"SNUS row {i}: field 'image_id': {image_id!r} repeats row {seen[image_id]} (rows are keyed by image_id)")
        seen[image_id] = i
    return recheck.screen(dataset, loaded_row_problem, _stand_in, what="the SNUS dataset",
                          memo_key=("snus", getattr(dataset, "_fingerprint", None), len(dataset)))  # fmt: skip


def loaded_row_problem(row: Mapping[str, Any], index: int) -> str | None:
    """Why a loaded SNUS row (undecoded) cannot be evaluated, or None."""
    from lmms_scene.data import release

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
    from lmms_scene.data import recheck

    image_id = recheck.text(row.get("image_id")) or f"unusable_row_{index:06d}"
    return {
        "image_id": image_id, "image": recheck.stand_in_image(), "caption": recheck.text(row.get("caption")),
        "missing_objects": [], "missing_attributes": [], "missing_relations": [], "scene": recheck.text(row.get("scene")),
    }  # fmt: skip


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
    from PIL import Image, ImageDraw

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


def build_sample(out_dir: Path) -> list[Path]:
    """Write ``sample/snus_sample.parquet`` under ``out_dir`` (``tasks/snus``)."""
    from datasets import Dataset

    rows = []
    for row in sample_rows():
        buffer = io.BytesIO()
        row["image"].save(buffer, format="PNG")
        rows.append({**row, "image": {"bytes": buffer.getvalue(), "path": f"{row['image_id']}.png"}})
    path = Path(out_dir) / SAMPLE_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    Dataset.from_list(rows, features=features()).to_parquet(str(path))
    return [path]


def negative_statements(captions: Iterable[str]) -> list[str]:
    """Every sentence of the captions (for the blind prior)."""
    from lmms_scene.nlp.sentences import split_sentences

    return [s for c in captions for s in split_sentences(c)]


def publish_build(out, *, folder=None, hub=None, metadata=None):
    """``lmms-scene publish snus --from-folder DIR [--metadata FILE]``: build into ``out``."""
    if hub is not None:
        raise ValueError("publish snus: --from-hub is only for cooco; give --from-folder DIR or --dataset D")
    if folder is None:
        raise ValueError("publish snus: give --from-folder DIR or --dataset D")
    dataset = build(folder, metadata)
    write(dataset, out, source=f"the local release {folder.resolve()}")
    return out, f"built by `lmms-scene publish snus` from the local release {folder.resolve()}"
