"""RGBA compositing and the recomposition check."""

from __future__ import annotations

import numpy as np
import pytest

from lmms_scene import compositing as C


def _layer(h=4, w=5, rgba=(0, 0, 0, 0)):
    a = np.zeros((h, w, 4), np.uint8)
    a[...] = rgba
    return a


def test_opaque_layer_covers_and_transparent_shows_through():
    bg = _layer(rgba=(10, 20, 30, 255))
    fg = _layer()
    fg[1, 2] = (200, 100, 50, 255)
    out = C.composite([bg, fg])
    assert out.shape == (4, 5, 3) and out.dtype == np.uint8
    assert out[1, 2].tolist() == [200, 100, 50]
    assert out[0, 0].tolist() == [10, 20, 30]


def test_half_alpha_blends_over_and_order_matters():
    bg = _layer(rgba=(0, 0, 0, 255))
    red = _layer(rgba=(255, 0, 0, 128))
    blue = _layer(rgba=(0, 0, 255, 255))
    assert C.composite([bg, red])[0, 0].tolist() == [128, 0, 0]
    assert C.composite([bg, red, blue])[0, 0].tolist() == [0, 0, 255]
    assert C.composite([bg, blue, red])[0, 0].tolist() == [128, 0, 127]


def test_composite_rgba_matches_flattened_on_opaque_background():
    rng = np.random.default_rng(0)
    layers = [_layer(rgba=(50, 60, 70, 255))] + [rng.integers(0, 256, (4, 5, 4), dtype=np.uint8) for _ in range(4)]
    rgba = C.composite_rgba(layers)
    assert (rgba[..., 3] == 255).all()
    assert np.abs(rgba[..., :3].astype(int) - C.composite(layers).astype(int)).max() <= 1


def test_pil_inputs_and_rgb_layers():
    from PIL import Image

    bg = Image.new("RGB", (5, 4), (1, 2, 3))
    fg = Image.new("RGBA", (5, 4), (0, 0, 0, 0))
    fg.putpixel((0, 0), (9, 9, 9, 255))
    img = C.composite_image([bg, fg])
    assert img.mode == "RGB" and img.size == (5, 4)
    assert img.getpixel((0, 0)) == (9, 9, 9) and img.getpixel((4, 3)) == (1, 2, 3)


def test_size_mismatch_names_the_layer():
    with pytest.raises(ValueError, match=r"layers\[1\]: size 3x4 differs from layer 0's 5x4"):
        C.composite([_layer(), _layer(w=3)])
    with pytest.raises(ValueError, match="non-empty"):
        C.composite([])


def test_recomposition_check_exact_and_rejects_beyond_tolerance():
    bg = _layer(rgba=(100, 100, 100, 255))
    fg = _layer()
    fg[0, 0] = (0, 255, 0, 255)
    ref = C.composite([bg, fg])
    result = C.check_recomposition([bg, fg], ref)
    assert result.max_difference == 0 and result.ok
    bad = ref.copy()
    bad[3, 4] = (100, 100, 105)
    assert C.recomposition_error([bg, fg], bad).max_difference == 5
    assert C.recomposition_error([bg, fg], bad, tolerance=5).ok
    with pytest.raises(ValueError, match=r"scene-7: .*max pixel difference 5 > tolerance 2 \(1 pixels over"):
        C.check_recomposition([bg, fg], bad, name="scene-7")
    with pytest.raises(ValueError, match="composite: size"):
        C.recomposition_error([bg, fg], ref[:2])


def test_equal_to_a_chain_of_pil_alpha_composite_within_one_level():
    from PIL import Image

    rng = np.random.default_rng(1)
    h, w = 37, 53
    bg = np.concatenate([rng.integers(0, 256, (h, w, 3), dtype=np.uint8), np.full((h, w, 1), 255, np.uint8)], 2)
    layers = [bg]
    for _k in range(5):  # random soft alpha, each layer on part of the canvas only
        arr = np.zeros((h, w, 4), np.uint8)
        y, x = rng.integers(0, h // 2), rng.integers(0, w // 2)
        arr[y : y + 15, x : x + 20] = rng.integers(0, 256, (15, 20, 4), dtype=np.uint8)
        layers.append(arr)
    chain = Image.fromarray(layers[0], "RGBA")
    for arr in layers[1:]:
        chain = Image.alpha_composite(chain, Image.fromarray(arr, "RGBA"))
    ref = np.asarray(chain.convert("RGB")).astype(int)
    assert np.abs(C.composite(layers).astype(int) - ref).max() <= 1
    # a lone semi-transparent layer flattened onto a colour: the chain over that colour
    white = Image.new("RGBA", (w, h), (10, 200, 30, 255))
    ref = np.asarray(Image.alpha_composite(white, Image.fromarray(layers[3], "RGBA")).convert("RGB")).astype(int)
    assert np.abs(C.composite([layers[3]], background=(10, 200, 30)).astype(int) - ref).max() <= 1


def test_lone_layer_on_a_background_image():
    from PIL import Image

    fg = _layer()
    fg[0, 0] = (9, 9, 9, 255)
    pattern = Image.new("RGB", (5, 4), (1, 2, 3))
    pattern.putpixel((4, 3), (7, 7, 7))
    out = C.composite([fg], background=pattern)
    assert out[0, 0].tolist() == [9, 9, 9] and out[3, 4].tolist() == [7, 7, 7] and out[1, 1].tolist() == [1, 2, 3]
    with pytest.raises(ValueError, match="background: size 2x2"):
        C.composite([fg], background=Image.new("RGB", (2, 2)))


def test_recomposition_statistics_on_a_near_miss():
    bg = _layer(rgba=(100, 100, 100, 255))
    ref = C.composite([bg]).copy()
    ref[0, 0] = (101, 100, 100)  # one channel of one pixel off by one
    ref[1, 1] = (100, 100, 97)  # and one off by three
    r = C.recomposition_error([bg], ref, tolerance=2)
    assert (r.max_difference, r.n_pixels_over) == (3, 1) and r.mean_difference == pytest.approx(4 / (3 * 20))
