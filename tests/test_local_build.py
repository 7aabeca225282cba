"""The shared local build (lmms_scene.data.local) as Layered-VQA and COOCO use it: the
layout, the task and group YAMLs derived from ours, name clashes, the card pointing at
the data, the shipped Layered-VQA tasks stopping with a message while their data
location is a placeholder, and the whole trip from a build to `lmms-scene show`."""

from __future__ import annotations

import sys

import build_kit
import pytest
from conftest import find_results, harness_env, run_python

from lmms_scene.data import local
from lmms_scene.data.layered_vqa.builder import build_synthetic, local_names
from lmms_scene.data.layered_vqa.delivery import SCHEDULES
from lmms_scene.data.layered_vqa.schedules import task_name
from lmms_scene.data.layered_vqa.schema import features
from lmms_scene.data.layered_vqa.views import (
    PLACEHOLDER_FILE,
    schedule_docs,
    write_placeholder,
)


def _synth(tmp_path, name="mine", scenes=1):
    return build_synthetic(tmp_path / "built", scenes=scenes, seed=3, size=(64, 48), name=name)


def test_slug_and_check_free_name_the_clash():
    assert local.slug("My COOCO (v2)") == "my_cooco_v2"
    with pytest.raises(ValueError, match=r"--name: '\?\?' has no letters or digits"):
        local.slug("??")
    with pytest.raises(
        ValueError,
        match=r"--name 'x': 'cooco_sample' would be the name .* lmms-scene's own tasks \(.*cooco_sample.yaml\)",
    ):
        local.check_free(["cooco_x", "cooco_sample"], "x")
    with pytest.raises(
        ValueError,
        match=r"'layered_vqa' .* lmms-scene's own groups \(.*layered_vqa.yaml\)",
    ):
        local.check_free(["layered_vqa"], "x")
    local.check_free(["layered_vqa_full_x", "layered_vqa_x"], "x")  # free names pass


def test_layered_build_writes_the_layout_and_tasks_derived_from_ours(tmp_path):
    import datasets

    from lmms_scene.registration import our_task_configs, read_task_yaml

    report = _synth(tmp_path)
    out = tmp_path / "built"
    assert report.out == out / local.DATA_FILE and report.card == out / "README.md"
    tasks, group = local_names("mine")
    assert report.tasks == tasks and report.groups == [group] == ["layered_vqa_mine"]
    assert sorted(p.name for p in (out / "tasks").iterdir()) == sorted(f"{t}.yaml" for t in [*tasks, group])
    # the hub layout: datasets reads the folder (the card's configs point at data/)
    data = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "cache"))["test"]
    assert data.features == features() and len(data) == report.rows
    ours = our_task_configs()
    for schedule, task in zip(SCHEDULES, tasks):
        written = read_task_yaml(out / "tasks" / f"{task}.yaml")
        mine = {k: v for k, v in ours[task_name(schedule)].items() if not k.startswith("__")}
        # ours, with the data, the name and the metadata swapped, nothing else
        for key in set(mine) | set(written):
            if key in ("task", "dataset_path", "dataset_kwargs", "metadata"):
                continue
            assert written.get(key) == mine.get(key), (task, key)
        assert written["dataset_kwargs"] == {"data_files": {"test": "../data/test-00000-of-00001.parquet"}}
        assert written["metadata"]["benchmark"] == "layered_vqa" and written["metadata"]["built_from"] == str(
            out.resolve()
        )
    header = f"# Written by `lmms-scene build layered-synth`: evaluates {(out / local.DATA_FILE).resolve()}.\n"
    assert all((out / "tasks" / f"{t}.yaml").read_text().startswith(header) for t in [*tasks, group])
    group_yaml = read_task_yaml(out / "tasks" / f"{group}.yaml")
    shipped = local.our_group_configs()["layered_vqa"]
    assert group_yaml["task"] == tasks
    assert group_yaml["aggregate_metric_list"] == shipped["aggregate_metric_list"]
    assert group_yaml["metadata"]["benchmark"] == "layered_vqa"


def test_name_clashes_are_errors_naming_them_and_write_nothing(tmp_path, capsys):
    from lmms_scene.cli import main

    # the group would be layered_vqa_sample, the embedded-sample task
    out = tmp_path / "clash"
    code = main(
        [
            "build",
            "layered-synth",
            "--scenes",
            "1",
            "--size",
            "64x48",
            "--out",
            str(out),
            "--name",
            "sample",
        ]
    )
    assert code == 2
    err = capsys.readouterr().err
    assert "--name 'sample': 'layered_vqa_sample' would be the name" in err and "lmms-scene's own tasks" in err
    assert not out.exists()
    # COOCO through the same check
    with pytest.raises(ValueError, match=r"--name 'sample': 'cooco_sample' .* lmms-scene's own tasks"):
        from lmms_scene.data import cooco

        cooco.local_task_configs(tmp_path, "sample")
    # an --out that is a file
    (tmp_path / "afile").write_text("x")
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
                str(tmp_path / "afile"),
            ]
        )
        == 2
    )
    assert "is a file; give a folder" in capsys.readouterr().err


def test_a_folder_rebuilt_in_place_loads_the_new_rows(tmp_path):
    """The card is written without `configs`: with them, datasets 5.2 caches a folder by
    its card alone and would hand back the old rows after a rebuild."""
    import datasets

    cache = str(tmp_path / "cache")
    first = _synth(tmp_path, scenes=1)
    assert len(datasets.load_dataset(str(tmp_path / "built"), cache_dir=cache)["test"]) == first.rows
    again = _synth(tmp_path, scenes=3)
    assert again.rows != first.rows
    assert len(datasets.load_dataset(str(tmp_path / "built"), cache_dir=cache)["test"]) == again.rows
    # rebuilt under another name: the earlier build's task files are gone, a user's file stays
    (tmp_path / "built" / "tasks" / "mine_by_hand.yaml").write_text("task: by_hand\n")
    renamed = _synth(tmp_path, name="other")
    kept = sorted(p.name for p in (tmp_path / "built" / "tasks").iterdir())
    assert kept == sorted(
        [
            *(f"{t}.yaml" for t in renamed.tasks),
            "layered_vqa_other.yaml",
            "mine_by_hand.yaml",
        ]
    )
    card = (tmp_path / "built" / "README.md").read_text()
    assert (
        card.startswith("---\nlicense: cc0-1.0\n")  # generated data: CC0, as its body says
        and "configs" not in card
        and "# Layered-VQA" in card
    )


def test_local_card_drops_only_configs():
    card = '---\nlicense: other\nconfigs:\n- config_name: default\n  data_files:\n  - split: test\n    path: "*.parquet"\n---\n# T\n'
    assert local.local_card(card) == "---\nlicense: other\n---\n# T\n"
    assert local.local_card("# no front matter\n") == "# no front matter\n"
    assert local.local_card("---\nlicense: x\n---\n# T\n") == "---\nlicense: x\n---\n# T\n"


def test_shipped_schedule_tasks_read_the_placeholder_which_stops_with_how_to_build(
    tmp_path,
):
    import datasets

    from lmms_scene.registration import our_task_configs, tasks_path

    ours = our_task_configs()
    placeholder = tasks_path() / "layered_vqa" / PLACEHOLDER_FILE
    for schedule in SCHEDULES:
        config = ours[task_name(schedule)]
        assert config["dataset_path"] == "parquet"
        assert config["dataset_kwargs"]["data_files"]["test"] == PLACEHOLDER_FILE.as_posix()
    # the sample keeps its own data whatever the template's location says
    assert ours["layered_vqa_sample"]["dataset_path"] == "parquet"
    assert ours["layered_vqa_sample"]["dataset_kwargs"]["data_files"]["test"] == "sample/layered_vqa_sample.parquet"
    data = datasets.load_dataset("parquet", data_files={"test": str(placeholder)}, cache_dir=str(tmp_path / "c"))[
        "test"
    ]
    with pytest.raises(FileNotFoundError) as err:
        schedule_docs(data, ["full"])
    message = str(err.value)
    assert "lmms-scene build layered-synth" in message and "--out DIR" in message
    assert "lmms-scene build layered-vqa --release" in message and "lmms-scene eval --include_path DIR/tasks" in message
    assert "_default_template_yaml" in message
    # the shipped placeholder is what write_placeholder writes
    fresh = write_placeholder(tmp_path)
    assert (
        datasets.load_dataset("parquet", data_files={"test": str(fresh)}, cache_dir=str(tmp_path / "c"))[
            "test"
        ].column_names
        == data.column_names
    )


@pytest.mark.e2e
def test_shipped_tasks_without_data_stop_before_generating(run_lmms_eval, tmp_path):
    record = tmp_path / "echo.jsonl"
    code, _results, _out, log = run_lmms_eval(
        [
            "--model",
            "echo",
            "--model_args",
            f"record={record}",
            "--tasks",
            "layered_vqa_full",
        ]
    )
    assert code != 0
    # the pre-flight names the placeholder and the ways to get data, before the model loads
    assert (
        "lmms-scene pre-flight: layered_vqa_full: Layered-VQA has no public release yet, and the shipped tasks read a placeholder"
        in log
        and "lmms-scene build layered-synth" in log
        and "--tasks layered_vqa_synth" in log
    )
    assert not record.exists(), "the model was asked although the task has no data"


@pytest.mark.e2e
def test_layered_local_build_round_trip(tmp_path):
    """build layered-synth into a tmp --out, run the printed scene_blind command, show."""
    env = harness_env()
    built = tmp_path / "built"
    proc = run_python(
        [
            sys.executable,
            "-m",
            "lmms_scene.cli",
            "build",
            "layered-synth",
            "--scenes",
            "1",
            "--seed",
            "3",
            "--size",
            "64x48",
            "--out",
            str(built),
            "--name",
            "trip",
        ],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    model_cmd = next(
        lines[i + 1].strip() for i, line in enumerate(lines) if line.startswith("evaluate it with a multi-round")
    )
    assert "--model qwen2_5_vl" in model_cmd and "--batch_size 1" in model_cmd and "--force_simple" in model_cmd
    argv, run, results_dir = build_kit.run_printed_baseline(proc.stdout, tmp_path, env, ["--limit", "2"])
    assert argv[:2] == ["lmms-scene", "eval"] and argv[argv.index("--tasks") + 1] == "layered_vqa_trip"
    assert argv[argv.index("--include_path") + 1] == str((built / "tasks").resolve())
    assert run.returncode == 0, (run.stdout + run.stderr)[-3000:]
    results = find_results(results_dir)
    tasks, group = local_names("trip")
    assert set(tasks) <= set(results["results"]) and group in results["groups"]
    for schedule, task in zip(SCHEDULES, tasks):
        assert results["configs"][task]["metadata"]["benchmark"] == "layered_vqa"
        rep = results["results"][task]["layered_vqa_report,none"]
        assert rep["n_rows"] == 2 and list(rep["by_schedule"]) == [schedule]
    show = build_kit.show(results_dir, tmp_path, env)
    assert show.returncode == 0, show.stderr[-2000:]
    out = show.stdout
    assert out.startswith("# Layered-VQA") and "| scene_blind |" in out, out[:2000]
    assert "Layered-VQA Table 1" in out and "Layered-VQA Table 8" in out
    # every schedule pooled into Table 1 (a column each), the tasks recognised by what they declare
    table1 = out[out.index("Layered-VQA Table 1") :]
    header = " ".join(line for line in table1.split("## Layered-VQA:")[0].splitlines() if line.startswith("| model |"))
    assert all(f"| {s} |" in header for s in ("full", "oracle", "ev-last")), table1[:3000]
    unknown = [line for line in out.splitlines() if line.startswith("not lmms-scene tasks")]
    assert not any(task in line for line in unknown for task in tasks), unknown


def test_a_plugin_benchmark_builds_its_task_from_its_own_yaml_through_the_shared_shape(tmp_path):
    """local.task_config is the one shape of a built task: SNUS's (our YAML) and the toy's
    (a plugin's own YAML) get the same swaps: name suffix, parquet data file, metadata."""
    from datasets import Dataset
    from toybench import data as toy

    from lmms_scene.registration import read_task_yaml

    written = toy.write_local(
        Dataset.from_list(toy.sample_rows(), features=toy.features()), tmp_path / "out", "card", name="My Run"
    )
    config = read_task_yaml(tmp_path / "out" / "tasks" / "toybench_my_run.yaml")
    assert config["task"] == "toybench_my_run" and "toybench_my_run" in str(written)
    assert config["dataset_kwargs"] == {"data_files": {"test": "../data/test-00000-of-00001.parquet"}}
    assert config["metadata"]["benchmark"] == "toybench" and config["metadata"]["built_from"] == str(tmp_path / "out")
    assert config["process_results"] == read_task_yaml(toy.TASKS / "toybench.yaml")["process_results"]
    snus = local.task_config({"task": "snus", "metadata": {"version": 2}}, tmp_path, "x", "snus")
    assert snus["task"] == "snus_x" and snus["metadata"] == {
        "version": 2,
        "benchmark": "snus",
        "built_from": str(tmp_path),
    }
