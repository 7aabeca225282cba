"""End-to-end: layered_vqa_sample through the harness, multi-round, every turn recorded.

Three paths: the text-prior baseline ``scene_blind`` (lmms-scene's own multi-round
model), the real simple ``qwen2_5_vl`` class (native multi-round, which returns a tuple
the harness stringifies) on the tiny checkpoint, and the same class wrapped by
``scene_replay`` (one plain generate_until request per turn: the path for models
without multi-round support)."""

from __future__ import annotations

import pytest
from conftest import find_samples

from lmms_scene.data.layered_vqa.builder import build_synthetic
from lmms_scene.data.layered_vqa.delivery import SCHEDULES
from lmms_scene.data.layered_vqa.rounds import turns_of
from lmms_scene.data.layered_vqa.schedules import task_name
from lmms_scene.data.layered_vqa.views import PLACEHOLDER_FILE, schedule_docs

pytestmark = pytest.mark.e2e

TASK = "layered_vqa_sample"
QWEN_ARGS = "device=cpu,device_map=cpu,min_pixels=3136,max_pixels=50176"


def _turn_counts():
    import datasets

    from lmms_scene.registration import tasks_path

    data = datasets.load_dataset(
        "parquet", data_files={"test": str(tasks_path() / "layered_vqa" / "sample" / "layered_vqa_sample.parquet")}
    )["test"]
    docs = schedule_docs(data, list(SCHEDULES))
    return [len(turns_of(docs[i])) for i in range(len(docs))], docs


def check_run(results, out, n_docs):
    res = results["results"][TASK]
    rep = res["layered_vqa_report,none"]
    assert rep["n_rows"] == n_docs and rep["grader"] == "rule" and rep["scorer"]["grader"] == "rule"
    assert set(rep["by_schedule"]) <= set(SCHEDULES)
    assert 0.0 <= res["accuracy,none"] <= 1.0
    rows = find_samples(out, TASK)
    assert len(rows) == n_docs
    counts, docs = _turn_counts()
    for sample in rows:
        row = sample["layered_vqa_report"]
        doc = docs[sample["doc_id"]]
        assert (row["question_id"], row["schedule"]) == (doc["question_id"], doc["schedule"])
        # every turn's output is in the samples file, not only the last
        assert len(row["outputs"]) == counts[sample["doc_id"]] == row["n_turns"], row
        assert row["failure"] is None
        assert row["output"] == row["outputs"][-1]
    return rep, rows


@pytest.mark.xdist_group("readme")
def test_sample_through_scene_blind(readme_run):
    code, results, out, log = readme_run  # README's scene_blind run (conftest.py)
    assert code == 0, log[-3000:]
    counts, _ = _turn_counts()
    rep, rows = check_run(results, out, len(counts))
    assert list(rep["by_schedule"]) == list(SCHEDULES)
    # the blind prior answers the same on every turn of every schedule: nothing retained or lost
    assert all(v["retained_accuracy"] == pytest.approx(1.0) for v in rep["retained"]["by_column"].values())
    assert set(rep["evidence"]) == {"all-lyr", "oracle"}
    assert rep["grounding"]["overall"]["attempted"] == 1.0
    # it answers at once, before the evidence is complete, in every multi-turn schedule
    assert rep["grounding"]["overall"]["ungrounded_share"] == 1.0
    assert set(rep["by_type_schedule"]) == {r["layered_vqa_report"]["question_type"] for r in rows}


def test_sample_through_qwen2_5_vl_multi_round(run_lmms_eval, tiny_qwen_vl):
    pytest.importorskip("decord", reason="lmms-eval's qwen2_5_vl module imports decord")
    n = len(SCHEDULES)  # item-major docs: the first item under every schedule
    code, results, out, log = run_lmms_eval(
        [
            "--model",
            "qwen2_5_vl",
            "--force_simple",
            "--model_args",
            f"pretrained={tiny_qwen_vl},{QWEN_ARGS}",
            "--gen_kwargs",
            "max_new_tokens=4",
            "--batch_size",
            "1",
            "--limit",
            str(n),
            "--tasks",
            TASK,
        ]
    )
    assert code == 0, log[-3000:]
    rep, _rows = check_run(results, out, n)
    assert list(rep["by_schedule"]) == list(SCHEDULES)


def test_sample_through_scene_replay(run_lmms_eval, tiny_qwen_vl):
    pytest.importorskip("decord", reason="lmms-eval's qwen2_5_vl module imports decord")
    n = len(SCHEDULES)
    code, results, out, log = run_lmms_eval(
        [
            "--model",
            "scene_replay",
            "--model_args",
            f"inner=qwen2_5_vl,pretrained={tiny_qwen_vl},{QWEN_ARGS}",
            "--gen_kwargs",
            "max_new_tokens=4",
            "--batch_size",
            "1",
            "--limit",
            str(n),
            "--tasks",
            TASK,
        ]
    )
    assert code == 0, log[-3000:]
    check_run(results, out, n)


def test_sample_through_a_chat_model_and_repeats(run_lmms_eval, tmp_path):
    """lmms-scene's chat ``echo`` model (doc_to_messages path, no --force_simple) with
    --repeats 2: each turn's user message carries that turn's images, every repeat is scored."""
    import json

    record = tmp_path / "echo.jsonl"
    n = len(SCHEDULES)
    code, results, _out, log = run_lmms_eval(
        ["--model", "echo", "--model_args", f"record={record}", "--limit", str(n), "--repeats", "2", "--tasks", TASK]
    )
    assert code == 0, log[-3000:]
    rep = results["results"][TASK]["layered_vqa_report,none"]
    assert rep["n_rows"] == 2 * n and set(rep["reliability"]) == set(SCHEDULES)
    lines = [json.loads(x) for x in record.read_text().splitlines()]
    assert len(lines) == 2 * n and {x["variant"] for x in lines} == {"chat"}
    _, docs = _turn_counts()
    for line in lines:
        turns = turns_of(docs[line["doc_id"]])
        assert [t["n_images"] for t in line["turns"]] == [len(t.views) for t in turns]


def test_llava_hf_has_no_multi_round_and_runs_through_scene_replay(run_lmms_eval, tiny_llava):
    """lmms-eval's simple ``llava_hf`` raises NotImplementedError for multi-round; wrapped
    by ``scene_replay`` it answers every turn of every schedule."""
    n = len(SCHEDULES)
    args = ["--gen_kwargs", "max_new_tokens=4", "--batch_size", "1", "--limit", str(n), "--tasks", TASK]
    llava = f"pretrained={tiny_llava},device=cpu,device_map=cpu"
    code, _results, _out, log = run_lmms_eval(["--model", "llava_hf", "--model_args", llava, *args])
    assert code != 0 and "multi-round generation for LLaVAHF" in log
    code, results, out, log = run_lmms_eval(
        ["--model", "scene_replay", "--model_args", f"inner=llava_hf,{llava}", *args]
    )
    assert code == 0, log[-3000:]
    rep, rows = check_run(results, out, n)
    # llava_hf 0.7.3 cannot answer a turn with no image so far (it logs an error and
    # returns ""): recorded as an empty reply, graded wrong and counted, never dropped
    empty = [r for r in rows if r["layered_vqa_report"]["empty"]]
    assert rep["overall"]["empty_output_rate"] == pytest.approx(len(empty) / n)


def test_headline_group_on_generated_data_and_show(run_lmms_eval, tmp_path):
    """`--tasks layered_vqa` (all 16 schedule tasks) on freshly generated scenes, with the
    shipped tasks pointed at them through their one data location (the `test:` line of
    `_default_template_yaml`, in a copy of the task folder); `lmms-scene show` pools the
    tasks into Table 1 with the retained columns."""
    import shutil

    from lmms_scene.metrics.layered_vqa import aggregation
    from lmms_scene.registration import tasks_path
    from lmms_scene.report.text import show_text

    folder = tmp_path / "tasks"
    shutil.copytree(tasks_path() / "layered_vqa", folder / "layered_vqa")
    report = build_synthetic(tmp_path / "built", scenes=3, seed=7, size=(64, 48))
    template = folder / "layered_vqa" / "_default_template_yaml"
    text = template.read_text()
    assert text.count(f"    test: {PLACEHOLDER_FILE.as_posix()}\n") == 1
    template.write_text(
        text.replace(f"    test: {PLACEHOLDER_FILE.as_posix()}\n", f"    test: {report.out.resolve()}\n")
    )
    code, results, out, log = run_lmms_eval(
        ["--model", "scene_blind", "--tasks", "layered_vqa"], include=folder, env={"LMMS_SCENE_NO_TASK_HOOK": "1"}
    )
    assert code == 0, log[-3000:]
    assert set(results["results"]) >= {task_name(s) for s in SCHEDULES}
    # the group's headline: Table 1's retained accuracy, combined from the schedules' parts
    # (no accuracy pooled over the 16 schedules: the paper has none)
    assert "accuracy,none" not in results["groups"]["layered_vqa"]
    parts = {s: results["results"][task_name(s)]["retained_text,none"] for s in SCHEDULES}
    assert all(p["schedule"] == s and p["n_graded"] > 0 for s, p in parts.items()), parts
    for column, scheds in aggregation.RETAINED_COLUMNS.items():
        group_value = results["groups"]["layered_vqa"][f"retained_{column},none"]
        if parts["full"]["n_correct"] == 0:
            assert group_value is None  # nothing right under full: undefined, never 0 or inf
            continue
        base = parts["full"]["n_correct"] / parts["full"]["n_graded"]
        accs = [parts[s]["n_correct"] / parts[s]["n_graded"] for s in scheds]
        assert group_value == pytest.approx(sum(accs) / len(accs) / base)
    for s in SCHEDULES:
        rep = results["results"][task_name(s)]["layered_vqa_report,none"]
        assert rep["n_rows"] == report.rows and list(rep["by_schedule"]) == [s]
    text, code = show_text([out])
    assert code == 0 and "## Layered-VQA Table 1: retained accuracy" in text and "| scene_blind |" in text
    # the per-schedule tasks pooled from their logged samples into the tables that compare schedules
    assert (
        f"## Layered-VQA Table 8: relational extra loss (scene_blind; pooled from the logged samples of its {len(SCHEDULES)}"
        in text
    )
    assert "## Layered-VQA Figure 9:" in text
