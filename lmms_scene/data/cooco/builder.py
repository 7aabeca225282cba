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

import csv
import io
import math
import re
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from PIL import Image

from lmms_scene import imaging
from lmms_scene.data import local, recheck, release
from lmms_scene.data.cooco.schema import (
    AUTHORS_EXTRA_FIELDS,
    BOX_ASPECT_RANGE,
    BOX_FORMATS,
    COLUMN_MAP,
    CONDITIONS,
    GENERATED_CONDITIONS,
    HUB_REPO,
    REQUIRED_FIELDS,
    CoocoBuildError,
    CoocoBuildWarning,
    canonical_condition,
    features,
    label_key,
    parse_filename,
    scene_spelling,
    suggest_column_map,
    to_xywh,
)
from lmms_scene.data.local import DATA_FILE, TASKS_DIR  # noqa: F401  (re-exported: where write_local puts things)
from lmms_scene.files import iter_jsonl, loads
from lmms_scene.progress import progress

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


def box_formats(spec: str | Mapping[str, str] | Iterable[str] | None) -> dict[str, str]:
    """How each condition's ``target_bbox`` is stored, from ``--box-format`` values:
    ``FORMAT`` (every row) or ``WHICH=FORMAT`` with WHICH ``all``, ``generated`` (the
    inpainted conditions), ``original`` (original and clean images, which carry the
    COCO box) or a condition name; later entries override earlier ones. FORMAT is one
    of :data:`~lmms_scene.data.cooco.schema.BOX_FORMATS`.

    >>> box_formats(["generated=xwyh"])["low"], box_formats(["generated=xwyh"])["original"]
    ('xwyh', 'xywh')
    """
    out = {c: "xywh" for c in CONDITIONS}
    if spec is None:
        return out
    items: Iterable[str] = (
        [spec]
        if isinstance(spec, str)
        else ([f"{k}={v}" for k, v in spec.items()] if isinstance(spec, Mapping) else spec)
    )
    groups = {"all": CONDITIONS, "generated": GENERATED_CONDITIONS, "original": ("original", "clean")}
    for item in items:
        for part in str(item).split(","):
            which, sep, fmt = part.strip().rpartition("=")
            which, fmt = (which.strip().lower() or "all") if sep else "all", fmt.strip().lower()
            if fmt not in BOX_FORMATS:
                raise ValueError(f"--box-format {item!r}: format {fmt!r} is not one of {', '.join(BOX_FORMATS)}")
            if which in groups:
                chosen = groups[which]
            else:
                try:
                    chosen = (canonical_condition(which),)
                except ValueError:
                    raise ValueError(
                        f"--box-format {item!r}: {which!r} is not all, generated, original or a condition "
                        f"({', '.join(CONDITIONS)})"
                    ) from None
            out.update({c: fmt for c in chosen})
    return out


#: How far (pixels) a box may reach beyond the image: annotation rounding.
BOX_TOLERANCE = 1.0
_BOX_ORDER = {"xywh": "[x, y, w, h]", "xyxy": "[x1, y1, x2, y2]", "xwyh": "[x, w, y, h]"}


def _aspect_ok(w: float, h: float) -> bool:
    """w/h within :data:`BOX_ASPECT_RANGE`, allowing each side the one pixel that the
    authors' integer truncation of a fitted box can take off."""
    low, high = BOX_ASPECT_RANGE
    return (w + 1) / h >= low and w / (h + 1) <= high


def box_problem(box: Sequence[float], size: tuple[int, int], generated: bool) -> str | None:
    """Why ``box = [x, y, w, h]`` cannot be the target box of an image of ``size``, or
    None: positive size, inside the image (up to :data:`BOX_TOLERANCE`), at least one
    pixel in the authors' ``map(int, bbox)`` noise region and in their crop, and for a ``generated``
    image an aspect ratio w/h between 0.5 and 2 (the inpainting step fits the box to it)."""
    x, y, w, h = (float(v) for v in box)
    width, height = size
    if w <= 0 or h <= 0:
        return f"has zero or negative area (w={w:g}, h={h:g})"
    t = BOX_TOLERANCE
    if x < -t or y < -t or x + w > width + t or y + h > height + t:
        return f"lies outside the {width}x{height} image (x={x:g}, y={y:g}, x+w={x + w:g}, y+h={y + h:g})"
    try:
        imaging.box_pixels((x, y, w, h), size)
    except ValueError:
        return "holds no whole pixel in the authors' map(int, bbox) noise region"
    try:
        imaging.crop_pixels((x, y, w, h), size)
    except ValueError:
        return "crops no pixel when its edges are rounded as the authors' crop rounds them"
    if generated and not _aspect_ok(w, h):
        low, high = BOX_ASPECT_RANGE
        return (
            f"has aspect w/h = {w / h:.2f}, outside [{low:g}, {high:g}]: the inpainting step fits every "
            f"generated image's box to that range"
        )
    return None


def _checked_box(
    raw: list[float],
    condition: str,
    size: tuple[int, int],
    fmt: str,
    where: str,
    file: str,
    accept_aspect: bool,
    notes: list[str] | None,
) -> list[float]:
    """``raw`` (as the release stores it, in ``fmt``) as a checked ``[x, y, w, h]``. A box
    that fails :func:`box_problem` is an error naming the value and the file; every other
    order in which it would make sense is reported with it (``--box-format``). With
    ``accept_aspect`` an aspect outside [0.5, 2] is recorded in ``notes`` instead."""
    generated = condition in GENERATED_CONDITIONS
    box = to_xywh(raw, fmt)
    problem = box_problem(box, size, generated)
    if problem is None:
        return box
    if generated and accept_aspect and box_problem(box, size, False) is None:
        if notes is not None:
            notes.append(f"{where}: target_bbox {raw} {problem}; kept (--accept-box-aspect)")
        return box
    shown = ", ".join(f"{v:g}" for v in raw)
    message = f"box [{shown}] read as {_BOX_ORDER[fmt]} {problem} (field target_bbox, file {file})"
    readings = []
    for other in BOX_FORMATS:
        if other == fmt:
            continue
        alt = to_xywh(raw, other)
        if box_problem(alt, size, generated) is None:
            x, y, w, h = alt
            readings.append(
                f"read as {_BOX_ORDER[other]} it is x={x:g}, y={y:g}, w={w:g}, h={h:g}, inside the image"
                + (f" with aspect {w / h:.2f}" if generated else "")
                + f": if the release stores its boxes so, pass --box-format {other}"
                + (" (or generated=" + other + " for the inpainted images only)" if generated else "")
            )
    if readings:
        message += "; " + "; ".join(readings)
    elif generated and box_problem(box, size, False) is None:
        message += "; pass --accept-box-aspect to keep such boxes (each is listed in the card)"
    raise ValueError(message)


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


# -- sources ------------------------------------------------------------------------


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
