"""The command line: one package parses every argument; helpful exits for bad usage."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest
from conftest import REPO, harness_env

from lmms_scene import cli


def run_cli(*args: str, timeout: int = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lmms_scene.cli", *args],
        capture_output=True,
        text=True,
        env=harness_env(),
        timeout=timeout,
    )


def test_argument_parsing_lives_only_in_the_cli_package():
    users = sorted(
        str(p.relative_to(REPO))
        for p in (REPO / "lmms_scene").rglob("*.py")
        if re.search(r"^\s*(import argparse|from argparse )", p.read_text(encoding="utf-8"), re.M)
    )
    assert users and all(u.startswith("lmms_scene/cli/") for u in users), users


def test_eval_without_arguments_prints_usage_and_fails():
    proc = run_cli("eval")
    assert proc.returncode == 2
    assert "usage: lmms-scene eval --model MODEL --tasks TASKS" in proc.stdout + proc.stderr


def test_build_help_lists_every_buildable_benchmark():
    proc = run_cli("build", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "cooco" in proc.stdout
    sub = run_cli("build", "cooco", "--help")
    assert sub.returncode == 0 and "--from-folder" in sub.stdout and "--prefer-metadata" in sub.stdout


def test_unknown_arguments_and_library_errors_exit_2_with_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        cli.main(["tasks-path", "--bogus"])
    assert stop.value.code == 2
    capsys.readouterr()
    # a library error is one line naming the command, not a traceback
    assert cli.main(["build-samples", "no-such-benchmark"]) == 2
    err = capsys.readouterr().err
    assert (
        err.startswith("lmms-scene build-samples: error: unknown benchmark 'no-such-benchmark'")
        and "Traceback" not in err
    )


def test_show_says_what_it_could_not_read(tmp_path, capsys):
    (tmp_path / "x_results.json").write_text("{not json")
    assert cli.main(["show", str(tmp_path), str(tmp_path / "absent")]) == 2
    err = capsys.readouterr().err
    assert "no lmms-scene results" in err and "x_results.json: not JSON" in err and "no such file or folder" in err


def test_the_printed_results_table_has_numbers_only():
    from lmms_eval import utils as harness_utils

    from lmms_scene.harness import install_table_filter

    assert install_table_filter()
    result = {
        "results": {
            "cooco_sample": {
                "alias": "cooco_sample",
                "accuracy,none": 0.5,
                "accuracy_stderr,none": 0.1,
                "cooco_breakdown,none": {"overall": {"n": 29, "accuracy": 0.5}},
            }
        },
        "higher_is_better": {"cooco_sample": {"accuracy": True}},
        "n-shot": {"cooco_sample": 0},
    }
    table = harness_utils.make_table(result)
    assert "|accuracy|" in table and "0.5" in table
    assert "cooco_breakdown" not in table and "overall" not in table
    assert "cooco_breakdown,none" in result["results"]["cooco_sample"]  # the JSON keeps it


def test_an_offline_hub_failure_says_how_to_build_the_data_locally():
    import tenacity

    from lmms_scene.evaluate import data_hint, root_cause

    class ConnectionError(OSError):  # what datasets raises offline, by name
        pass

    inner = ConnectionError("Couldn't reach 'fmerlo/COOCO' on the Hub (LocalEntryNotFoundError)")
    attempt = tenacity.Future(1)
    attempt.set_exception(inner)
    wrapped = tenacity.RetryError(attempt)
    assert root_cause(wrapped) is inner
    hint = data_hint(["cooco", "cooco_noise"], inner)
    assert "lmms-scene build cooco --from-folder DIR --out D" in hint and hint.count("fmerlo/COOCO") == 1
    assert data_hint(["cooco_sample"], inner) is None  # the embedded sample needs no download
    assert data_hint(["cooco"], ValueError("bad box")) is None


def test_a_group_in_results_belongs_to_the_benchmark_its_tasks_declare(tmp_path):
    import json

    from lmms_scene.results import load

    results = {
        "results": {
            "layered_vqa_mine": {"accuracy,none": 0.5},
            "layered_vqa_full_mine": {"accuracy,none": 0.5},
            "other_group": {"x,none": 1.0},
        },
        "group_subtasks": {"layered_vqa_mine": ["layered_vqa_full_mine"], "other_group": ["pope_pop"]},
        "configs": {"layered_vqa_full_mine": {"metadata": {"benchmark": "layered_vqa"}}, "pope_pop": {"metadata": {}}},
        "config": {"model": "m", "model_args": ""},
    }
    (tmp_path / "x_results.json").write_text(json.dumps(results))
    by_task = {r.task: r.benchmark for r in load(tmp_path).results}
    assert by_task == {"layered_vqa_mine": "layered_vqa", "layered_vqa_full_mine": "layered_vqa", "other_group": None}


def test_progress_bars_show_on_long_steps_unless_switched_off(monkeypatch, capsys):
    from lmms_scene.progress import progress

    monkeypatch.delenv("LMMS_SCENE_NO_PROGRESS", raising=False)
    assert list(progress(range(5), "building rows", unit="row")) == list(range(5))
    assert "building rows" in capsys.readouterr().err
    monkeypatch.setenv("LMMS_SCENE_NO_PROGRESS", "1")
    assert list(progress(range(5), "quiet rows")) == list(range(5))
    assert "quiet rows" not in capsys.readouterr().err


def test_a_logged_answer_is_replayed_as_the_model_gave_it():
    from lmms_scene.models.from_samples import logged_answer

    assert logged_answer({"filtered_resps": "oven"}) == "oven"  # resps popped: filters changed nothing
    assert logged_answer({"resps": [" oven\n"], "filtered_resps": "oven"}) == " oven\n"  # before the filters
    assert logged_answer({"filtered_resps": "{'lmms_scene_repeats': [['A circle.', 'two']]}"}) == ["A circle.", "two"]
    assert logged_answer({"filtered_resps": ["r0", "r1"]}) == ["r0", "r1"]  # a multi-round conversation


def test_load_lists_every_empty_folder(tmp_path):
    import json

    from lmms_scene.results import load

    full, empty = tmp_path / "full", tmp_path / "empty"
    full.mkdir()
    empty.mkdir()
    (full / "x_results.json").write_text(json.dumps({"results": {}, "config": {}}))
    assert [p for p, _ in load([full, empty]).skipped] == [str(empty)]
