"""Scores of the SNUS and Layered-VQA sample tasks on a fixed, deterministic mix of
outputs, for the regression pins in tests/test_sample_numbers.py (COOCO has its own:
make_cooco_golden.py). Made at commit f3b7498, before the fidelity issues (14, 15) and the
layout move (19):

    python tests/golden/make_sample_golden.py snus tests/golden/snus_sample.json
    python tests/golden/make_sample_golden.py layered_vqa tests/golden/layered_vqa_sample.json

A change that is meant to move these numbers (a metric fixed to the paper) regenerates the
file in the same commit and says why; a change that moves code must not move them.

SNUS runs with the CLIP metrics off (CLIPScore is COOCO's pin's business); the outputs
are the reference, its affirmative form, a wrong object, empty, a hedged negation and a
verbose list, so every CESG branch and baseline is exercised. Layered-VQA replies to every
turn; the final reply cycles through the gold answer, a wrong one, empty, a verbose one
and, for selection schedules, a ``Layers:`` line.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

#: keys that name a machine, a version or a path rather than a number
SKIP = {"scorer", "provenance", "clip_model", "clip_models", "synonyms", "spacy_model_version"}


def snus_outputs(doc: dict, index: int) -> str:
    from lmms_scene.metrics.cesg.negation import strip_negation

    missing = list(doc["missing_objects"]) or ["helmet"]
    first = missing[0]
    choices = [
        doc["caption"],
        strip_negation(doc["caption"]),
        "There is no ladder.",
        "",
        f"There does not appear to be a {first} in this image.",
        "Missing safety items:\n" + "\n".join(f"- {m}: absent" for m in missing),
    ]
    return choices[index % len(choices)]


def compute_snus() -> dict:
    os.environ["LMMS_SCENE_CLIP_MODEL"] = "none"
    import datasets

    from lmms_scene.tasks.snus import utils

    raw = datasets.load_dataset("parquet", data_files={"test": str(REPO / "tasks/snus/sample/snus_sample.parquet")})[
        "test"
    ]
    docs = utils.process_docs(raw)
    items = [utils.process_results(doc, [snus_outputs(doc, i)])["CESG"] for i, doc in enumerate(docs)]
    out = {key: getattr(utils, key)(items) for key in utils.METRICS if key != "snus_report"}
    out["snus_report"] = utils.snus_report(items)
    out["rows"] = utils.report.report_of(items)["model"]["rows"]  # per-row scores too
    return out


def layered_replies(doc: dict, turns: list, index: int) -> list[str]:
    from lmms_scene.data.layered_vqa.delivery import SELECTION

    gold = doc["answer"]
    layers = ", ".join(str(k) for k in (doc.get("minimal_sufficient_layers") or [1]))
    finals = [
        gold,
        "A hexagon.",
        "",
        f"Looking at the image, I believe the answer is {gold.lower()}",
        f"Answer: {gold}\nLayers: {layers}",
    ]
    final = finals[index % len(finals)]
    if doc["schedule"] in SELECTION and index % 2:
        final = f"{final}\nLayers: {layers}"
    return ["Got it." for _ in turns[:-1]] + [final]


def compute_layered_vqa() -> dict:
    import datasets

    from lmms_scene.data.layered_vqa.rounds import turns_of
    from lmms_scene.tasks.layered_vqa import utils

    raw = datasets.load_dataset(
        "parquet", data_files={"test": str(REPO / "tasks/layered_vqa/sample/layered_vqa_sample.parquet")}
    )["test"]
    docs = utils.process_docs_sample(raw)
    items = [
        utils.process_results(doc, [layered_replies(doc, turns_of(doc), i)])["accuracy"] for i, doc in enumerate(docs)
    ]
    return {key: getattr(utils, key)(items) for key in utils.METRIC_KEYS}


COMPUTE = {"snus": compute_snus, "layered_vqa": compute_layered_vqa}


def strip(value):
    """The pinned part of a value: numbers and structure, minus what names a machine."""
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k not in SKIP}
    if isinstance(value, (list, tuple)):
        return [strip(v) for v in value]
    return value


if __name__ == "__main__":
    values = strip(COMPUTE[sys.argv[1]]())
    Path(sys.argv[2]).write_text(json.dumps(values, indent=1, sort_keys=True, allow_nan=False) + "\n")
    print(f"wrote {sys.argv[2]}")
