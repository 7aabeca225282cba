"""The generated task YAMLs are current, and the one schedule table is the only list.

Layered-VQA's 16 schedule tasks and its group are written from
``lmms_scene.data.layered_vqa.schedules.TABLE`` by ``tasks/layered_vqa/_generate_config.py``;
these tests regenerate them into a temporary folder and compare bytes with the committed
files, so a hand edit or a table change without a rerun fails here, naming the file and
the command that regenerates it."""

from __future__ import annotations

import inspect

import pytest
from conftest import REPO

from lmms_scene import benchmarks
from lmms_scene.data.layered_vqa import schedules as S
from lmms_scene.data.layered_vqa.builder import local_names
from lmms_scene.data.layered_vqa.delivery import SCHEDULES
from lmms_scene.tasks.layered_vqa import _generate_config as G
from lmms_scene.tasks.layered_vqa import utils

COMMITTED = REPO / "tasks" / "layered_vqa"


def test_committed_layered_vqa_yamls_are_what_the_generator_writes(tmp_path):
    written = G.write(tmp_path)
    assert {p.name for p in written} == {f"{t}.yaml" for t in (S.GROUP, *S.TASKS)}
    for fresh in written:
        committed = COMMITTED / fresh.name
        assert committed.is_file(), f"tasks/layered_vqa/{fresh.name} is missing; regenerate with: {G.COMMAND}"
        assert committed.read_bytes() == fresh.read_bytes(), (
            f"tasks/layered_vqa/{fresh.name} is stale (not what the generator writes); regenerate with: {G.COMMAND}"
        )
    leftovers = [p.name for p in G.generated_here(COMMITTED) if p.name not in {w.name for w in written}]
    assert leftovers == [], f"generated files no schedule writes any more: {leftovers}; regenerate with: {G.COMMAND}"
    assert G.stale(COMMITTED) == []


def test_every_generated_file_says_it_is_generated_and_by_which_command():
    for name, text in G.render().items():
        assert text.startswith(G.HEADER) and G.COMMAND in text.splitlines()[0], name
    # the hand-written files are not marked (a rerun never touches them)
    hand_written = {"layered_vqa_sample.yaml"}
    assert hand_written.isdisjoint(p.name for p in G.generated_here(COMMITTED))
    assert (COMMITTED / "layered_vqa_sample.yaml").is_file() and (COMMITTED / "_default_template_yaml").is_file()


def test_check_names_every_stale_file_and_write_repairs_only_generated_files(tmp_path, capsys):
    G.write(tmp_path)
    assert G.main(["--out", str(tmp_path), "--check"]) == 0
    edited = tmp_path / "layered_vqa_oracle.yaml"
    edited.write_text(edited.read_text().replace("process_docs_oracle", "process_docs_full"))
    (tmp_path / "layered_vqa_full.yaml").unlink()
    gone = tmp_path / "layered_vqa_retired.yaml"  # a schedule that left the table
    gone.write_text(G.HEADER + "task: layered_vqa_retired\n")
    mine = tmp_path / "my_task.yaml"  # not generated: left alone
    mine.write_text("task: my_task\n")
    assert G.main(["--out", str(tmp_path), "--check"]) == 1
    err = capsys.readouterr().err
    assert "layered_vqa_oracle.yaml: differs" in err and "layered_vqa_full.yaml: missing" in err
    assert "layered_vqa_retired.yaml: no longer generated" in err and G.COMMAND in err and "my_task" not in err
    assert G.main(["--out", str(tmp_path)]) == 0
    assert G.stale(tmp_path) == [] and not gone.exists() and mine.read_text() == "task: my_task\n"


def test_the_table_is_the_one_list_of_schedules():
    assert list(SCHEDULES) == list(S.NAMES)
    assert [(s.name, s.family, s.shape) for s in SCHEDULES.values()] == list(S.TABLE)
    assert benchmarks.get("layered_vqa").tasks == S.TASKS == tuple(s.task for s in SCHEDULES.values())
    group = G.render()["layered_vqa.yaml"]
    assert group.index("  - layered_vqa_full\n") < group.index("  - layered_vqa_oracle\n")
    assert [line[4:] for line in group.splitlines() if line.startswith("  - layered_vqa_")] == list(S.TASKS)
    # a local build writes the same task list, suffixed
    tasks, grp = local_names("x")
    assert tasks == [f"{t}_x" for t in S.TASKS] and grp == "layered_vqa_x"


@pytest.mark.parametrize("schedule", ["full", "ev-first", "all-lyr"])
def test_each_tasks_process_docs_is_bound_to_its_schedule(schedule, monkeypatch):
    ref = G.process_docs_ref(schedule)
    module, _, name = ref.rpartition(".")
    assert module == utils.__name__
    fn = getattr(utils, name)
    assert fn is getattr(utils, name) and fn.__name__ == name
    seen = []
    monkeypatch.setattr(utils, "_docs", lambda dataset, schedules: seen.append((dataset, schedules)) or "docs")
    assert fn("DATASET") == "docs" and seen == [("DATASET", [schedule])]


def test_utils_generates_no_function_per_schedule():
    source = inspect.getsource(utils)
    assert "globals()" not in source
    assert not [n for n in vars(utils) if n.startswith("process_docs_") and n != "process_docs_sample"]
    with pytest.raises(AttributeError, match="process_docs_no_such_schedule.*schedules: full, concat-q"):
        _ = utils.process_docs_no_such_schedule


def test_the_harness_resolves_a_generated_task_to_its_schedule(monkeypatch):
    # lmms-eval's own loader (include merged, `!function` imported), as when it builds the task
    from lmms_eval.utils import load_yaml_config

    config = load_yaml_config(str(COMMITTED / "layered_vqa_ev_last.yaml"), mode="full")
    assert config["task"] == "layered_vqa_ev_last" and config["output_type"] == "generate_until_multi_round"
    seen = []
    monkeypatch.setattr(utils, "_docs", lambda dataset, schedules: seen.append(schedules) or dataset)
    config["process_docs"]([])
    assert seen == [["ev-last"]]
