"""End-to-end: lmms_eval runs snus_sample; the results JSON holds every CESG component,
the baselines, the AC row and their provenance; ``lmms-scene show`` prints Table 2."""

from __future__ import annotations

import re

import pytest
from conftest import find_samples, java_available

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not java_available(), reason="pycocoevalcap needs Java")]

KEYS = (
    "CESG",
    "P_o",
    "R_o",
    "F1_o",
    "P_a",
    "R_a",
    "F1_a",
    "P_r",
    "R_r",
    "F1_r",
    "rouge_l",
    "meteor_nltk",
    "meteor_java",
    "cider",
    "bleu4",
    "capture_style",
    "spice_style",
)


def check(results: dict, task: str = "snus_sample") -> dict:
    res = results["results"][task]
    for key in KEYS:
        value = res[f"{key},none"]
        assert isinstance(value, float) and value >= 0.0, (key, value)
    rep = res["snus_report,none"]
    assert rep["n"] == 12 and rep["model"]["counts"]["n"] == 12
    prov = rep["model"]["provenance"]
    assert prov["cesg"]["parser"] and prov["cesg"]["coref"] and prov["cesg"]["similarity_model"]
    assert prov["cesg"]["interactive_lambda"] == 0.6 and prov["cesg"]["extra_matching"] == "off"
    assert "not Java SPICE" in prov["spice_style"]["implementation"]
    assert rep["ac"]["summary"]["CESG"] == 0.0 and rep["ac"]["summary"]["rouge_l"] > 0.8
    assert rep["model"]["summary"]["CESG"] == pytest.approx(res["CESG,none"])
    return rep


@pytest.mark.xdist_group("readme")
def test_snus_sample_through_scene_blind(readme_run):
    # README's scene_blind run: no CLIP setting, no CLIP checkpoint at hand (conftest.py)
    code, results, out, log = readme_run
    assert code == 0, log[-3000:]
    rep = check(results)
    assert rep["model"]["provenance"]["clipscore"].startswith("not computed")
    assert rep["model"]["summary"]["not_computed"]["clipscore"] == 12
    rows = find_samples(out, "snus_sample")
    assert len(rows) == 12 and len({r["CESG"]["image_id"] for r in rows}) == 12
    # the blind prior ignores the image and leaves the scored image's own caption out of its counts
    from lmms_scene.baselines.snus import blind_answer

    assert all(r["CESG"]["output"] == blind_answer({"image_id": r["CESG"]["image_id"]}, "") for r in rows)
    from lmms_scene.report.text import show_text

    text, status = show_text([out])
    assert status == 0 and "SNUS Table 2" in text
    table2 = text[text.index("SNUS Table 2") :].split("\n\n")[1]
    assert re.search(r"^\| scene_blind \(snus_sample\) \| 12 \|", table2, flags=re.M), table2


@pytest.mark.xdist_group("qwen")
def test_snus_sample_through_a_real_model_class(qwen_run, tiny_clip):
    # qwen2_5_vl --force_simple on the tiny checkpoint, 8 new tokens, the tiny CLIP (conftest.py)
    code, results, out, log = qwen_run
    assert code == 0, log[-3000:]
    rep = check(results)
    counts = rep["model"]["counts"]
    # random bytes: rows are scored or counted as carrying no absent information, never lost
    assert counts["n_scored"] == 12
    assert rep["model"]["provenance"]["clipscore"]["clip_model"] == str(tiny_clip)
    assert 0.0 <= results["results"]["snus_sample"]["clipscore,none"] <= 1.0
    assert rep["ac"]["summary"]["clipscore"] is not None


def test_build_snus_then_evaluate_the_local_task(run_lmms_eval, tmp_path):
    import json

    from PIL import Image

    from lmms_scene.cli import main

    release = tmp_path / "release"
    release.mkdir()
    records = []
    for i, caption in enumerate(
        ["There is no guardrail near the roof.", "The worker is not wearing gloves. The ladder is not secured."]
    ):
        Image.new("RGB", (32, 32), (10 * i, 100, 200)).save(release / f"img{i}.png")
        records.append({"image": f"img{i}.png", "caption": caption, "split": "test"})
    (release / "metadata.jsonl").write_text("\n".join(json.dumps(r) for r in records))
    out = tmp_path / "built"
    assert main(["build", "snus", "--from-folder", str(release), "--out", str(out), "--name", "mine"]) == 0
    task = out / "tasks" / "snus_mine.yaml"
    assert task.is_file() and "benchmark: snus" in task.read_text()
    code, results, _, log = run_lmms_eval(
        ["--model", "scene_blind", "--tasks", "snus_mine"], include=out / "tasks", env={"LMMS_SCENE_CLIP_MODEL": "none"}
    )
    assert code == 0, log[-3000:]
    assert results["results"]["snus_mine"]["snus_report,none"]["n"] == 2
