"""Building the COOCO dataset from its releases: the hub dataset ``fmerlo/COOCO`` or a
folder of images in the authors' naming scheme with metadata.

The builder trusts nothing: every row is validated, and bad input raises
:class:`CoocoBuildError` naming the row (its position in the metadata, counting from 0),
the file, the field and the value. File name and metadata must agree on scene, target,
replacement and condition; every image is decoded in full; booleans and numbers are
parsed strictly; a folder's images and its metadata rows must match one to one; a
selection with nothing to evaluate is an error. Decisions a caller asks for
(``prefer_metadata``, ``skip_unmatched``) and warnings (very large or elongated images)
are appended to ``notes``, which :func:`~lmms_scene.data.cooco.card.card`
records in the card."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from lmms_scene.data import local, recheck, release
from lmms_scene.data.cooco.boxes import box_formats, box_problem
from lmms_scene.data.cooco.fields import (
    _EXIF_ORIENTATION,
    FALSE_WORDS,
    TRUE_WORDS,
    _rename,
    convert_row,
    dropped_extras,
    extras_note,
    map_columns,
    size_warning,
)
from lmms_scene.data.cooco.schema import (
    CONDITIONS,
    HUB_REPO,
    CoocoBuildError,
    CoocoBuildWarning,
    canonical_condition,
    features,
)
from lmms_scene.data.cooco.sources import _listed, _match_folder, folder_rows, generate_rows
from lmms_scene.data.local import DATA_FILE, TASKS_DIR  # noqa: F401  (re-exported: where write_local puts things)


def _check_selection(conditions: Sequence[str], excluded: Sequence[bool], source: str = "the data") -> None:
    """A dataset with no naming item (every row excluded or ``clean``) is an error: the
    tasks would have nothing to evaluate."""
    n = len(conditions)
    if n == 0:
        raise CoocoBuildError(f"{source}: no rows: nothing to evaluate")
    if any(not e and c != "clean" for c, e in zip(conditions, excluded)):
        return
    n_excluded = sum(bool(e) for e in excluded)
    n_clean = sum(1 for c, e in zip(conditions, excluded) if c == "clean" and not e)
    raise CoocoBuildError(
        f"{source}: nothing to evaluate: all {n} rows are excluded ({n_excluded}) or clean ({n_clean}, not naming "
        f"items); check the excluded column (accepted: {'/'.join(TRUE_WORDS)} for excluded, "
        f"{'/'.join(FALSE_WORDS)} or empty for kept)"
    )


def _warn_sizes(sizes: Iterable[tuple[str, int, int]], notes: list[str] | None) -> None:
    """One :class:`CoocoBuildWarning` listing the images :func:`size_warning` flags; each
    is also recorded in ``notes``."""
    flagged = [f"{where}: {message}" for where, w, h in sizes if (message := size_warning(w, h))]
    if not flagged:
        return
    if notes is not None:
        notes.extend(f"warning: {f}" for f in flagged)
    warnings.warn(CoocoBuildWarning(f"{len(flagged)} very large or elongated images: {_listed(flagged)}"), stacklevel=3)


def _counting(
    rows: Iterable[Mapping[str, Any]], mapping: Mapping[str, str | None], extras: Sequence[str], counts: dict[str, int]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(position, renamed row)`` pairs, counting in ``counts`` the rows that hold each
    dropped extra field."""
    for k, raw in enumerate(rows):
        for name in extras:
            value = raw.get(name)
            if value is not None and not (isinstance(value, (list, dict, str)) and len(value) == 0):
                counts[name] = counts.get(name, 0) + 1
        yield k, _rename(raw, mapping)


def build_dataset(
    rows: Iterable[Mapping[str, Any]],
    columns: Sequence[str],
    base: Path | None = None,
    column_map: Mapping[str, str | None] | None = None,
    *,
    prefer_metadata: bool = False,
    skip_unmatched: bool = False,
    notes: list[str] | None = None,
    box_format: str | Mapping[str, str] | Iterable[str] | None = None,
    accept_aspect: bool = False,
    roots: Sequence[Path] | None = None,
):
    """Validated rows -> ``datasets.Dataset`` with :func:`features`.

    With ``base`` (a folder build) the folder's images and the rows must match one to
    one (``skip_unmatched`` leaves unmatched ones out). ``prefer_metadata`` resolves
    file-name/metadata disagreements in favour of the metadata. ``box_format`` says how
    the release stores its boxes (:func:`box_formats`); ``accept_aspect`` keeps
    generated images' boxes whose aspect is outside [0.5, 2]. These decisions, the
    authors' extra fields dropped, and warnings about very large or elongated images are
    appended to ``notes`` (for the card). No row to evaluate (empty, or every row
    excluded or clean) is an error."""
    from datasets import Dataset  # deferred: datasets (pyarrow, pandas) is heavy to import

    mapping = map_columns(columns, column_map)
    extras = dropped_extras(columns, mapping)
    counts: dict[str, int] = {}
    indexed: Iterable[tuple[int, dict[str, Any]]] = _counting(rows, mapping, extras, counts)
    if base is not None:  # a folder: match files and rows first (the hub's rows stream)
        indexed = _match_folder(list(indexed), Path(base), skip_unmatched, notes)
    formats = box_formats(box_format)
    converted = list(
        generate_rows(
            indexed,
            None,
            base,
            prefer_metadata=prefer_metadata,
            notes=notes,
            indexed=True,
            box_format=formats,
            accept_aspect=accept_aspect,
            roots=roots,
        )
    )
    _check_selection([r["condition"] for r in converted], [r["excluded"] for r in converted], str(base or "the rows"))
    _warn_sizes(((r["image_id"], r["width"], r["height"]) for r in converted), notes)
    if notes is not None:
        if any(f != "xywh" for f in formats.values()):
            read = sorted({f"{c}: {f}" for c, f in formats.items() if f != "xywh"})
            notes.append(f"target_bbox read as stored in {', '.join(read)} (--box-format) and stored as [x, y, w, h]")
        if counts:
            notes.append(extras_note(counts))
    return Dataset.from_list(converted, features=features())


def ensure_schema(dataset):
    """``dataset`` in COOCO's :func:`features`, every row checked, before anything is
    generated. A dataset that already has COOCO's columns (built by :func:`build`, the
    sample, a hub dataset published by ``lmms-scene publish``) is re-checked row by row
    (:func:`loaded_row_problem`: the image decoded in full and its size equal to
    ``width`` x ``height``, a finite box inside it, a known condition, labels); any other
    dataset is converted row by row through the same mapping and checks as a folder
    build (the hub release). A bad row becomes a stand-in carrying its reason
    (:mod:`lmms_scene.data.recheck`), recorded unscored by ``process_results``; the
    dataset is returned as is when every row is good. Errors: an unknown column (listing
    the columns found and the ``--column-map`` for a local build that would map or drop
    each), a repeated image id, and nothing to evaluate (every row bad, excluded or
    clean)."""
    from datasets import Image, Value  # deferred: datasets (pyarrow, pandas) is heavy to import

    ours = set(features())
    if ours <= set(dataset.column_names):
        _check_unique_ids(dataset)
        checked = recheck.screen(
            dataset,
            loaded_row_problem,
            _stand_in,
            what="the COOCO dataset",
            error=CoocoBuildError,
            memo_key=("cooco", getattr(dataset, "_fingerprint", None), len(dataset)),
        )
        _check_usable(checked, "the COOCO dataset")
        return checked
    try:
        mapping = map_columns(dataset.column_names)
    except CoocoBuildError as exc:
        raise CoocoBuildError(
            f"the COOCO dataset the task loaded (columns {list(dataset.column_names)}) is not in a layout lmms-scene "
            f"knows: {exc} The tasks read a hub dataset as it is; to map its columns, build it once locally "
            f"(lmms-scene build cooco --from-hub {HUB_REPO} --column-map SOURCE=FIELD ... --out D) and evaluate "
            f"the tasks that build writes (docs/cooco.md, 'Checking the hub release')."
        ) from None
    if "image" in dataset.column_names:
        dataset = dataset.cast_column("image", Image(decode=False))

    roots = release.hub_roots()

    def convert(row, index):
        try:
            return {**convert_row(_rename(row, mapping), index, roots=roots), recheck.PROBLEM: ""}
        except CoocoBuildError as exc:  # a bad row: a stand-in with the reason (recorded unscored)
            return {**_stand_in(_rename(row, mapping), index), recheck.PROBLEM: str(exc)}

    marked = features()
    marked[recheck.PROBLEM] = Value("string")
    fingerprint = recheck.map_fingerprint(dataset, "cooco.ensure_schema", mapping, [str(r) for r in roots])
    converted = dataset.map(
        convert, with_indices=True, remove_columns=dataset.column_names, features=marked, new_fingerprint=fingerprint
    )
    problems = {i: p for i, p in enumerate(converted[recheck.PROBLEM]) if p}
    if len(problems) == len(converted) and problems:
        raise CoocoBuildError(
            f"the COOCO dataset: nothing to evaluate: all {len(converted)} rows failed the check when the task "
            f"loaded them: {recheck.listed(problems)}"
        )
    if problems:
        recheck._warn("the COOCO dataset", problems, len(converted))
    else:
        converted = converted.remove_columns([recheck.PROBLEM])
    _check_unique_ids(converted)
    _check_usable(converted, "the COOCO dataset")
    _warn_sizes(zip(converted["image_id"], converted["width"], converted["height"]), None)
    return converted


def _check_usable(dataset, source: str) -> None:
    """:func:`_check_selection` over the rows that passed the load-time check; with none
    to evaluate, the error also lists the rows that failed it."""
    conditions, excluded = dataset["condition"], dataset["excluded"]
    if recheck.PROBLEM not in dataset.column_names:
        _check_selection(conditions, excluded, source)
        return
    marks = dataset[recheck.PROBLEM]
    good = [k for k, mark in enumerate(marks) if not mark]
    try:
        _check_selection([conditions[k] for k in good], [excluded[k] for k in good], source)
    except CoocoBuildError as exc:
        problems = {k: mark for k, mark in enumerate(marks) if mark}
        raise CoocoBuildError(
            f"{exc}; besides, {len(problems)} rows failed the check at load: {recheck.listed(problems)}"
        ) from None


def _finite_box(value: Any) -> list[float] | None:
    if value is None or isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or len(value) != 4:
        return None
    try:
        box = [float(v) for v in value]
    except (TypeError, ValueError):
        return None
    return box if all(math.isfinite(v) for v in box) else None


def loaded_row_problem(row: Mapping[str, Any], index: int) -> str | None:
    """Why a row of a dataset in COOCO's layout cannot be evaluated, or None. ``row`` is
    undecoded (its ``image`` the stored bytes); the image is decoded in full here. Checks
    the ids and labels, the condition, ``excluded``, ``width``/``height`` against the
    image, the box (4 finite numbers, inside the image: :func:`box_problem`), and an EXIF
    orientation that decoding would apply."""
    image_id = row.get("image_id")
    where = f"row {index} ({image_id})" if isinstance(image_id, str) and image_id else f"row {index}"
    if not isinstance(image_id, str) or not image_id.strip():
        return f"{where}: field 'image_id': expected a non-empty string, got {image_id!r}"
    condition = row.get("condition")
    if condition not in CONDITIONS:
        return f"{where}: field 'condition': {condition!r} is not one of {list(CONDITIONS)}"
    if not isinstance(row.get("excluded"), bool):
        return f"{where}: field 'excluded': expected true or false, got {row.get('excluded')!r}"
    for name in ("scene", "target"):
        if not isinstance(row.get(name), str) or not row[name].strip():
            return f"{where}: field {name!r}: expected a non-empty label, got {row.get(name)!r}"
    gold = row.get("gold_label")
    if not isinstance(gold, str) or (condition != "clean" and not gold.strip()):
        return f"{where}: field 'gold_label': expected the name a correct answer gives, got {gold!r}"
    box = _finite_box(row.get("target_bbox"))
    if box is None:
        return f"{where}: field 'target_bbox': {row.get('target_bbox')!r} is not 4 finite numbers [x, y, w, h]"
    size = []
    for name in ("width", "height"):
        value = row.get(name)
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            return f"{where}: field {name!r}: expected a positive integer, got {value!r}"
        size.append(value)
    pil, problem = release.decode_row_image(row.get("image"), where)
    if problem:
        return problem
    if tuple(pil.size) != tuple(size):
        return (
            f"{where}: fields 'width', 'height': the row says {size[0]}x{size[1]} but its image is "
            f"{pil.size[0]}x{pil.size[1]}; its box and prompt coordinates would not match the pixels "
            f"(rebuild the data with `lmms-scene build cooco`)"
        )
    orientation = pil.getexif().get(_EXIF_ORIENTATION)
    if orientation not in (None, 1):
        return (
            f"{where}: field 'image': EXIF orientation {orientation}: decoding would rotate the image away from "
            f"the pixels its box refers to (rebuild the data with `lmms-scene build cooco`, which stores raw pixels)"
        )
    # no aspect check here: a build with --accept-box-aspect kept such boxes on purpose
    problem = box_problem(box, pil.size, False)
    if problem is not None:
        return f"{where}: field 'target_bbox': box {[round(v, 2) for v in box]} {problem}"
    return None


def _stand_in(row: Mapping[str, Any], index: int) -> dict[str, Any]:
    """A row in COOCO's layout standing in for a bad one: the row's own ids and labels
    where they are strings, a grey 32x32 image with a box inside it, its condition when
    known (else ``original``, so the row is evaluated and recorded, never filtered out
    unseen) and its ``excluded`` when it is a boolean."""
    text = recheck.text
    image_id = text(row.get("image_id")) or text(row.get("file_name")) or ""
    if not image_id:
        image = row.get("image")
        path = image.get("path") if isinstance(image, Mapping) else None
        image_id = Path(str(path)).stem if path else f"unusable_row_{index:06d}"
    try:
        condition = canonical_condition(row.get("condition") or row.get("rel_level"))
    except (ValueError, TypeError):
        condition = "original"
    side = recheck.STAND_IN_SIDE
    excluded = row.get("excluded")
    return {
        "image": recheck.stand_in_image(),
        "image_id": Path(image_id).stem if "/" in image_id else image_id,
        "coco_id": text(row.get("coco_id")),
        "scene": text(row.get("scene")),
        "target": text(row.get("target")),
        "swapped_object": text(row.get("swapped_object")),
        "gold_label": text(row.get("gold_label")),
        "condition": condition,
        "target_bbox": [side / 4, side / 4, side / 2, side / 2],
        "width": side,
        "height": side,
        "rel_level": text(row.get("rel_level")),
        "rel_score": None,
        "excluded": excluded if isinstance(excluded, bool) else False,
    }


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
    """The released rows from the hub, images left encoded (no decode/re-encode).

    ``repo`` may also be a local folder standing in for the hub: a dataset saved with
    ``save_to_disk`` (read with ``load_from_disk``) or a folder ``load_dataset`` reads
    (data files, an image folder with metadata). Without ``split`` every split is read,
    concatenated."""
    from datasets import Image, load_dataset, load_from_disk  # deferred: datasets (pyarrow, pandas) is heavy to import

    local = Path(str(repo)).expanduser()
    try:
        if local.is_dir() and ((local / "dataset_dict.json").is_file() or (local / "state.json").is_file()):
            data = load_from_disk(str(local))
            if split is not None:
                if not hasattr(data, "keys") or split not in data:
                    raise ValueError(
                        f"no split {split!r} (splits: {list(data.keys()) if hasattr(data, 'keys') else 'one'})"
                    )
                data = data[split]
        else:
            data = (
                load_dataset(str(local) if local.is_dir() else repo, split=split)
                if split
                else load_dataset(str(local) if local.is_dir() else repo)
            )
    except Exception as exc:
        where = f"the local folder {local}" if local.is_dir() else f"{repo!r} from the hub"
        raise CoocoBuildError(f"could not load {where} ({type(exc).__name__}: {exc})") from exc
    if hasattr(data, "keys"):  # a DatasetDict: concatenate its splits
        from datasets import concatenate_datasets  # deferred: datasets (pyarrow, pandas) is heavy to import

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
    prefer_metadata: bool = False,
    skip_unmatched: bool = False,
    box_format: str | Mapping[str, str] | Iterable[str] | None = None,
    accept_aspect: bool = False,
):
    """Build COOCO from the hub release (``hub``: a repo, or a local folder standing in
    for it) or a local folder of images with metadata; returns the dataset, a label
    naming its source and the build notes (for the card: values taken from the metadata
    over the file name, skipped files, box format, fields dropped, size warnings)."""
    if (hub is None) == (folder is None):
        raise ValueError("give exactly one source: hub=REPO or folder=DIR")
    roots = None
    if hub is not None:
        rows, columns = load_hub_rows(hub, split)
        local = Path(str(hub)).expanduser()
        base, label = (
            None,
            (f"{local} (a local dataset standing in for the hub)" if local.is_dir() else f"hf://datasets/{hub}"),
        )
        roots = [*release.hub_roots(), *([local] if local.is_dir() else [])]
    else:
        rows, columns = folder_rows(Path(folder), metadata)
        base, label = Path(folder), str(folder)
    notes: list[str] = []
    dataset = build_dataset(
        rows,
        columns,
        base,
        column_map,
        prefer_metadata=prefer_metadata,
        skip_unmatched=skip_unmatched,
        notes=notes,
        box_format=box_format,
        accept_aspect=accept_aspect,
        roots=roots,
    )
    return dataset, label, notes


# The benchmark-independent part (layout, task YAMLs, the command) is
# :mod:`lmms_scene.data.local`; these are COOCO's uses of it.
#: our tasks a local build writes out, as ``<base>_<name>``
LOCAL_BASES = ("cooco", "cooco_noise")


def local_task_configs(out: Path, name: str) -> dict[str, dict[str, Any]]:
    """The task configs (``cooco_NAME``, ``cooco_noise_NAME``) that evaluate the dataset
    written under ``out``: our own COOCO tasks with the data files swapped, written out
    in full (no ``include:``), declaring ``metadata.benchmark: cooco``. A name that one
    of lmms-scene's own tasks or groups has is an error naming it."""
    suffix = local.slug(name)
    local.check_free([f"{base}_{suffix}" for base in LOCAL_BASES], name)
    return local.task_configs(out, name, "cooco", LOCAL_BASES)


def write_local(dataset, out: Path, card: str, name: str | None = None) -> dict[str, Any]:
    """Write a built dataset to ``out``: ``data/*.parquet`` (the hub layout, so
    ``datasets.load_dataset(out)`` reads it too), ``README.md`` (the card) and
    ``tasks/*.yaml`` (tasks that evaluate it). Returns what was written, with the task
    names and the ``--include_path`` to use."""
    out = Path(out)
    configs = local_task_configs(out.resolve(), name or out.resolve().name)
    return local.write_local(dataset, out, card, configs, tool="lmms-scene build cooco")


def evaluate_command(
    written: Mapping[str, Any], model: str = "MODEL", model_args: str | None = "pretrained=CHECKPOINT"
) -> str:
    """The command that evaluates a dataset written by :func:`write_local`."""
    return local.evaluate_command(written, model=model, model_args=model_args)
