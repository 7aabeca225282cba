"""Where a COOCO build's rows come from: a metadata file (the authors' keyed JSON, JSON
lines, CSV; strict UTF-8, every line checked), a folder of images in the authors' naming
scheme (matched one to one with its metadata rows, paths confined to the folder), and the
converted rows streamed (:func:`generate_rows`)."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from lmms_scene.data import release
from lmms_scene.data.cooco.boxes import box_formats
from lmms_scene.data.cooco.fields import _LISTED, IMAGE_SUFFIXES, _missing, _rename, convert_row
from lmms_scene.data.cooco.schema import (
    CoocoBuildError,
)
from lmms_scene.data.local import DATA_FILE, TASKS_DIR  # noqa: F401  (re-exported: where write_local puts things)
from lmms_scene.files import iter_jsonl, loads
from lmms_scene.progress import progress


def _read_text(path: Path) -> str:
    """A metadata file as text: UTF-8, a leading byte-order mark (Excel's "CSV UTF-8")
    stripped. Anything else is an error naming the file and the line: guessing an
    encoding would silently garble labels."""
    data = path.read_bytes()
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise CoocoBuildError(
            f"{path} line {line}: not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            f"save the file as UTF-8 (Excel: 'CSV UTF-8'), e.g. iconv -f latin1 -t utf-8"
        ) from None


def _read_csv(path: Path, text: str) -> list[dict[str, Any]]:
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    try:
        header = next(reader, None)
        if header is None:
            raise CoocoBuildError(f"{path}: empty (no header, no rows): nothing to build")
        header = [h.strip() for h in header]
        repeated = sorted({h for h in header if header.count(h) > 1})
        if repeated:
            raise CoocoBuildError(f"{path} line 1: columns {repeated} appear more than once in the header {header}")
        rows = []
        for values in reader:
            if not values:  # a blank line
                continue
            if len(values) != len(header):
                raise CoocoBuildError(
                    f"{path} line {reader.line_num}: {len(values)} fields, but the header has {len(header)} "
                    f"({header}); a comma inside a value needs quotes"
                )
            rows.append(dict(zip(header, values)))
    except csv.Error as exc:
        raise CoocoBuildError(f"{path} line {reader.line_num}: not valid CSV ({exc})") from None
    if not rows:
        raise CoocoBuildError(f"{path}: a header ({header}) but no rows: nothing to build")
    return rows


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        shown = str(value)[:80]
        raise CoocoBuildError(f"{where}: expected a JSON object (one row), got {type(value).__name__}: {shown}")
    return value


def _keyed_rows(data: Mapping[str, Any], path: Path) -> list[dict[str, Any]]:
    """The authors' metadata (``filter_dataset.py``'s ``final_dataset.json``): one JSON
    object keyed by image file name, each value the row's fields. A value that is not an
    object, or whose own ``file_name`` differs from its key, is an error naming the key."""
    rows = []
    for key, value in data.items():
        if not isinstance(value, dict):
            raise CoocoBuildError(
                f"{path}: key {key!r} holds {type(value).__name__} {str(value)[:60]!r}; a JSON object keyed by image "
                f"file name (the authors' format) needs an object of fields per key"
            )
        own = value.get("file_name")
        if own is not None and Path(str(own)).name != Path(str(key)).name:
            raise CoocoBuildError(f"{path}: key {key!r} has file_name {own!r}; they must name the same image")
        rows.append({**value, "file_name": own if own is not None else key})
    return rows


def read_metadata(path: Path) -> list[dict[str, Any]]:
    """Rows of a metadata file: ``.csv``, ``.jsonl``, or ``.json`` holding a list of
    rows, ``{"rows": [...]}``, or the authors' format, one object keyed by image file
    name (``{"000000064659_cubicle_office_laptop_original.jpg": {"scene": ...}, ...}``).
    A read error names the file and the line; a file without rows is an error."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".jsonl", ".json"):
        raise CoocoBuildError(f"{path}: metadata must be .csv, .jsonl or .json")
    text = _read_text(path)
    if suffix == ".csv":
        return _read_csv(path, text)
    if suffix == ".jsonl":
        rows = [
            _object(value, f"{path} line {n}")
            for n, value in iter_jsonl(path, objects=False, error=CoocoBuildError, allow_nan=False)
        ]
        if not rows:
            raise CoocoBuildError(f"{path}: empty (no JSON lines): nothing to build")
        return rows
    data = loads(
        text, where=str(path), allow_nan=False, error=CoocoBuildError
    )  # repeated keys, absurd numbers: refused
    if isinstance(data, dict):
        if "rows" in data and not isinstance(data["rows"], list):
            raise CoocoBuildError(
                f"{path}: 'rows' must be a list of row objects, got {type(data['rows']).__name__} "
                f"(keys seen: {sorted(data)[:20]})"
            )
        if isinstance(data.get("rows"), list):
            data = data["rows"]
        elif not data:
            raise CoocoBuildError(f"{path}: an empty JSON object: nothing to build")
        elif all(isinstance(v, dict) for v in data.values()) or any(
            Path(str(k)).suffix.lower() in IMAGE_SUFFIXES for k in data
        ):
            return _keyed_rows(data, path)
        else:
            raise CoocoBuildError(
                f"{path}: a JSON object needs a 'rows' list of row objects, or to be keyed by image file name with "
                f"an object of fields per key (the authors' format); keys seen: {sorted(data)[:20]}"
            )
    if not isinstance(data, list):
        raise CoocoBuildError(f"{path}: expected a JSON list of rows or {{'rows': [...]}}, got {type(data).__name__}")
    if not data:
        raise CoocoBuildError(f"{path}: no rows: nothing to build")
    return [_object(value, f"{path} row {k}") for k, value in enumerate(data)]


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
    files = folder_images(folder)
    others = sorted(p.name for p in folder.glob("*.json") if p.is_file())
    hint = (
        (
            f"; the folder has {others[:5]}: if one is the authors' metadata (a JSON object keyed by image file name, "
            f"e.g. final_dataset.json), pass it with --metadata"
        )
        if others
        else ""
    )
    if not files:
        raise CoocoBuildError(f"{folder}: no images and no metadata file" + hint)
    # Without metadata the file name carries everything but the box, which COOCO
    # cannot do without; fail now rather than per row.
    raise CoocoBuildError(
        f"{folder}: {len(files)} images but no metadata (metadata.jsonl/.csv/.json with file_name, "
        f"scene, target, swapped_object, target_bbox, rel_level, rel_score, excluded); target boxes "
        f"exist only in the metadata" + hint
    )


def folder_images(folder: Path) -> list[Path]:
    """Every image file under ``folder`` (:data:`IMAGE_SUFFIXES`, any depth; hidden files
    and folders left out), sorted."""
    folder = Path(folder)
    return sorted(
        p
        for p in folder.rglob("*")
        if p.suffix.lower() in IMAGE_SUFFIXES
        and p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(folder).parts)
    )


def _listed(items: Sequence[str]) -> str:
    more = f" and {len(items) - _LISTED} more" if len(items) > _LISTED else ""
    return "; ".join(items[:_LISTED]) + more


def _match_folder(
    indexed: list[tuple[int, dict[str, Any]]], base: Path, skip_unmatched: bool, notes: list[str] | None
) -> list[tuple[int, dict[str, Any]]]:
    """Check a folder's images against its metadata rows one to one: an image without
    a row, or a row whose image file is missing, is an error listing them all; with
    ``skip_unmatched`` both are left out and listed in ``notes``."""
    referenced: set[Path] = set()
    kept, missing = [], []
    images = folder_images(base)
    by_name: dict[str, list[Path]] = {}
    for found in images:
        by_name.setdefault(found.name, []).append(found)
    for index, row in indexed:
        image = row.get("image")
        if isinstance(image, Mapping) and image.get("bytes") is not None:
            kept.append((index, row))  # the row carries its own image
            continue
        key = "image" if image is not None and not isinstance(image, Mapping) else "file_name"
        path = row.get(key)
        if isinstance(image, Mapping) and not path:
            path = image.get("path")
        if _missing(path):
            kept.append((index, row))  # convert_row says what is missing
            continue
        try:  # confined to the release folder: no absolute path, no '..', no link out
            file = release.inside(base, str(path), f"row {index}", key)
        except ValueError as exc:
            raise CoocoBuildError(str(exc)) from None
        if not file.is_file() and Path(str(path)).name == str(path):
            # a bare file name (the authors' metadata keys) for an image in a subfolder
            candidates = by_name.get(str(path), [])
            if len(candidates) > 1:
                shown = ", ".join(str(c.relative_to(base)) for c in candidates[:5])
                missing.append(f"row {index} ({path}): the file name is ambiguous: {shown}")
                continue
            if candidates:
                file = candidates[0]
                row = {**row, key: str(file.relative_to(base))}
        if file.is_file():
            referenced.add(file.resolve())
            kept.append((index, row))
        else:
            missing.append(f"row {index} ({file.name}): image file not found: {file}")
    orphans = [str(p.relative_to(base)) for p in images if p.resolve() not in referenced]
    if (missing or orphans) and not skip_unmatched:
        parts = []
        if missing:
            parts.append(f"{len(missing)} metadata rows without an image: {_listed(missing)}")
        if orphans:
            parts.append(f"{len(orphans)} images in {base} without a metadata row: {_listed(orphans)}")
        raise CoocoBuildError(
            "; ".join(parts) + ". Add the missing files or rows, or pass --skip-unmatched (skip_unmatched=True) "
            "to leave them out and list them in the dataset card"
        )
    if notes is not None:
        notes.extend(f"skipped (metadata row without an image): {m}" for m in missing)
        notes.extend(f"skipped (image without a metadata row): {o}" for o in orphans)
    return kept


def generate_rows(
    rows: Iterable[Mapping[str, Any]] | Iterable[tuple[int, Mapping[str, Any]]],
    mapping: Mapping[str, str | None] | None,
    base: Path | None = None,
    *,
    prefer_metadata: bool = False,
    notes: list[str] | None = None,
    indexed: bool = False,
    box_format: str | Mapping[str, str] | Iterable[str] | None = None,
    accept_aspect: bool = False,
    roots: Sequence[Path] | None = None,
) -> Iterator[dict[str, Any]]:
    """Converted rows; ``rows`` are source rows (renamed with ``mapping``) or, with
    ``indexed``, ``(position, renamed row)`` pairs. A repeated image id is an error."""
    seen: dict[str, int] = {}
    formats = box_formats(box_format)
    pairs = rows if indexed else enumerate(rows)

    pairs = progress(pairs, "COOCO rows", unit="row")
    for index, raw in pairs:
        renamed = raw if mapping is None else _rename(raw, mapping)
        row = convert_row(
            renamed,
            index,
            base,
            prefer_metadata=prefer_metadata,
            notes=notes,
            box_format=formats,
            accept_aspect=accept_aspect,
            roots=roots,
        )
        if row["image_id"] in seen:
            raise CoocoBuildError(f"row {index} ({row['image_id']}): duplicate of row {seen[row['image_id']]}")
        seen[row["image_id"]] = index
        yield row
