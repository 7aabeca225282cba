"""Scores of the COOCO sample tasks with the tiny CLIP, for the regression pin in
tests/test_cooco_numbers.py. Run once against the version whose numbers are the
reference (it was run at commit 996fb3a, before the shared-machinery refactor, and again
for issue 30, which moved no number and added the median RefCLIPScore and the reading):

    python tests/golden/make_cooco_golden.py tests/golden/cooco_sample_tiny_clip.json

The outputs scored are a fixed, deterministic mix (gold, the original target, the scene,
empty, a verbose sentence, a misspelling), so every metric and branch is exercised.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests"))


def outputs_for(doc: dict, index: int) -> str:
    gold = doc["gold_label"].replace("_", " ")
    choices = [
        gold,
        doc["target"].replace("_", " "),
        doc["scene"].replace("_", " "),
        "",
        f"It looks like a big {gold} on the table.",
        gold[:-1] + "x",
    ]
    return choices[index % len(choices)]


def compute(clip_dir: str) -> dict:
    os.environ["LMMS_SCENE_CLIP_MODEL"] = clip_dir
    import datasets

    from lmms_scene.tasks.cooco import utils

    raw = datasets.load_dataset("parquet", data_files={"test": str(REPO / "tasks/cooco/sample/cooco_sample.parquet")})[
        "test"
    ]
    out = {}
    for task, docs in (
        ("cooco_sample", utils.process_docs(raw)),
        ("cooco_noise_sample", utils.process_docs_noise(raw)),
    ):
        entries: dict[str, list] = {}
        for i, doc in enumerate(docs):
            for key, value in utils.process_results(doc, [outputs_for(doc, i)]).items():
                entries.setdefault(key, []).append(value)
        result = {key: utils.mean_score(vals) for key, vals in entries.items() if key != "cooco_breakdown"}
        result["cooco_breakdown"] = utils.breakdown(entries["cooco_breakdown"])
        out[task] = result
    return out


if __name__ == "__main__":
    from kit import build_tiny_clip

    with tempfile.TemporaryDirectory() as tmp:
        values = compute(str(build_tiny_clip(Path(tmp))))
    Path(sys.argv[1]).write_text(json.dumps(values, indent=1, sort_keys=True) + "\n")
    print(f"wrote {sys.argv[1]}")
