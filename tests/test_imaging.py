"""Padding, box geometry and Gaussian noise (lmms_scene.imaging), pixel by pixel."""

from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from lmms_scene import imaging

GREY = (128, 128, 128)


def random_image(width: int, height: int, seed: int = 0) -> Image.Image:
    rng = np.random.default_rng(seed)
    return Image.fromarray(rng.integers(0, 256, (height, width, 3), dtype=np.uint8))


def px(image: Image.Image) -> np.ndarray:
    return np.asarray(image, dtype=np.uint8)


# -- padding --------------------------------------------------------------------------


def test_pad_landscape_centres_on_grey_square_and_shifts_box():
    image = random_image(10, 6)
    padded, box = imaging.pad_to_square(image, (1, 2, 3, 2))
    assert padded.size == (10, 10)
    out = px(padded)
    assert (out[:2] == GREY).all() and (out[8:] == GREY).all()  # 2 grey rows above and below
    assert np.array_equal(out[2:8], px(image))
    assert box == (1.0, 4.0, 3.0, 2.0)


def test_pad_portrait_odd_difference_puts_extra_column_right():
    image = random_image(4, 7)
    padded, box = imaging.pad_to_square(image, (0, 0, 4, 7))
    out = px(padded)
    assert padded.size == (7, 7)
    assert (out[:, :1] == GREY).all() and (out[:, 5:] == GREY).all()  # (7 - 4) // 2 = 1 left, 2 right
    assert np.array_equal(out[:, 1:5], px(image))
    assert box == (1.0, 0.0, 4.0, 7.0)


def test_pad_square_image_is_unchanged():
    image = random_image(6, 6)
    padded, box = imaging.pad_to_square(image, (1, 1, 2, 2))
    assert np.array_equal(px(padded), px(image))
    assert box == (1.0, 1.0, 2.0, 2.0)


def test_to_rgb_composites_transparency_onto_grey():
    rgba = Image.new("RGBA", (2, 1), (255, 0, 0, 0))
    rgba.putpixel((1, 0), (10, 20, 30, 255))
    out = imaging.to_rgb(rgba)
    assert out.mode == "RGB"
    assert out.getpixel((0, 0)) == GREY  # fully transparent: the padding grey, not red
    assert out.getpixel((1, 0)) == (10, 20, 30)


def test_to_rgb_converts_grey_cmyk_and_palette_pixel_by_pixel():
    grey = Image.fromarray(np.array([[0, 77, 255]], dtype=np.uint8), mode="L")
    assert [imaging.to_rgb(grey).getpixel((x, 0)) for x in range(3)] == [(0, 0, 0), (77, 77, 77), (255, 255, 255)]
    cmyk = Image.new("CMYK", (1, 1), (0, 255, 255, 0))  # pure red in CMYK
    assert imaging.to_rgb(cmyk).getpixel((0, 0)) == (255, 0, 0)
    palette = Image.new("P", (2, 1))
    palette.putpalette([10, 20, 30, 200, 100, 50] + [0] * 762)
    palette.putpixel((1, 0), 1)
    assert [imaging.to_rgb(palette).getpixel((x, 0)) for x in range(2)] == [(10, 20, 30), (200, 100, 50)]
    la = Image.new("LA", (1, 1), (90, 255))
    assert imaging.to_rgb(la).getpixel((0, 0)) == (90, 90, 90)


def test_to_rgb_scales_16_bit_grey_instead_of_clipping():
    values = np.array([[0, 257 * 100, 65535]], dtype=np.uint16)
    image = (
        Image.fromarray(values).convert("I;16") if Image.fromarray(values).mode != "I;16" else Image.fromarray(values)
    )
    assert image.mode.startswith("I;16")
    out = imaging.to_rgb(image)
    # 65535 -> 255 and 25700 -> 100: scaled by 255/65535, where a plain convert would clip at 255
    assert [out.getpixel((x, 0)) for x in range(3)] == [(0, 0, 0), (100, 100, 100), (255, 255, 255)]


def test_box_pixels_is_the_authors_map_int_region_clipped():
    # COOCO's evaluation: x, y, w, h = map(int, bbox); noise on [y:y + h, x:x + w]
    assert imaging.box_pixels((1.5, 1.5, 2, 2), (10, 10)) == (1, 1, 3, 3)
    assert imaging.box_pixels((1.9, 0.2, 2.9, 3.99), (10, 10)) == (1, 0, 3, 3)
    assert imaging.box_pixels((-3, 8, 5, 5), (10, 10)) == (0, 8, 2, 10)
    with pytest.raises(ValueError, match="covers no pixel"):
        imaging.box_pixels((20, 20, 2, 2), (10, 10))
    with pytest.raises(ValueError, match="covers no pixel"):
        imaging.box_pixels((3, 3, 0.9, 4), (10, 10))  # int(0.9) = 0 columns


@pytest.mark.parametrize("box", [(1.5, 1.5, 2, 2), (2.5, 0.49, 3.01, 4.5), (0.2, 0.7, 9.6, 9.1), (3.5, 2.5, 2.0, 1.5)])
def test_crop_is_pils_crop_of_the_float_box(box):
    # the authors crop with image.crop((x, y, x + w, y + h)): PIL rounds each edge
    image = random_image(10, 10, seed=3)
    x, y, w, h = box
    theirs = image.crop((x, y, x + w, y + h))
    ours = imaging.crop_box(image, box)
    assert ours.size == theirs.size and np.array_equal(px(ours), px(theirs))
    assert imaging.crop_pixels(box, (10, 10)) == tuple(round(v) for v in (x, y, x + w, y + h))


def test_a_crop_that_rounds_to_nothing_is_an_error():
    # round(3.5) == round(4.5) == 4: PIL would hand back a 0 x 0 image
    with pytest.raises(ValueError, match="crops no pixel"):
        imaging.crop_pixels((3.5, 3.5, 1.0, 1.0), (10, 10))


# -- noise ----------------------------------------------------------------------------

BOX = (4, 3, 5, 4)  # pixels x 4..8, y 3..6


def inside_mask(size=(16, 12), box=BOX):
    mask = np.zeros((size[1], size[0]), dtype=bool)
    x0, y0, x1, y1 = imaging.box_pixels(box, size)
    mask[y0:y1, x0:x1] = True
    return mask


def test_target_noise_changes_only_the_box():
    image = Image.new("RGB", (16, 12), (100, 100, 100))
    out = px(imaging.add_gaussian_noise(image, BOX, "target", 0.5, seed=1))
    inside = inside_mask()
    assert (out[~inside] == 100).all()
    assert (out[inside] != 100).mean() > 0.95


def test_context_noise_changes_everything_but_the_box():
    image = Image.new("RGB", (16, 12), (100, 100, 100))
    out = px(imaging.add_gaussian_noise(image, BOX, "context", 0.5, seed=1))
    inside = inside_mask()
    assert (out[inside] == 100).all()
    assert (out[~inside] != 100).mean() > 0.95


def test_all_noise_and_areas_share_one_noise_field():
    image = random_image(16, 12, seed=3)
    target = px(imaging.add_gaussian_noise(image, BOX, "target", 0.5, seed=9))
    context = px(imaging.add_gaussian_noise(image, BOX, "context", 0.5, seed=9))
    everything = px(imaging.add_gaussian_noise(image, BOX, "all", 0.5, seed=9))
    inside = inside_mask()
    assert np.array_equal(everything[inside], target[inside])
    assert np.array_equal(everything[~inside], context[~inside])


def test_noise_values_follow_the_discretised_gaussian():
    """clip(x + e) cast to uint8 truncates, so on a flat grey image the output is
    128 + floor(e), e ~ N(0, (255 * level)^2): a chi-square test of the observed
    counts against P(floor(e) = k) = Phi((k + 1) / sigma) - Phi(k / sigma)."""
    from scipy import stats

    level = 0.1
    sigma = 255 * level
    image = Image.new("RGB", (200, 200), GREY)
    out = px(imaging.add_gaussian_noise(image, (0, 0, 10, 10), "all", level, seed=5)).astype(np.int64) - 128
    values = out.ravel()
    edges = np.arange(-60, 61, 6)  # bins of 6 values, tails pooled
    observed = np.histogram(np.clip(values, -60, 59), bins=edges)[0]
    cdf = stats.norm.cdf(edges / sigma)
    expected = np.diff(cdf)
    expected[0] += cdf[0]
    expected[-1] += 1 - cdf[-1]
    expected *= values.size
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    # and the moments: truncation shifts the mean by -1/2
    assert abs(values.mean() + 0.5) < 0.15
    assert abs(values.std() - np.sqrt(sigma**2 + 1 / 12)) < 0.3


def test_noise_is_independent_across_pixels_and_channels():
    out = px(imaging.add_gaussian_noise(Image.new("RGB", (300, 300), GREY), (0, 0, 5, 5), "all", 0.1, seed=9))
    d = out.astype(np.float64) - 128
    assert abs(np.corrcoef(d[:, :-1].ravel(), d[:, 1:].ravel())[0, 1]) < 0.02  # neighbours
    assert abs(np.corrcoef(d[..., 0].ravel(), d[..., 1].ravel())[0, 1]) < 0.02  # channels


def test_noise_clips_at_both_ends():
    black = px(imaging.add_gaussian_noise(Image.new("RGB", (100, 100), (0, 0, 0)), (0, 0, 5, 5), "all", 0.5, seed=2))
    white = px(
        imaging.add_gaussian_noise(Image.new("RGB", (100, 100), (255, 255, 255)), (0, 0, 5, 5), "all", 0.5, seed=2)
    )
    # half of the draws are negative: on black they clip to 0, on white the positive half clips to 255
    assert 0.45 < (black == 0).mean() < 0.55
    assert 0.45 < (white == 255).mean() < 0.55
    assert black.max() == 255 and white.min() == 0  # sigma 127.5: some draws reach the other end


def test_noise_is_deterministic_per_seed():
    image = random_image(16, 12)
    a = px(imaging.add_gaussian_noise(image, BOX, "all", 1.0, seed=7))
    b = px(imaging.add_gaussian_noise(image, BOX, "all", 1.0, seed=7))
    c = px(imaging.add_gaussian_noise(image, BOX, "all", 1.0, seed=8))
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_noise_seed_is_stable_and_distinguishes_settings():
    # a fixed value: the seed must not depend on the process (hash() salting) or platform
    assert imaging.noise_seed("cooco", "img", "target", 0.5) == imaging.noise_seed("cooco", "img", "target", 0.50)
    assert imaging.noise_seed("cooco", "990000000001_kitchen_cup_original", "target", 0.5) == 7983736294871925189
    seeds = {imaging.noise_seed("img", a, lv) for a in imaging.NOISE_AREAS for lv in (0.5, 1.0)}
    assert len(seeds) == 6
    assert all(0 <= s < 2**63 for s in seeds)


def test_level_zero_returns_an_unchanged_copy_and_input_is_never_modified():
    image = random_image(16, 12)
    before = px(image).copy()
    out = imaging.add_gaussian_noise(image, BOX, "target", 0.0, seed=1)
    assert out is not image and np.array_equal(px(out), before)
    imaging.add_gaussian_noise(image, BOX, "all", 1.0, seed=1)
    assert np.array_equal(px(image), before)


def test_noise_on_non_rgb_input_returns_rgb():
    out = imaging.add_gaussian_noise(Image.new("L", (8, 8), 50), (1, 1, 2, 2), "target", 0.5, seed=0)
    assert out.mode == "RGB"


@pytest.mark.parametrize("area, level", [("background", 0.5), ("target", -0.1), ("target", float("nan"))])
def test_noise_rejects_bad_area_or_level(area, level):
    with pytest.raises(ValueError):
        imaging.add_gaussian_noise(Image.new("RGB", (8, 8)), (1, 1, 2, 2), area, level, seed=0)


@pytest.mark.slow
def test_noise_field_is_the_same_in_another_process_and_thread_count():
    import subprocess
    import sys

    here = imaging.standard_normal_field((64, 48, 3), seed=1234)
    code = (
        "import torch, numpy as np; torch.set_num_threads(1); from lmms_scene import imaging; "
        "f = imaging.standard_normal_field((64, 48, 3), seed=1234); print(repr(float(f.sum())), repr(float(f[5, 7, 2])))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert [float(x) for x in out] == [float(here.sum()), float(here[5, 7, 2])]
