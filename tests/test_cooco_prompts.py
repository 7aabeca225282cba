"""The COOCO region prompt in every model family's format, and its wiring through the
task YAML's lmms_eval_specific_kwargs."""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
import yaml

from lmms_scene import prompts
from lmms_scene.data import cooco

REPO = Path(__file__).resolve().parents[1]
TASK_DIR = REPO / "tasks" / "cooco"
SUFFIX = "Answer with the object's name only. No extra text."

# A 100 x 50 image padded to 100 x 100 (25 grey rows above); the fractional box
# (10.4, 5.7, 20.4, 9.6) moves to (10.4, 30.7, 20.4, 9.6), i.e. xyxy (10.4, 30.7, 30.8, 40.3).
# Qwen's integer coordinates are its edges rounded to the nearest integer (10, 31, 31, 40: the
# rectangle the RefCLIPScore crop takes, as PIL's crop of the float box does), but the
# normalised coordinates, the centre and the Kosmos-2 patches come from the float box.
DOC = {"width": 100, "height": 50, "target_bbox": [10.4, 5.7, 20.4, 9.6]}


def independent_context():
    """The prompt values computed here from the float box, without lmms_scene."""

    from transformers.models.kosmos2.processing_kosmos2 import coordinate_to_patch_index

    side = 100
    dy = (100 - 50) // 2
    x, y, w, h = DOC["target_bbox"]
    xyxy = (x, y + dy, x + w, y + dy + h)
    norm = tuple(v / side for v in xyxy)
    pixels = tuple(round(v) for v in xyxy)
    cx, cy = 100 * (norm[0] + norm[2]) / 2, 100 * (norm[1] + norm[3]) / 2
    return norm, pixels, (cx, cy), coordinate_to_patch_index(norm, 32)


#: every model format's template (test_every_template_is_tested_and_wired_in_the_yaml)
VARIANTS = ("default", "kosmos2", "llava_onevision", "molmo", "qwen2_5_vl", "xgen_mm")


@functools.lru_cache(maxsize=1)
def expected() -> dict[str, str]:
    """Each format's prompt for DOC, from :func:`independent_context` (computed when a test
    asks: importing Kosmos-2's processor module imports transformers' image stack, ~10 s
    of collecting this file otherwise)."""
    norm, pixels, centre, patches = independent_context()
    two = [f"{v:.2f}" for v in norm]
    n2, n4 = ", ".join(two), ", ".join(f"{v:.4f}" for v in norm)
    return {
        "default": f"What is the object in this part of the image [{n2}]? {SUFFIX}",
        "llava_onevision": f"What is the object in this part of the image [{n4}]? {SUFFIX}",
        "qwen2_5_vl": f"What is the object in this part of the image [{', '.join(map(str, pixels))}]? {SUFFIX}",
        "kosmos2": f"<grounding>What is the object in <phrase>this part</phrase><object><patch_index_{patches[0]:04d}><patch_index_{patches[1]:04d}></object> of the image? {SUFFIX}",
        "molmo": f"What is the object at point x = {centre[0]:.1f}, y = {centre[1]:.1f} of the image? {SUFFIX}",
        "xgen_mm": f"What is the object in this part of the image <bbox>[{two[0]}, {two[1]}][{two[2]}, {two[3]}]</bbox>? {SUFFIX}",
    }


def test_expected_values_are_those_of_the_float_box_not_the_pixel_box():
    # written out once, so a change in the independent computation is seen too
    norm, pixels, centre, patches = independent_context()
    n2, n4 = ", ".join(f"{v:.2f}" for v in norm), ", ".join(f"{v:.4f}" for v in norm)
    assert set(expected()) == set(VARIANTS)
    assert n2 == "0.10, 0.31, 0.31, 0.40" and n4 == "0.1040, 0.3070, 0.3080, 0.4030"
    assert pixels == (10, 31, 31, 40)
    assert (f"{centre[0]:.1f}", f"{centre[1]:.1f}") == ("20.6", "35.5")
    # 32 x 32 grid: upper-left row 9 col 3 -> 291; lower-right row 12 col 9 -> 393
    # (the rounded pixel box would give row 13 -> 425)
    assert patches == (291, 393)
    ctx = cooco.prompt_context(DOC)
    assert (ctx["nx1"], ctx["ny1"], ctx["nx2"], ctx["ny2"]) == pytest.approx(norm)
    assert (ctx["cx"], ctx["cy"]) == pytest.approx(centre)
    assert (ctx["x1"], ctx["y1"], ctx["x2"], ctx["y2"]) == pixels


def task_utils():
    import importlib

    return importlib.import_module("lmms_scene.tasks.cooco.utils")


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_prompt_text_per_model_format(variant):
    assert prompts.render(f"cooco/{variant}.jinja", **cooco.prompt_context(DOC)) == expected()[variant]


def test_every_template_is_tested_and_wired_in_the_yaml():
    assert set(prompts.available("cooco")) == set(expected())
    config = yaml.safe_load(re.sub(r"!function \S+", "fn", (TASK_DIR / "_default_template_yaml").read_text()))
    kwargs = config["lmms_eval_specific_kwargs"]
    assert {k: v["template"] for k, v in kwargs.items()} == {
        ("default" if k == "default" else k): f"cooco/{k}.jinja" for k in expected()
    }


def test_doc_to_text_uses_the_models_template_and_falls_back_to_default():
    utils = task_utils()
    assert utils.doc_to_text(DOC, {"template": "cooco/molmo.jinja"}) == expected()["molmo"]
    assert utils.doc_to_text(DOC, None) == expected()["default"]
    # lmms-eval 0.7.3 merges "default" into the whole mapping for unlisted models
    merged = {"default": {"template": "cooco/default.jinja"}, "template": "cooco/default.jinja"}
    assert utils.doc_to_text(DOC, merged) == expected()["default"]


def test_kosmos_patch_indices_agree_with_the_kosmos2_processor():
    from transformers.models.kosmos2.processing_kosmos2 import coordinate_to_patch_index

    for box in [(0.1, 0.3, 0.3, 0.4), (0.0, 0.0, 1.0, 1.0), (0.51, 0.02, 0.77, 0.99), (0.25, 0.25, 0.5, 0.5)]:
        assert cooco.kosmos_patch_indices(box) == coordinate_to_patch_index(box, 32)


def test_prompt_context_on_a_square_and_a_portrait_image():
    square = cooco.prompt_context({"width": 64, "height": 64, "target_bbox": [0, 0, 64, 64]})
    assert (square["x1"], square["y1"], square["x2"], square["y2"]) == (0, 0, 64, 64)
    assert (square["cx"], square["cy"]) == (50.0, 50.0) and (square["patch_ul"], square["patch_lr"]) == (0, 1023)
    portrait = cooco.prompt_context({"width": 30, "height": 60, "target_bbox": [0.5, 10, 10, 10]})
    # (60 - 30) // 2 = 15 grey columns on the left: x 15.5 .. 25.5, each edge rounded half to
    # even as PIL's crop does (16, 26)
    assert (portrait["x1"], portrait["y1"], portrait["x2"], portrait["y2"]) == (16, 10, 26, 20)
    assert portrait["side"] == 60
