"""RGBA layer compositing (Layered-VQA): the "over" operator on ordered layers.

A Layered-VQA scene is an ordered list of RGBA layers, layer 0 the background; drawn
back to front with Porter-Duff "over" they recompose the scene. Layers are PIL images or ``uint8``
numpy arrays (``H x W x 4``) in straight (non-premultiplied) alpha; the arithmetic is
PIL's C ``alpha_composite`` on each layer's extent, so a 6-layer 1024x1024 scene
composites in a few milliseconds (``bench/bench_layered_vqa.py``).

>>> import numpy as np
>>> bg = np.zeros((2, 2, 4), np.uint8); bg[..., 3] = 255
>>> fg = np.zeros((2, 2, 4), np.uint8); fg[0, 0] = (255, 0, 0, 255)
>>> composite([bg, fg])[0, 0].tolist(), composite([bg, fg])[1, 1].tolist()
([255, 0, 0], [0, 0, 0])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, ImageChops

#: default tolerance of :func:`check_recomposition` (max absolute difference, 0-255):
#: PNG round trips are exact; rounding of semi-transparent edges costs at most 1-2.
DEFAULT_TOLERANCE = 2


def as_rgba(image: Any, name: str = "layer") -> np.ndarray:
    """``image`` (a PIL image or an array) as an ``H x W x 4`` ``uint8`` array."""
    if isinstance(image, np.ndarray):
        arr = image
    else:
        convert = getattr(image, "convert", None)
        if convert is None:
            raise TypeError(f"{name}: expected a PIL image or a numpy array, got {type(image).__name__}")
        arr = np.asarray(image.convert("RGBA"))
    if arr.dtype != np.uint8:
        raise TypeError(f"{name}: expected uint8 pixels, got {arr.dtype}")
    if arr.ndim == 3 and arr.shape[2] == 3:
        arr = np.concatenate([arr, np.full(arr.shape[:2] + (1,), 255, np.uint8)], axis=2)
    if arr.ndim != 3 or arr.shape[2] != 4:
        raise ValueError(f"{name}: expected an H x W x 4 (RGBA) image, got shape {arr.shape}")
    return arr


def as_rgb(image: Any, name: str = "image") -> np.ndarray:
    """``image`` as an ``H x W x 3`` ``uint8`` array (alpha dropped, not blended)."""
    if isinstance(image, np.ndarray):
        arr = image if image.ndim == 3 and image.shape[2] == 3 else as_rgba(image, name)[..., :3]
    else:
        arr = np.asarray(image.convert("RGB"))
    if arr.dtype != np.uint8:
        raise TypeError(f"{name}: expected uint8 pixels, got {arr.dtype}")
    return arr


def _pil_rgba(image: Any, name: str):
    """``image`` as a PIL RGBA image (numpy arrays checked by :func:`as_rgba`)."""
    if isinstance(image, np.ndarray):
        return Image.fromarray(np.ascontiguousarray(as_rgba(image, name)), "RGBA")
    if not hasattr(image, "convert") or not hasattr(image, "mode"):
        raise TypeError(f"{name}: expected a PIL image or a numpy array, got {type(image).__name__}")
    return image if image.mode == "RGBA" else image.convert("RGBA")


def _stack(layers: Sequence[Any]) -> list:
    if isinstance(layers, (str, bytes)) or not isinstance(layers, Sequence) or len(layers) == 0:
        raise ValueError(f"layers: expected a non-empty sequence of RGBA images, got {type(layers).__name__}")
    images = [_pil_rgba(layer, f"layers[{i}]") for i, layer in enumerate(layers)]
    w, h = images[0].size
    for i, img in enumerate(images):
        if img.size != (w, h):
            raise ValueError(f"layers[{i}]: size {img.size[0]}x{img.size[1]} differs from layer 0's {w}x{h}")
    return images


def _over(images: Sequence[Any], canvas):
    """Draw RGBA ``images`` back to front onto the opaque RGB ``canvas`` (in place).

    Porter & Duff (1984), "over" onto an opaque canvas: C = C_s a_s + C_d (1 - a_s). PIL's
    C ``paste`` with the layer as its own mask computes exactly that (equal, to the level,
    to a chain of ``Image.alpha_composite`` calls over an opaque layer 0: tests and the
    benchmark check it), on each layer's extent only (the bounding box of its
    non-transparent pixels), so a small object on a big canvas costs its own size."""
    for img in images:
        box = img.getbbox(alpha_only=True)
        if box is None:  # fully transparent
            continue
        if box != (0, 0, *canvas.size):
            img = img.crop(box)
        canvas.paste(img, box[:2], img)
    return canvas


def _is_opaque(img) -> bool:
    return img.getchannel("A").getextrema()[0] == 255


def composite_rgba(layers: Sequence[Any]) -> np.ndarray:
    """Layers drawn back to front with "over" (straight alpha, the result's own alpha
    kept): ``H x W x 4`` ``uint8``."""
    images = _stack(layers)
    canvas = Image.new("RGBA", images[0].size, (0, 0, 0, 0))
    for img in images:
        box = img.getbbox(alpha_only=True)
        if box is not None:
            canvas.alpha_composite(img, dest=box[:2], source=box)
    return np.asarray(canvas)


def _background(background: Any, size: tuple[int, int]):
    if hasattr(background, "convert") and hasattr(background, "size"):
        if tuple(background.size) != tuple(size):
            raise ValueError(
                f"background: size {background.size[0]}x{background.size[1]} differs from the layers' {size[0]}x{size[1]}"
            )
        return background.convert("RGB") if background.mode != "RGB" else background.copy()
    bg = tuple(int(c) for c in background)
    if len(bg) != 3 or not all(0 <= c <= 255 for c in bg):
        raise ValueError(
            f"background: expected an (r, g, b) colour with 0..255 values or an RGB image, got {background!r}"
        )
    return Image.new("RGB", size, bg)


def composite_image(layers: Sequence[Any], background: Any = (255, 255, 255)):
    """The scene the layers recompose as a PIL RGB image, flattened onto ``background``
    (an RGB colour, an RGB image of the layers' size, or a function of the layers giving
    one, such as :func:`lone_layer_background`) where it is not opaque: a full
    scene has an opaque layer 0, so the background never shows; a lone layer shows it
    wherever the layer is transparent."""
    images = _stack(layers)
    first = images[0]
    if _is_opaque(first):  # layer 0 is the canvas: the background never shows
        return _over(images[1:], first.convert("RGB"))
    if callable(background):  # chosen from the layers, only when it shows
        background = background(images)
    return _over(images, _background(background, first.size))


def composite(layers: Sequence[Any], background: Any = (255, 255, 255)) -> np.ndarray:
    """:func:`composite_image` as an ``H x W x 3`` ``uint8`` array."""
    return np.asarray(composite_image(layers, background))


def to_image(array: np.ndarray):
    """A numpy image as a PIL image (RGB or RGBA by its channel count)."""
    return Image.fromarray(array, "RGBA" if array.shape[2] == 4 else "RGB")


@dataclass(frozen=True)
class Recomposition:
    """How far the layers' composite is from the released composite."""

    max_difference: int
    mean_difference: float
    n_pixels_over: int
    tolerance: int

    @property
    def ok(self) -> bool:
        return self.max_difference <= self.tolerance


def _rgb_image(image: Any, name: str):
    if isinstance(image, np.ndarray):
        return Image.fromarray(np.ascontiguousarray(as_rgb(image, name)), "RGB")
    if not hasattr(image, "convert"):
        raise TypeError(f"{name}: expected a PIL image or a numpy array, got {type(image).__name__}")
    return image if image.mode == "RGB" else image.convert("RGB")


# -- the background a lone layer is shown on ----------------------------------------------

#: the colours a lone layer (or a composite without the opaque background layer) may be
#: shown on, in order of preference: a neutral mid grey first (what the generated scenes
#: always get: every palette colour is at least 89 away from it), then strong colours
BACKGROUND_CANDIDATES: tuple[tuple[int, int, int], ...] = (
    (128, 128, 128),
    (255, 0, 255),
    (0, 255, 255),
    (0, 110, 0),
    (0, 0, 140),
    (255, 255, 255),
    (0, 0, 0),
)
#: the least RGB (Euclidean, 0-255 levels) distance between the background and the
#: layer's own colours
MIN_BACKGROUND_DISTANCE = 80.0
#: the share of a layer's visible pixels that must be at least that far (a photo's layer
#: has anti-aliased and noisy pixels of every colour)
BACKGROUND_COVERAGE = 0.99


def background_distances(images: Sequence[Any], colour: Sequence[int], *, step: int = 2) -> np.ndarray:
    """RGB distances from ``colour`` of the layers' visible pixels (alpha >= 128), every
    ``step``-th row and column (a cheap, even sample)."""
    found = []
    for img in _stack(images):
        arr = np.asarray(img)[::step, ::step]
        visible = arr[..., 3] >= 128
        if visible.any():
            found.append(arr[..., :3][visible].astype(np.float32))
    if not found:
        return np.zeros(0, np.float32)
    pixels = np.concatenate(found)
    return np.sqrt(((pixels - np.asarray(colour, np.float32)) ** 2).sum(axis=1))


def lone_layer_background(images: Sequence[Any]) -> tuple[int, int, int]:
    """The colour to show ``images`` (a lone layer, or layers without an opaque background)
    on: the first of :data:`BACKGROUND_CANDIDATES` from which at least
    :data:`BACKGROUND_COVERAGE` of their visible pixels are :data:`MIN_BACKGROUND_DISTANCE`
    away, else the candidate whose nearest 1% of pixels is farthest. A white object is
    never shown on white."""
    best, best_score = BACKGROUND_CANDIDATES[0], -1.0
    for colour in BACKGROUND_CANDIDATES:
        d = background_distances(images, colour)
        if d.size == 0:
            return colour
        near = float(np.quantile(d, 1.0 - BACKGROUND_COVERAGE))
        if near >= MIN_BACKGROUND_DISTANCE:
            return colour
        if near > best_score:
            best, best_score = colour, near
    return best


def recomposition_error(layers: Sequence[Any], reference: Any, tolerance: int = DEFAULT_TOLERANCE) -> Recomposition:
    """Compare the composite of ``layers`` with ``reference`` (the scene's RGB image).

    ``max_difference``: the largest absolute difference of any channel of any pixel;
    ``mean_difference``: the mean over pixels and channels; ``n_pixels_over``: pixels with
    some channel more than ``tolerance`` off (counted only when the maximum is over it)."""
    if not isinstance(tolerance, int) or isinstance(tolerance, bool) or not 0 <= tolerance <= 255:
        raise ValueError(f"tolerance: expected an integer in 0..255, got {tolerance!r}")
    ours = composite_image(layers)
    ref = _rgb_image(reference, "composite")
    if ref.size != ours.size:
        raise ValueError(
            f"composite: size {ref.size[0]}x{ref.size[1]} differs from the layers' {ours.size[0]}x{ours.size[1]}"
        )
    diff = ImageChops.difference(ours, ref)  # |a - b| per channel, in C
    if diff.getbbox() is None:  # identical (the usual case for a lossless release)
        return Recomposition(0, 0.0, 0, tolerance)
    hist = diff.histogram()  # 256 bins per channel
    n = ours.size[0] * ours.size[1]
    biggest = max((v for c in range(3) for v in range(256) if hist[256 * c + v]), default=0)
    mean = sum(v * hist[256 * c + v] for c in range(3) for v in range(1, 256)) / (3 * n)
    over = 0
    if biggest > tolerance:  # the failure path: count the pixels (per-pixel max over channels)
        r, g, b = diff.split()
        worst = ImageChops.lighter(ImageChops.lighter(r, g), b).histogram()
        over = int(sum(worst[tolerance + 1 :]))
    return Recomposition(int(biggest), float(mean), over, tolerance)


def check_recomposition(
    layers: Sequence[Any], reference: Any, tolerance: int = DEFAULT_TOLERANCE, name: str = "scene"
) -> Recomposition:
    """:func:`recomposition_error`, raising ``ValueError`` naming ``name`` and the max
    pixel difference when it exceeds ``tolerance``."""
    result = recomposition_error(layers, reference, tolerance)
    if not result.ok:
        raise ValueError(
            f"{name}: layers do not recompose the composite: max pixel difference {result.max_difference} "
            f"> tolerance {tolerance} ({result.n_pixels_over} pixels over, mean {result.mean_difference:.3f})"
        )
    return result
