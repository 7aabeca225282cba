"""COOCO's fields, one source row at a time: strict parsers (numbers, booleans, boxes as
stored, ``rel_score``), the image of a row decoded in full (:func:`size_warning` for
costly ones), the file name and the metadata reconciled, the COCO id, and
:func:`convert_row` (one source row -> a validated COOCO row; its box through
:mod:`~lmms_scene.data.cooco.boxes`); the source columns mapped to our fields
(:func:`map_columns`). Errors name the row, the field and the value
(:mod:`~lmms_scene.data.cooco.builder` says how a build uses them)."""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from PIL import Image

from lmms_scene import imaging
from lmms_scene.data import release
from lmms_scene.data.cooco.boxes import _checked_box, box_formats
from lmms_scene.data.cooco.schema import (
    AUTHORS_EXTRA_FIELDS,
    COLUMN_MAP,
    CONDITIONS,
    REQUIRED_FIELDS,
    CoocoBuildError,
    canonical_condition,
    label_key,
    parse_filename,
    scene_spelling,
    suggest_column_map,
)
from lmms_scene.data.local import DATA_FILE, TASKS_DIR  # noqa: F401  (re-exported: where write_local puts things)

#: Image files a folder build matches against the metadata (suffix, case-insensitive).
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
#: Spellings of a boolean the builder accepts (case-insensitive); anything else is an error.
TRUE_WORDS = ("true", "1", "1.0", "yes")
FALSE_WORDS = ("false", "0", "0.0", "no")
#: An image whose padded square (side max(W, H)) is larger than this, or whose longer
#: side is more than EXTREME_ASPECT times its shorter one, gets a warning: the tasks pad
#: every view to that square and add noise to all of it (about 30 bytes per square pixel
#: at peak). Images are never resized (the boxes and the paper's geometry refer to the
#: released pixels).
LARGE_IMAGE_SIDE = 4096
EXTREME_ASPECT = 4.0
#: How many offending rows a summarising message lists before "and N more".
_LISTED = 10


def _label(value: Any) -> str:
    return " ".join(str(value or "").replace("_", " ").split())


def _missing(value: Any) -> bool:
    """A field left empty: None, "" or a float NaN (what pandas writes for a blank cell)."""
    return value is None or (isinstance(value, str) and value == "") or (isinstance(value, float) and math.isnan(value))


def _number(value: Any, field: str) -> float:
    """``value`` as a finite float, or ``ValueError`` naming the field and the value."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)) and not hasattr(value, "__float__"):
        raise ValueError(f"{field}: {value!r} is not a number")
    try:
        number = float(value.strip() if isinstance(value, str) else value)
    except (TypeError, ValueError):
        raise ValueError(f"{field}: {value!r} is not a number") from None
    if not math.isfinite(number):
        raise ValueError(f"{field}: {value!r} is not a finite number")
    return number


def _bbox(value: Any) -> list[float]:
    """``[x, y, w, h]`` from a list or a string such as ``"[5, 5, 10, 8]"``, ``"(5, 5, 10,
    8)"`` or ``"5 5 10 8"``; anything else names the field and the value."""
    shown = value
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in "[(" and text[-1:] in "])":
            text = text[1:-1]
        value = [part for part in re.split(r"[\s,]+", text) if part]
    elif not isinstance(value, Sequence) and hasattr(value, "tolist"):  # numpy / pyarrow arrays
        value = value.tolist()
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError(f"target_bbox: {shown!r} is not 4 numbers [x, y, w, h]")
    try:
        box = [_number(v, "target_bbox") for v in value]
    except ValueError:
        raise ValueError(f"target_bbox: {shown!r} is not 4 numbers [x, y, w, h]") from None
    if len(box) != 4:
        raise ValueError(f"target_bbox: {shown!r} needs 4 numbers (x, y, w, h), got {len(box)}")
    return box


def _bool(value: Any, field: str = "excluded") -> bool:
    """Strict boolean: True/False, 1/0, 1.0/0.0, or one of :data:`TRUE_WORDS` /
    :data:`FALSE_WORDS` in any case; a missing value is False. Anything else (``"x"``,
    ``2``, ``"y"``) is an error naming the field and the value: a misread ``excluded``
    would silently evaluate (or drop) items."""
    if _missing(value):
        return False
    if type(value).__name__ in ("bool", "bool_"):  # Python and NumPy booleans
        return bool(value)
    if isinstance(value, (int, float)) or hasattr(value, "__index__"):
        if value in (0, 1):
            return bool(value)
    elif isinstance(value, str):
        word = value.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS or word == "":
            return False
    raise ValueError(
        f"{field}: {value!r} is not a boolean; use one of {'/'.join(TRUE_WORDS)} or {'/'.join(FALSE_WORDS)}"
    )


def _score(value: Any) -> float | None:
    if _missing(value) or (isinstance(value, str) and value.strip().lower() in ("", "nan")):
        return None
    return _number(value, "rel_score")


def _decode(data: bytes, label: str):
    """Open and fully decode image bytes (:func:`lmms_scene.data.release.decode_image`:
    PIL's global truncated loading, which lmms-eval turns on, is neither read nor set);
    an unreadable, truncated or corrupt image is a ``ValueError`` naming ``label`` (the
    file)."""
    return release.decode_image(data, label)


def _image_bytes(
    image: Any, base: Path | None, roots: Sequence[Path] | None = None
) -> tuple[bytes, tuple[int, int], str]:
    """Load an image given as PIL, ``{"bytes", "path"}`` or a path, decoding it in full;
    return bytes to store, the size and a note. A path is read only inside the release
    folder ``base`` (no absolute path, no ``..``, no symbolic link out of it); without
    ``base`` (a hub row) an image cell must carry its bytes, or name a file inside
    ``roots`` (the local folder standing in for the hub, the hub caches). RGB JPEG/PNG
    bytes are kept as they are; any other mode is converted to RGB (transparency
    composited onto the padding grey) and stored as PNG. Images are never resized.

    An EXIF Orientation tag other than 1 would make ``datasets``' ``Image`` feature
    rotate the image when decoding it, while the size and the target box refer to the
    raw pixels. Such an image is stored as its raw (unrotated) pixels, re-encoded
    losslessly as PNG without the tag, so decoding gives the pixels the box refers to."""
    data: bytes | None = None
    if isinstance(image, Image.Image):
        pil = release.check_loaded(image, "(the row's image)")
    else:
        path = None
        if isinstance(image, Mapping):
            data = image.get("bytes")
            path = image.get("path")
        else:
            path = image
        if data is None:
            if not path:
                raise FileNotFoundError("no image given")
            if base is not None:
                file, data = release.read_file(base, str(path), "", "image")
            else:
                cell = {"bytes": None, "path": str(path)}
                data, _ = release.image_cell_bytes(
                    cell, "", "image", roots if roots is not None else release.hub_roots()
                )
                file = Path(str(path))
            path = file
        pil = _decode(data, str(path) if path else "(the row's image bytes)")
    orientation = pil.getexif().get(_EXIF_ORIENTATION)
    oriented = orientation is not None and orientation != 1
    if data is not None and pil.mode == "RGB" and pil.format in ("JPEG", "PNG") and not oriented:
        return data, pil.size, "kept"
    rgb = imaging.to_rgb(pil)
    buffer = io.BytesIO()
    # PNG is written without EXIF unless asked for: the Orientation tag is dropped.
    rgb.save(buffer, format="PNG")
    note = f"EXIF orientation {orientation} dropped, raw pixels kept" if oriented else f"converted from {pil.mode}"
    return buffer.getvalue(), rgb.size, note


#: EXIF tag 0x0112 (Orientation).
_EXIF_ORIENTATION = 0x0112


def size_warning(width: int, height: int) -> str | None:
    """Why an image of ``width x height`` is costly to evaluate, or None. The tasks pad
    each image onto a square of side max(W, H) (authors' code) and draw noise over all
    of it; nothing is resized."""
    side, short = max(width, height), max(1, min(width, height))
    aspect = side / short
    if side <= LARGE_IMAGE_SIDE and aspect <= EXTREME_ASPECT:
        return None
    reasons = []
    if side > LARGE_IMAGE_SIDE:
        reasons.append(f"longer side above {LARGE_IMAGE_SIDE}")
    if aspect > EXTREME_ASPECT:
        reasons.append(f"aspect {aspect:.0f}:1, above {EXTREME_ASPECT:g}:1")
    peak = 30 * side * side / 1e9
    return (
        f"{width}x{height} image ({', '.join(reasons)}) is padded to a {side}x{side} square for every view, "
        f"{side * side / (width * height):.0f}x its own pixels; adding noise to it takes about {peak:.1f} GB; "
        f"images are not resized"
    )


#: (our field, how the file name's value is compared with the metadata's): labels up to
#: case, ``_``, ``/`` and spaces (the authors' metadata says ``cubicle/office`` where
#: the file name says ``cubicle_office``); conditions by meaning
_CROSS_CHECKED = (
    ("scene", label_key),
    ("target", label_key),
    ("swapped_object", label_key),
    ("rel_level", canonical_condition),
)
_FIELD_NAMES = {"rel_level": "condition", "swapped_object": "swapped_object (replacement)"}


def _reconcile(
    parsed: Mapping[str, str],
    given: Mapping[str, Any],
    where: str,
    file: str,
    prefer_metadata: bool,
    notes: list[str] | None,
) -> dict[str, Any]:
    """The file name's fields overlaid with the metadata's. Where both give a value they
    must agree (up to case, ``_``, ``/`` and spaces; conditions by meaning); a
    disagreement is an error naming both values and the file, unless
    ``prefer_metadata`` takes the metadata's value and records that in ``notes``."""
    fields = {**parsed, **given}
    for field, key in _CROSS_CHECKED:
        from_file, from_meta = parsed.get(field), given.get(field)
        if not from_file or from_meta is None or key(from_meta) == key(from_file):
            continue
        name = _FIELD_NAMES.get(field, field)
        if not prefer_metadata:
            raise ValueError(
                f"{name} {from_meta!r} in the metadata contradicts the file name's {from_file!r} (file {file}); "
                f"fix one of them, or pass --prefer-metadata (prefer_metadata=True) to use the metadata's "
                f"values and record each in the dataset card"
            )
        if notes is not None:
            notes.append(f"{where}: {name} {from_meta!r} taken from the metadata; the file name says {from_file!r}")
    return fields


def _coco_id(parsed: Mapping[str, str], given: Mapping[str, Any], name: Any, file: str) -> str:
    """The 12-digit COCO image id: from the file name's first 12 digits, or from a
    ``coco_id`` in the metadata (an integer or digits; zero-padded to 12); both given
    must agree. Never empty: without either it is an error naming the file."""
    from_file = parsed.get("coco_id")
    from_meta = given.get("coco_id")
    if from_meta is not None:
        text = str(from_meta).strip()
        if isinstance(from_meta, float) and from_meta.is_integer():
            text = str(int(from_meta))
        if not (text.isdigit() and len(text) <= 12):
            raise ValueError(f"coco_id {from_meta!r} is not a COCO image id (at most 12 digits)")
        text = text.zfill(12)
        if from_file and text != from_file:
            raise ValueError(
                f"coco_id {from_meta!r} in the metadata contradicts the file name's {from_file!r} (file {file})"
            )
        return text
    if from_file:
        return from_file
    if not name:
        raise ValueError(
            "no COCO image id: the row has no image file name to read it from and no coco_id; "
            "add a coco_id field (or the image's file name) to the metadata"
        )
    raise ValueError(
        f"no COCO image id: the file name {Path(str(name)).name!r} does not start with a 12-digit COCO id "
        f"('{{id12}}_...' or '{{id12}}__...') and the metadata has no coco_id (file {file}); add a coco_id field "
        f"to the metadata or rename the file"
    )


def convert_row(
    raw: Mapping[str, Any],
    index: int,
    base: Path | None = None,
    *,
    prefer_metadata: bool = False,
    notes: list[str] | None = None,
    box_format: str | Mapping[str, str] | Iterable[str] | None = None,
    accept_aspect: bool = False,
    roots: Sequence[Path] | None = None,
) -> dict[str, Any]:
    """One source row (already renamed to our field names) -> a validated COOCO row.

    ``index`` is the row's position in the source (counting from 0), used in errors.
    ``prefer_metadata`` resolves a file-name/metadata disagreement in favour of the
    metadata, recording it in ``notes``; by default it is an error. ``box_format`` says
    how the release stores ``target_bbox`` (:func:`box_formats`; default ``[x, y, w,
    h]``); ``accept_aspect`` keeps generated images' boxes whose aspect is outside [0.5,
    2], recording each in ``notes``. Image files are read inside ``base`` only; a hub row
    (no ``base``) that names a file instead of carrying its bytes is read only inside
    ``roots`` (default: the hub caches)."""
    formats = (
        box_format if isinstance(box_format, dict) and set(box_format) == set(CONDITIONS) else box_formats(box_format)
    )
    image_value = raw.get("image")
    name = raw.get("file_name") or (image_value.get("path") if isinstance(image_value, Mapping) else None)
    where = f"row {index}" + (f" ({Path(str(name)).name})" if name else "")
    try:
        given = {k: v for k, v in raw.items() if not _missing(v)}
        try:
            parsed = parse_filename(Path(str(name)).name) if name else {}
        except ValueError:
            # a name outside the authors' scheme is fine when the metadata says it all
            if not all(f in given for f in (*REQUIRED_FIELDS, "rel_level")):
                raise
            parsed = {}
        file = str(base / str(name)) if base is not None and name and not Path(str(name)).is_absolute() else str(name)
        fields = _reconcile(parsed, given, where, file, prefer_metadata, notes) if parsed else dict(given)
        missing = [f for f in REQUIRED_FIELDS if f not in fields]
        if missing:
            raise ValueError(f"missing fields {missing}")
        if "rel_level" not in fields:
            raise ValueError("no condition: neither a rel_level column nor a parsable file name")
        condition = canonical_condition(fields["rel_level"])
        coco_id = _coco_id(parsed, given, name, file)
        raw_box = _bbox(fields["target_bbox"])
        rel_score = _score(fields.get("rel_score"))
        excluded = _bool(fields.get("excluded"))
        image = image_value if image_value is not None else name
        data, size, _note = _image_bytes(image, base, roots)
        box = _checked_box(raw_box, condition, size, formats[condition], where, file, accept_aspect, notes)
        # the metadata's spelling is what CLIP sees (the authors': ``cubicle/office``,
        # ``_`` read as a space); a scene known only from the file name gets that spelling too
        scene = _label(given["scene"] if "scene" in given else scene_spelling(str(fields["scene"])))
        target = _label(fields["target"])
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
        "coco_id": coco_id,
        "scene": scene,
        "target": target,
        "swapped_object": "" if condition in ("original", "clean") else swapped,
        "gold_label": gold,
        "condition": condition,
        "target_bbox": box,
        "width": int(size[0]),
        "height": int(size[1]),
        "rel_level": str(fields["rel_level"]),
        "rel_score": rel_score,
        "excluded": excluded,
    }


#: our fields a source column can be mapped to (``--column-map SOURCE=FIELD``)
SOURCE_FIELDS: tuple[str, ...] = tuple(dict.fromkeys(v for v in COLUMN_MAP.values() if v))


def map_columns(columns: Iterable[str], overrides: Mapping[str, str | None] | None = None) -> dict[str, str | None]:
    """Source column -> our field (``None``: dropped). The authors' extra fields
    (:data:`~lmms_scene.data.cooco.schema.AUTHORS_EXTRA_FIELDS`: fixations, captions,
    instances) are dropped (:func:`build_dataset` records that in the card). Raises
    ``CoocoBuildError`` listing every other column the builder does not know, with the
    ``--column-map`` that would map or drop each, so a changed release schema fails
    loudly instead of silently losing a field."""
    mapping = {**COLUMN_MAP, **(overrides or {})}
    columns = list(columns)
    if not columns:
        raise CoocoBuildError("the source has no columns (no rows?): nothing to build")
    bad = sorted({v for v in (overrides or {}).values() if v and v not in SOURCE_FIELDS})
    if bad:
        raise CoocoBuildError(f"--column-map: {bad} are not COOCO fields; FIELD is one of {list(SOURCE_FIELDS)} or -")
    unknown = [c for c in columns if c not in mapping and not AUTHORS_EXTRA_FIELDS.fullmatch(str(c))]
    if unknown:
        fix = " ".join(f"--column-map {entry}" for entry in suggest_column_map(unknown, SOURCE_FIELDS))
        raise CoocoBuildError(
            f"unknown COOCO source columns {unknown} (columns seen: {columns}). Map or drop each explicitly, "
            f"e.g. {fix} (FIELD one of {sorted(SOURCE_FIELDS)}; SOURCE=- drops a column)."
        )
    chosen = {c: mapping.get(c) for c in columns}
    fields = {v for v in chosen.values() if v}
    if "image" not in fields and "file_name" not in fields:
        raise CoocoBuildError(f"no image column among {columns}; map one with --column-map SOURCE=image")
    return chosen


def dropped_extras(columns: Iterable[str], mapping: Mapping[str, str | None]) -> list[str]:
    """The authors' extra fields among ``columns`` that ``mapping`` drops."""
    return [c for c in columns if mapping.get(c) is None and AUTHORS_EXTRA_FIELDS.fullmatch(str(c))]


def extras_note(counts: Mapping[str, int]) -> str:
    """The card's line for the authors' extra fields that were dropped."""
    listed = ", ".join(f"`{name}` ({n} rows)" for name, n in sorted(counts.items()))
    return (
        f"dropped the authors' extra fields {listed}: COCO-Search18 gaze fixations and the COCO 2017 caption and "
        f"instance annotations of the original images (clean images copy their original's). The naming task does "
        f"not use them; they remain in the release's metadata file, in COCO-Search18 and in COCO 2017."
    )


def _rename(row: Mapping[str, Any], mapping: Mapping[str, str | None]) -> dict[str, Any]:
    return {mapping[k]: v for k, v in row.items() if mapping.get(k)}
