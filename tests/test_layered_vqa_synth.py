"""``layered_vqa_synth``: the shipped generated split that runs anywhere, labelled as
generated scenes everywhere, never ranked as Layered-VQA (issue 33, item 3)."""

from __future__ import annotations

import sys

import pytest
from conftest import harness_env, run_python

from lmms_scene.data.layered_vqa import sample
from lmms_scene.registration import read_task_yaml, tasks_path

FOLDER = tasks_path() / "layered_vqa"


def _table(path):
    import pyarrow.parquet as pq

    return pq.read_table(path)


@pytest.mark.slow
def test_the_shipped_split_is_what_its_version_seed_and_size_generate(tmp_path):
    # a change to the generator that changes this split must bump SYNTH_VERSION and rebuild it
    shipped = _table(FOLDER / sample.SYNTH_FILE)
    rebuilt = _table(sample.build_synth(tmp_path))
    assert shipped.num_rows == rebuilt.num_rows and shipped.column_names == rebuilt.column_names
    for name in shipped.column_names:
        assert shipped.column(name).to_pylist() == rebuilt.column(name).to_pylist(), name


def test_the_split_is_disjoint_from_the_embedded_sample_and_a_few_hundred_questions():
    synth = _table(FOLDER / sample.SYNTH_FILE).select(["scene_id", "question", "answer", "composite"]).to_pylist()
    embedded = _table(FOLDER / "sample" / "layered_vqa_sample.parquet").select(["scene_id", "composite"]).to_pylist()
    assert {r["scene_id"] for r in synth}.isdisjoint({r["scene_id"] for r in embedded})
    assert {r["composite"]["bytes"] for r in synth}.isdisjoint({r["composite"]["bytes"] for r in embedded})
    assert len({r["scene_id"] for r in synth}) == sample.SYNTH_SCENES and 200 <= len(synth) <= 400


def test_the_task_says_it_reads_generated_scenes_and_a_submission_of_it_is_refused():
    from lmms_scene.report.submission import sample_reason
    from lmms_scene.results import TaskResult

    config = read_task_yaml(FOLDER / "layered_vqa_synth.yaml")
    assert config["task"] == "layered_vqa_synth" and config["metadata"]["benchmark"] == "layered_vqa"
    assert config["metadata"]["generated"] == sample.synth_description()
    assert config["dataset_kwargs"]["data_files"]["test"] == sample.SYNTH_FILE.as_posix()
    result = TaskResult(
        task="layered_vqa_synth",
        benchmark="layered_vqa",
        metrics={},
        config=config,
        model="m",
        model_args="",
        source=FOLDER / "x_results.json",
    )
    assert "generated scenes" in sample_reason(result) and "not the benchmark" in sample_reason(result)


def test_a_local_build_may_not_take_the_shipped_names(tmp_path, capsys):
    from lmms_scene.cli import main

    # the shipped task is one of lmms-scene's own names: a build named "synth" would shadow it
    assert (
        main(
            [
                "build",
                "layered-synth",
                "--scenes",
                "1",
                "--size",
                "64x48",
                "--out",
                str(tmp_path / "o"),
                "--name",
                "synth",
            ]
        )
        == 2
    )
    err = capsys.readouterr().err
    assert (
        "'layered_vqa_synth' would be the name of a task or group this build writes" in err
        and "lmms-scene's own" in err
    )
    assert not (tmp_path / "o").exists()


@pytest.mark.e2e
def test_the_blind_baseline_runs_the_generated_split_offline_and_show_labels_it(tmp_path):
    env = harness_env({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    cmd = [
        sys.executable,
        "-m",
        "lmms_eval",
        "--model",
        "scene_blind",
        "--tasks",
        "layered_vqa_synth",
        "--limit",
        "32",
        "--output_path",
        str(tmp_path / "out"),
        "--log_samples",
        "--verbosity",
        "DEBUG",
    ]
    proc = run_python(cmd, env=env, cwd=tmp_path, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    show = run_python(
        [sys.executable, "-m", "lmms_scene.cli", "show", str(tmp_path / "out"), "--width", "0"], env=env, cwd=tmp_path
    )
    assert show.returncode == 0, show.stderr[-2000:]
    assert "Layered-VQA Table 1" in show.stdout
    assert "(layered_vqa_synth): generated scenes (lmms-scene's procedural generator v1" in show.stdout
