"""The pre-flight (lmms_scene/preflight.py): before any model loads, every requested task's
data and CLIP checkpoint are resolved and every problem is one line naming the task and
what to do, through ``lmms-scene eval`` and through the plain ``python -m lmms_eval``.

The hub is never reached here: the unit tests answer for it (a counting stand-in), and
the end-to-end runs are offline, as on the machine a user without network has."""

from __future__ import annotations

import sys

import pytest
from conftest import harness_env, run_python

from lmms_scene import preflight, settings
from lmms_scene.registration import tasks_path


class Asked:
    """A stand-in for the one question to the hub: answers ``answer`` and counts."""

    def __init__(self, answer: str):
        self.answer, self.calls = answer, []

    def __call__(self, repo, repo_type, revision):
        self.calls.append((repo, repo_type))
        return self.answer


@pytest.fixture(scope="module")
def ours():
    return preflight.index_folders([tasks_path()])


@pytest.fixture(autouse=True)
def empty_cache(tmp_path, monkeypatch):
    # nothing cached: the pre-flight's answers come from the stand-in hub alone
    monkeypatch.setattr(preflight, "cached", lambda repo, repo_type, revision=None: False)


def lines(problems):
    return {p.requested: p.message for p in problems}


def test_the_three_benchmarks_offline_each_get_their_own_fix(ours):
    hub = preflight.Hub(ask=Asked("unreachable"), offline=True)
    found = lines(preflight.check(["cooco", "snus", "layered_vqa"], ours, hub))
    assert set(found) == {"cooco", "snus", "layered_vqa"}
    assert (
        "`hf download --repo-type dataset fmerlo/COOCO`" in found["cooco"]
        and "lmms-scene build cooco --from-folder" in found["cooco"]
    )
    assert "offline mode is on" in found["cooco"]
    assert "no public release" in found["snus"] and "`lmms-scene build snus --from-folder DIR --out D`" in found["snus"]
    assert "placeholder" in found["layered_vqa"] and "layered_vqa_synth" in found["layered_vqa"]
    assert "lmms-scene build layered-synth" in found["layered_vqa"]


def test_a_group_of_sixteen_tasks_with_one_reason_is_one_line(ours):
    problems = preflight.check(["layered_vqa"], ours, preflight.Hub(ask=Asked("found"), offline=False))
    assert len(preflight.expand("layered_vqa", ours)) == 16
    assert len(problems) == 1 and problems[0].line().startswith("lmms-scene pre-flight: layered_vqa: ")


def test_the_hub_is_asked_once_and_not_again_once_it_is_out_of_reach(ours):
    asked = Asked("unreachable")
    hub = preflight.Hub(ask=asked, offline=False)
    found = lines(preflight.check(["cooco", "cooco_noise"], ours, hub))
    assert asked.calls == [("fmerlo/COOCO", "dataset")]
    assert "the hub cannot be reached" in found["cooco"] and found["cooco"] == found["cooco_noise"]


def test_cached_data_leaves_the_clip_checkpoint_which_says_how_to_skip_it(ours, monkeypatch):
    asked = Asked("found")
    with settings.override(clip_model=settings.DEFAULT_CLIP_MODEL):
        found = lines(preflight.check(["cooco", "snus"], ours, preflight.Hub(ask=asked, offline=False)))
    # the dataset and the checkpoint are on a reachable hub: nothing stops cooco (they download)
    assert (
        "cooco" not in found
        and ("fmerlo/COOCO", "dataset") in asked.calls
        and ("openai/clip-vit-base-patch32", "model") in asked.calls
    )
    # offline, with the dataset in the cache and the checkpoint not
    monkeypatch.setattr(preflight, "cached", lambda repo, repo_type, revision=None: repo_type == "dataset")
    with settings.override(clip_model=settings.DEFAULT_CLIP_MODEL):
        found = lines(preflight.check(["cooco"], ours, preflight.Hub(ask=Asked("found"), offline=True)))
    assert (
        "openai/clip-vit-base-patch32" in found["cooco"]
        and "`hf download openai/clip-vit-base-patch32`" in found["cooco"]
    )
    assert "LMMS_SCENE_CLIP_MODEL=none" in found["cooco"]


def test_clip_switched_off_or_a_local_folder_needs_nothing_and_a_bad_folder_is_named(ours, tmp_path, monkeypatch):
    monkeypatch.setattr(preflight, "cached", lambda repo, repo_type, revision=None: repo_type == "dataset")
    hub = preflight.Hub(ask=Asked("unreachable"), offline=True)
    with settings.override(clip_model="none"):
        assert preflight.check(["cooco"], ours, hub) == []
    (tmp_path / "clip").mkdir()
    with settings.override(clip_model=str(tmp_path / "clip")):
        found = lines(preflight.check(["cooco"], ours, hub))
    assert "is not a model folder (no config.json)" in found["cooco"]
    (tmp_path / "clip" / "config.json").write_text("{}")
    with settings.override(clip_model=str(tmp_path / "clip")):
        assert preflight.check(["cooco"], ours, hub) == []


def test_sample_tasks_and_other_harness_tasks_pass_offline(ours):
    hub = preflight.Hub(ask=Asked("unreachable"), offline=True)
    with settings.override(clip_model=settings.DEFAULT_CLIP_MODEL):
        assert (
            preflight.check(
                ["cooco_sample", "cooco_noise_sample", "snus_sample", "layered_vqa_sample", "mme"], ours, hub
            )
            == []
        )


def test_a_local_build_whose_file_is_gone_names_the_file(tmp_path):
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "mine.yaml").write_text(
        "task: cooco_mine\ndataset_path: parquet\ndataset_kwargs:\n  data_files:\n    test: ../data/test.parquet\n"
        "metadata:\n  benchmark: cooco\n"
    )
    entries = preflight.index_folders([tasks_path(), folder])
    with settings.override(clip_model="none"):
        found = lines(preflight.check(["cooco_mine"], entries, preflight.Hub(ask=Asked("found"), offline=True)))
    assert str(folder / "../data/test.parquet") in found["cooco_mine"] and "does not exist" in found["cooco_mine"]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "test.parquet").write_bytes(b"PAR1")
    with settings.override(clip_model="none"):
        assert preflight.check(["cooco_mine"], entries, preflight.Hub(ask=Asked("found"), offline=True)) == []


def test_the_harness_index_is_read_only_for_the_requested_names_and_their_members(ours, tmp_path):
    """lmms-eval indexes ~1,900 task YAMLs; the plain route's check reads only the ones the
    requested names reach (a group's members too) and finds what reading every YAML finds."""
    index = {name: {"type": e.kind, "yaml_path": e.config["__yaml_path__"]} for name, e in ours.items()}
    # unrelated tasks the check must not open: each YAML is unreadable, as a broken one would be
    for i in range(200):
        bad = tmp_path / f"other_{i}.yaml"
        bad.write_text("task: [unclosed\n")
        index[f"other_{i}"] = {"type": "task", "yaml_path": str(bad)}
    index["no_yaml"] = {"type": "task"}  # an index entry without a path: never an entry
    lazy = preflight.index_from_harness(index)
    hub = preflight.Hub(ask=Asked("unreachable"), offline=True)
    with settings.override(clip_model=settings.DEFAULT_CLIP_MODEL):
        found = lines(preflight.check(["layered_vqa", "snus_sample", "no_such_task"], lazy, hub))
        eager = lines(preflight.check(["layered_vqa", "snus_sample", "no_such_task"], ours, hub))
    assert found == eager and "layered_vqa" in found
    group = ours["layered_vqa"]
    assert group.kind == "group" and lazy.read == 1 + len(group.members) + 2, lazy.read
    # as a mapping it still holds exactly the readable entries
    assert "other_3" not in lazy and "no_yaml" not in lazy and lazy["snus_sample"].kind == "task"
    assert set(lazy) == set(ours) and len(lazy) == len(ours)
    with pytest.raises(KeyError):
        lazy["other_0"]


def test_check_argv_reads_tasks_and_include_path_as_lmms_scene_eval_gets_them(tmp_path):
    hub = preflight.Hub(ask=Asked("unreachable"), offline=True)
    assert preflight.check_argv(["--model", "scene_blind", "--tasks", "list"], hub) == []
    found = lines(
        preflight.check_argv(
            ["--model", "scene_blind", "--tasks=snus,layered_vqa_full", "--include_path", str(tmp_path)], hub
        )
    )
    assert set(found) == {"snus", "layered_vqa_full"}


def test_evaluation_args_are_found_only_inside_the_harness_evaluation():
    from lmms_scene import compat

    assert compat.evaluation_args() is None

    def cli_evaluate_single(args):  # same name, but not lmms-eval's module: not the harness
        return compat.evaluation_args()

    assert cli_evaluate_single(type("A", (), {"tasks": "cooco"})()) is None


@pytest.mark.e2e
@pytest.mark.parametrize("route", ["plain", "eval"])
def test_the_missions_command_offline_names_all_three_tasks_and_loads_no_model(route, tmp_path):
    env = harness_env({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"})
    env.pop(settings.CLIP_MODEL_ENV, None)
    record = tmp_path / "echo.jsonl"
    args = [
        "--model",
        "echo",
        "--model_args",
        f"record={record}",
        "--tasks",
        "cooco,snus,layered_vqa",
        "--output_path",
        str(tmp_path / "out"),
    ]
    cmd = (
        [sys.executable, "-m", "lmms_eval", *args]
        if route == "plain"
        else [sys.executable, "-m", "lmms_scene.cli", "eval", *args]
    )
    proc = run_python(cmd, env=env, cwd=tmp_path, timeout=300)
    assert proc.returncode == 1, (proc.returncode, proc.stderr[-3000:])
    ours = [line for line in proc.stderr.splitlines() if line.startswith("lmms-scene pre-flight: ")]
    assert [line.split(":")[1].strip() for line in ours[:-1]] == ["cooco", "snus", "layered_vqa"], ours
    assert "lmms-scene build snus" in ours[1] and "fmerlo/COOCO" in ours[0] and "layered_vqa_synth" in ours[2]
    # our verdict is the last thing printed, and the model never ran (the echo model records every request)
    assert proc.stderr.rstrip().splitlines()[-1] == ours[-1] and "the model was not loaded" in ours[-1]
    assert not record.exists() and not (tmp_path / "out").exists()
    assert "Traceback" not in proc.stderr and "ConnectionError" not in proc.stderr
