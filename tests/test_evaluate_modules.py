"""The ``evaluate`` modules: laid out as ``evaluate-cli create`` does, loadable offline from
their local path with a fresh ``HF_HOME``, and giving the library functions' numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lmms_scene.evaluate_modules import NAMES, path

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("evaluate_modules")]

PAIRS = [
    (
        "The worker is not wearing a helmet. There is no guardrail.",
        ["The worker has no helmet and there is no guardrail."],
    ),
    ("There is no ladder.", ["The ladder is not secured to the wall."]),
    ("", ["There is no fire extinguisher."]),
    ("A man stands on the roof.", ["The man on the roof is not wearing a harness."]),
]
NAMING = [
    ("A teddy bear.", "teddy_bear"),
    ("cup", "teddy_bear"),
    ("", "cup"),
    ("the dog<|im_end|>", "dog"),
    ("banana", "apple"),
]
CAPTIONS = [
    ("A photo depicts a dog", ["A photo depicts a dog", "A photo depicts a cat"]),
    ("A photo depicts a cup", ["A photo depicts a bowl"]),
]

SCRIPT = r"""
import json, sys
import evaluate
from PIL import Image
from lmms_scene.evaluate_modules import path

spec = json.loads(sys.argv[1])
out = {}
cesg = evaluate.load(str(path("cesg")))
out["cesg"] = cesg.compute(predictions=[p for p, _ in spec["pairs"]], references=[r for _, r in spec["pairs"]], encoder=None)
acc = evaluate.load(str(path("cooco_naming_accuracy")))
out["naming"] = acc.compute(predictions=[p for p, _ in spec["naming"]], references=[g for _, g in spec["naming"]], model=spec["clip"])
images = [Image.new("RGB", (40, 40), c) for c in [(200, 30, 30), (30, 200, 30)]]
ref = evaluate.load(str(path("refclipscore")))
out["refclip"] = ref.compute(images=images, predictions=[c for c, _ in spec["captions"]],
                             references=[r for _, r in spec["captions"]], model=spec["clip"])
print("RESULT " + json.dumps(out, default=str))
"""


def test_layout_matches_evaluate_cli_create():
    for name in NAMES:
        folder = path(name)
        assert {p.name for p in folder.iterdir() if p.is_file()} >= {
            f"{name}.py",
            "README.md",
            "app.py",
            "requirements.txt",
        }
        card = (folder / "README.md").read_text()
        assert card.startswith("---\n") and "app_file: app.py" in card and "- metric" in card
        for heading in ("## Metric Description", "## How to Use", "### Inputs", "### Output Values", "## Citation"):
            assert heading in card, (name, heading)
        assert "lmms-scene" in (folder / "requirements.txt").read_text()
    with pytest.raises(KeyError, match="unknown evaluate module"):
        path("bleu")


def test_import_scanner_accepts_every_module():
    # evaluate reads a trailing comment on an import line as a URL; every import must be a library import
    from evaluate.loading import get_imports

    for name in NAMES:
        imports = get_imports(str(path(name) / f"{name}.py"))
        assert imports and all(kind == "library" and url == lib for kind, lib, url, _ in imports), imports


@pytest.fixture(scope="module")
def module_outputs(tiny_clip, tmp_path_factory):
    home = tmp_path_factory.mktemp("hf_home")
    env = {
        **os.environ,
        "HF_HOME": str(home),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_EVALUATE_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
    }
    spec = json.dumps({"pairs": PAIRS, "naming": NAMING, "captions": CAPTIONS, "clip": str(tiny_clip)})
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, spec], env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("RESULT "))
    # evaluate copied the modules under the fresh HF_HOME
    copied = {p.name for p in (Path(home) / "modules").rglob("*.py")}
    assert {f"{n}.py" for n in NAMES} <= copied
    return json.loads(line[len("RESULT ") :])


def test_cesg_module_equals_the_library(module_outputs):
    from lmms_scene.metrics.cesg import KEYS, score_corpus

    lib = score_corpus([(str(i), p, r) for i, (p, r) in enumerate(PAIRS)], encoder=None)
    out = module_outputs["cesg"]
    for key in KEYS:
        assert out[key] == pytest.approx(lib["means"][key]), key
    assert out["n_empty_prediction"] == lib["n_empty_prediction"] == 1
    assert out["n"] == 4 and out["provenance"]["scorer"] == "cesg"


def test_naming_accuracy_module_equals_the_cooco_rows(module_outputs, tiny_clip):
    from PIL import Image

    from lmms_scene.metrics.cooco import scoring

    items = [
        {
            "image_id": f"i{k}",
            "condition": "original",
            "noise_area": "none",
            "noise_level": 0.0,
            "scene": "kitchen",
            "target": gold,
            "gold": gold,
            "output": output,
            "crop": Image.new("RGB", (32, 32), (10 * k, 50, 90)),
        }
        for k, (output, gold) in enumerate(NAMING)
    ]
    rows = scoring.score_rows(items, model=str(tiny_clip))
    out = module_outputs["naming"]
    assert [r["accuracy"] for r in out["per_item"]] == [r["accuracy"] for r in rows]
    assert [r["levenshtein_accuracy"] for r in out["per_item"]] == [r["levenshtein_accuracy"] for r in rows]
    assert out["accuracy"] == pytest.approx(scoring.mean_of(rows, "accuracy"))
    assert out["levenshtein_accuracy"] == pytest.approx(scoring.mean_of(rows, "levenshtein_accuracy"))
    sims = [r["text_similarity"] for r in out["per_item"]]
    assert sims[2] is None and rows[2]["text_similarity"] is None  # the empty answer: not computed, counted wrong
    assert [s for s in sims if s is not None] == pytest.approx(
        [r["text_similarity"] for r in rows if r["text_similarity"] is not None]
    )
    assert out["n_empty"] == 1 and out["per_item"][0]["accuracy"] == 1.0  # "A teddy bear." is "teddy bear"
    assert out["provenance"]["checkpoint"] == str(tiny_clip)


def test_refclipscore_module_equals_the_library(module_outputs, tiny_clip):
    from PIL import Image

    from lmms_scene.metrics import clip

    images = [Image.new("RGB", (40, 40), c) for c in [(200, 30, 30), (30, 200, 30)]]
    parts = clip.ref_clip_components(images, [c for c, _ in CAPTIONS], [r for _, r in CAPTIONS], model=str(tiny_clip))
    out = module_outputs["refclip"]
    # float32 CLIP embeddings: a caption embedded in another batch (this process may have
    # embedded it beside other captions before, in another test) differs in the 7th digit;
    # after other CLIP tests in this process the scores differed by 5.5e-7 (of 0.1)
    close = lambda value: pytest.approx(value, rel=1e-6, abs=2e-6)  # noqa: E731
    assert out["scores"] == close(parts.ref_clip_score)
    assert out["refclipscore"] == close(sum(parts.ref_clip_score) / 2)
    assert out["clip_score"] == close(sum(parts.clip_score) / 2)
    assert out["clip_model"] == str(tiny_clip)
