"""COOCO's target boxes: how the release stores them (:func:`box_formats`,
``--box-format``), why a box cannot be an image's target box (:func:`box_problem`), and a
row's box checked with every other order in which it would make sense reported
(:func:`_checked_box`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from lmms_scene import imaging
from lmms_scene.data.cooco.schema import (
    BOX_ASPECT_RANGE,
    BOX_FORMATS,
    CONDITIONS,
    GENERATED_CONDITIONS,
    canonical_condition,
    to_xywh,
)
from lmms_scene.data.local import DATA_FILE, TASKS_DIR  # noqa: F401  (re-exported: where write_local puts things)


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
