"""The COOCO region prompt in every model family's format, and its wiring through the
task YAML's lmms_eval_specific_kwargs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from lmms_scene import prompts
from lmms_scene.data import cooco

REPO = Path(__file__).resolve().parents[1]
TASK_DIR = REPO / "tasks" / "cooco"
SUFFIX = "Answer with the object's name only. No extra text."

# A 100 x 50 image padded to 100 x 100 (25 grey rows above); the box (10, 5, 20, 10)
# moves to (10, 30, 20, 10): pixels x 10..29, y 30..39.
DOC = {"width": 100, "height": 50, "target_bbox": [10.0, 5.0, 20.0, 10.0]}

EXPECTED = {
    "default": f"What is the object in this part of the image [0.10, 0.30, 0.30, 0.40]? {SUFFIX}",
    "llava_onevision": f"What is the object in this part of the image [0.1000, 0.3000, 0.3000, 0.4000]? {SUFFIX}",
    "qwen2_5_vl": f"What is the object in this part of the image [10, 30, 30, 40]? {SUFFIX}",
    # 32 x 32 grid: upper-left patch row 9 col 3 -> 291; lower-right row 12 col 9 -> 393
    "kosmos2": f"<grounding>What is the object in <phrase>this part</phrase><object><patch_index_0291><patch_index_0393></object> of the image? {SUFFIX}",
    "molmo": f"What is the object at point x = 20.0, y = 35.0 of the image? {SUFFIX}",
    "xgen_mm": f"What is the object in this part of the image <bbox>[0.10, 0.30][0.30, 0.40]</bbox>? {SUFFIX}",
}


def task_utils():
    import importlib

    return importlib.import_module("lmms_scene.tasks.cooco.utils")


@pytest.mark.parametrize("variant", sorted(EXPECTED))
def test_prompt_text_per_model_format(variant):
    assert prompts.render(f"cooco/{variant}.jinja", **cooco.prompt_context(DOC)) == EXPECTED[variant]


def test_every_template_is_tested_and_wired_in_the_yaml():
    assert set(prompts.available("cooco")) == set(EXPECTED)
    config = yaml.safe_load(
        re.sub(r"!function \S+", "fn", (TASK_DIR / "_default_template_yaml").read_text())
    )
    kwargs = config["lmms_eval_specific_kwargs"]
    assert {k: v["template"] for k, v in kwargs.items()} == {
        ("default" if k == "default" else k): f"cooco/{k}.jinja" for k in EXPECTED
    }


def test_doc_to_text_uses_the_models_template_and_falls_back_to_default():
    utils = task_utils()
    assert utils.doc_to_text(DOC, {"template": "cooco/molmo.jinja"}) == EXPECTED["molmo"]
    assert utils.doc_to_text(DOC, None) == EXPECTED["default"]
    # lmms-eval 0.7.3 merges "default" into the whole mapping for unlisted models
    merged = {"default": {"template": "cooco/default.jinja"}, "template": "cooco/default.jinja"}
    assert utils.doc_to_text(DOC, merged) == EXPECTED["default"]


def test_kosmos_patch_indices_agree_with_the_kosmos2_processor():
    from transformers.models.kosmos2.processing_kosmos2 import coordinate_to_patch_index

    for box in [(0.1, 0.3, 0.3, 0.4), (0.0, 0.0, 1.0, 1.0), (0.51, 0.02, 0.77, 0.99), (0.25, 0.25, 0.5, 0.5)]:
        assert cooco.kosmos_patch_indices(box) == coordinate_to_patch_index(box, 32)


def test_prompt_context_on_a_square_and_a_portrait_image():
    square = cooco.prompt_context({"width": 64, "height": 64, "target_bbox": [0, 0, 64, 64]})
    assert (square["x1"], square["y1"], square["x2"], square["y2"]) == (0, 0, 64, 64)
    assert (square["cx"], square["cy"]) == (50.0, 50.0) and (square["patch_ul"], square["patch_lr"]) == (0, 1023)
    portrait = cooco.prompt_context({"width": 30, "height": 60, "target_bbox": [0.5, 10, 10, 10]})
    # (60 - 30) // 2 = 15 grey columns on the left; x 0.5 covers pixel 0 -> 15
    assert (portrait["x1"], portrait["y1"], portrait["x2"], portrait["y2"]) == (15, 10, 26, 20)
    assert portrait["side"] == 60
