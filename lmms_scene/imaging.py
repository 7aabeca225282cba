"""Image geometry and perturbations shared by the benchmarks.

Boxes follow COCO: ``(x, y, w, h)`` in pixels, origin at the top-left corner. COOCO's
evaluation (the authors' ``utils.py``) turns a float box into pixels in two ways, and so
do we, each in one function:

- the **noise region** (:func:`box_pixels`): ``x, y, w, h = map(int, box)``, columns
  ``int(x) .. int(x) + int(w) - 1`` (rows likewise), clipped to the image; so our noise
  touches exactly the pixels the authors' noise touches;
- the **crop** (:func:`crop_pixels`): PIL's ``image.crop((x, y, x + w, y + h))``, which
  rounds each edge to the nearest integer (Python's ``round``); the RefCLIPScore crop
  and Qwen's integer prompt coordinates use it.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Literal

import numpy as np
from PIL import Image

Box = tuple[float, float, float, float]
NoiseArea = Literal["target", "context", "all"]

#: COOCO pads every image onto a grey square before anything else (authors' code).
PAD_COLOUR: tuple[int, int, int] = (128, 128, 128)
NOISE_AREAS: tuple[str, ...] = ("target", "context", "all")


def to_rgb(image: Image.Image, background: tuple[int, int, int] = PAD_COLOUR) -> Image.Image:
    """Return ``image`` as 8-bit RGB.

    Transparent images (RGBA, LA, P with transparency) are composited onto
    ``background`` rather than having their alpha dropped, which would reveal whatever
    colour the fully transparent pixels happen to store. Grayscale, CMYK, 16-bit and
    palette images go through PIL's own conversion.
    """
    if image.mode == "RGB":
        return image
    if image.mode == "P" and "transparency" in image.info:
        image = image.convert("RGBA")
    if image.mode in ("RGBA", "LA", "PA", "RGBa"):
        rgba = image.convert("RGBA")
        canvas = Image.new("RGBA", rgba.size, background + (255,))
        return Image.alpha_composite(canvas, rgba).convert("RGB")
    if image.mode in ("I;16", "I;16B", "I;16L", "I"):
        # 16/32-bit grayscale: scale to 8 bits instead of clipping at 255.
        arr = np.asarray(image, dtype=np.float64)
        peak = 65535.0 if image.mode.startswith("I;16") or arr.max() > 255 else 255.0
        arr = np.clip(arr / peak * 255.0, 0, 255).astype(np.uint8)
        return Image.fromarray(arr).convert("RGB")
    return image.convert("RGB")


def box_pixels(box: Sequence[float], size: tuple[int, int]) -> tuple[int, int, int, int]:
    """The noise region of ``box = (x, y, w, h)`` in an image of ``size = (width,
    height)``: the integer rectangle ``(x0, y0, x1, y1)`` (``x1``/``y1`` exclusive) with
    ``x0 = int(x)``, ``x1 = int(x) + int(w)`` (rows likewise), clipped to the image.

    COOCO's evaluation code does ``x, y, w, h = map(int, bbox)`` (truncation toward
    zero) and noises ``[y:y + h, x:x + w]``; this is that region, pixel for pixel, for
    every box inside the image (a coordinate below 0, which the builder allows down to
    -1 for annotation rounding, is clipped to 0 instead of wrapping around as a negative
    numpy index would). Raises ``ValueError`` if the region holds no pixel.

    >>> box_pixels((10.7, 5.2, 20.9, 9.99), (100, 100))
    (10, 5, 30, 14)
    """
    x, y, w, h = (int(float(v)) for v in box)
    width, height = size
    x0, y0 = max(0, x), max(0, y)
    x1, y1 = min(width, x + w), min(height, y + h)
    if x1 <= x0 or y1 <= y0:
        raise ValueError(f"box {tuple(box)} covers no pixel of an image of size {width}x{height}")
    return x0, y0, x1, y1


def crop_pixels(box: Sequence[float], size: tuple[int, int]) -> tuple[int, int, int, int]:
    """The crop of ``box = (x, y, w, h)``: the rectangle ``(x0, y0, x1, y1)`` (exclusive
    ends) that PIL's ``image.crop((x, y, x + w, y + h))`` takes, each edge rounded to
    the nearest integer with Python's ``round`` (half to even), clipped to the image
    (PIL would pad a crop that leaves the image with black instead). This is how the
    authors' ``get_image_patch`` crops the RefCLIPScore image. Raises ``ValueError`` if
    the crop holds no pixel.

    >>> crop_pixels((10.4, 30.7, 20.4, 9.6), (100, 100))
    (10, 31, 31, 40)
    """
    x, y, w, h = (float(v) for v in box)
    width, height = size
    x0, y0, x1, y1 = (round(v) for v in (x, y, x + w, y + h))
    x0, y0, x1, y1 = max(0, x0), max(0, y0), min(width, x1), min(height, y1)
    if x1 <= x0 or y1 <= y0:
        raise ValueError(f"box {tuple(box)} crops no pixel of an image of size {width}x{height}")
    return x0, y0, x1, y1


def xywh_to_xyxy(box: Sequence[float]) -> tuple[float, float, float, float]:
    x, y, w, h = (float(v) for v in box)
    return x, y, x + w, y + h


def pad_offsets(width: int, height: int) -> tuple[int, int, int]:
    """Side of the grey square an image of ``width x height`` is centred on, and the
    image's offset ``(dx, dy)`` on it: ``((S - W) // 2, (S - H) // 2)``, so with an odd
    difference the extra grey column/row goes to the right/bottom (the authors' code, and
    LLaVA's ``expand2square``). The one place this geometry is computed.

    >>> pad_offsets(640, 480)
    (640, 0, 80)
    """
    width, height = int(width), int(height)
    if width <= 0 or height <= 0:
        raise ValueError(f"image size must be positive, got {width}x{height}")
    side = max(width, height)
    return side, (side - width) // 2, (side - height) // 2


def pad_to_square(
    image: Image.Image, box: Sequence[float] | None = None, fill: tuple[int, int, int] = PAD_COLOUR
) -> tuple[Image.Image, Box | None]:
    """Centre ``image`` on a ``fill``-coloured square canvas of side ``max(W, H)``.

    Returns the padded RGB image and ``box`` shifted onto it (``None`` if no box was
    given). The offset is ``((S - W) // 2, (S - H) // 2)``: with an odd difference the
    extra grey column/row goes to the right/bottom. A square image is returned as RGB
    unchanged.
    """
    image = to_rgb(image)
    width, height = image.size
    side, dx, dy = pad_offsets(width, height)
    if dx or dy:
        canvas = Image.new("RGB", (side, side), fill)
        canvas.paste(image, (dx, dy))
    else:
        canvas = image
    shifted = None
    if box is not None:
        x, y, w, h = (float(v) for v in box)
        shifted = (x + dx, y + dy, w, h)
    return canvas, shifted


def crop_box(image: Image.Image, box: Sequence[float]) -> Image.Image:
    """The pixels of ``image`` inside ``box = (x, y, w, h)`` as the authors crop them
    (see :func:`crop_pixels`)."""
    return image.crop(crop_pixels(box, image.size))


def noise_seed(*parts: object) -> int:
    """A 63-bit seed derived from ``parts`` (e.g. image id, noise area, noise level).

    Stable across processes, machines and Python versions, unlike ``hash()``, which is
    salted per process. Floats are formatted with ``repr`` so 0.5 and 0.50 agree.
    """
    text = "\x1f".join(repr(float(p)) if isinstance(p, float) else str(p) for p in parts)
    digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big") >> 1


def noise_mask(size: tuple[int, int], box: Sequence[float], area: str) -> np.ndarray:
    """Boolean ``(height, width)`` mask of the pixels ``area`` covers."""
    if area not in NOISE_AREAS:
        raise ValueError(f"noise area must be one of {NOISE_AREAS}, got {area!r}")
    width, height = size
    if area == "all":
        return np.ones((height, width), dtype=bool)
    x0, y0, x1, y1 = box_pixels(box, size)
    inside = np.zeros((height, width), dtype=bool)
    inside[y0:y1, x0:x1] = True
    return inside if area == "target" else ~inside


def standard_normal_field(shape: tuple[int, ...], seed: int) -> np.ndarray:
    """i.i.d. N(0, 1) float32 values of ``shape``, a pure function of ``seed``.

    Drawn with torch's CPU generator (a seeded ``torch.Generator``, never the global
    one), about three times faster than numpy's for an image-sized field; the values for
    one seed are the same on every call, thread and process. Noise is the same
    distribution as numpy's ``standard_normal``; the stream is torch's."""
    import torch  # deferred: torch is heavy to import

    generator = torch.Generator(device="cpu").manual_seed(int(seed) & ((1 << 63) - 1))
    return torch.randn(shape, generator=generator, dtype=torch.float32).numpy()


def add_gaussian_noise(image: Image.Image, box: Sequence[float], area: str, level: float, seed: int) -> Image.Image:
    """Add i.i.d. Gaussian noise to the ``area`` of ``image`` (COOCO, Section 4.2).

    ``box`` is ``(x, y, w, h)`` in pixels of ``image``; ``area`` is ``"target"`` (the
    box's noise region, :func:`box_pixels`: the authors' ``map(int, bbox)``),
    ``"context"`` (everything else, padding included) or ``"all"``. Each affected
    pixel value, per channel, becomes ``clip(x + e, 0, 255)`` cast to uint8 with
    ``e ~ N(0, (255 * level)^2)``, as in the authors' code. Pixels outside the area are
    untouched. The noise field is drawn for the whole image from ``seed``
    (:func:`standard_normal_field`) and then masked: for one seed the three areas share
    one noise field (``all`` equals ``target`` inside the box and ``context`` outside;
    COOCO seeds per image and level, not per area, see
    :func:`lmms_scene.data.cooco.noise_seed`). The authors' ``all`` calls their target
    function and then their context function, two draws on complementary regions, so
    each pixel gets exactly one draw there too: the ``all`` image has the same
    distribution either way. ``level == 0`` returns an unchanged copy.
    Returns a new RGB image; ``image`` is not modified.

    >>> from PIL import Image
    >>> img = Image.new("RGB", (8, 8), (100, 100, 100))
    >>> out = add_gaussian_noise(img, (2, 2, 4, 4), "target", 0.5, seed=0)
    >>> out.getpixel((0, 0)), out.getpixel((3, 3)) != (100, 100, 100)
    ((100, 100, 100), True)
    """
    level = float(level)
    if not math.isfinite(level) or level < 0:
        raise ValueError(f"noise level must be a finite number >= 0, got {level!r}")
    if area not in NOISE_AREAS:
        raise ValueError(f"noise area must be one of {NOISE_AREAS}, got {area!r}")
    rgb = to_rgb(image)
    x0, y0, x1, y1 = box_pixels(box, rgb.size)  # validates the box first
    if level == 0:
        return rgb.copy()
    pixels = np.asarray(rgb, dtype=np.uint8)
    # float32 draws halve the cost; a sigma of at most 255 keeps them exact enough.
    noisy = standard_normal_field(pixels.shape, seed)
    noisy *= np.float32(255.0 * level)
    if area == "target":
        region = (slice(y0, y1), slice(x0, x1))
        out = pixels.copy()
        part = noisy[region]
        part += pixels[region]
        out[region] = np.clip(part, 0, 255, out=part).astype(np.uint8)
        return Image.fromarray(out)
    noisy += pixels
    out = np.clip(noisy, 0, 255, out=noisy).astype(np.uint8)
    if area == "context":
        out[y0:y1, x0:x1] = pixels[y0:y1, x0:x1]
    return Image.fromarray(out)
