"""The tests' fork server (tests/forkserver.py) runs ``python -m`` commands as a fresh
process would: the same exit code, output files and numbers; the runs it cannot
reproduce go to a fresh process; and index_memo.memoize_task_index (tests/index_memo.py) gives the index the
harness computes, recomputed when a YAML file changes."""

from __future__ import annotations

import json
import subprocess
import sys

import index_memo
import pytest
from conftest import _FORK_SERVER, FORK_ENV, find_results, find_samples, harness_env, run_python

pytestmark = pytest.mark.e2e

BLIND = [
    "--model",
    "scene_blind",
    "--tasks",
    "layered_vqa_sample",
    "--limit",
    "6",
    "--log_samples",
    "--verbosity",
    "DEBUG",
]


def _harness(tmp_path, name: str, extra: list[str], fork: bool) -> subprocess.CompletedProcess:
    out = tmp_path / name
    out.mkdir()
    cmd = [sys.executable, "-m", "lmms_eval", "--output_path", str(out / "results"), *extra]
    env = harness_env({"LMMS_SCENE_CLIP_MODEL": "none"})
    if fork:
        assert _FORK_SERVER.accepts(cmd, env, None)
        return run_python(cmd, env=env, cwd=out, timeout=600)
    return subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=out, timeout=600)


def test_a_forked_run_equals_a_fresh_process(tmp_path):
    forked, fresh = (_harness(tmp_path, name, BLIND, fork) for name, fork in (("forked", True), ("fresh", False)))
    assert forked.returncode == fresh.returncode == 0, (forked.stderr[-2000:], fresh.stderr[-2000:])
    a, b = find_results(tmp_path / "forked"), find_results(tmp_path / "fresh")
    assert json.dumps(a["results"], sort_keys=True) == json.dumps(b["results"], sort_keys=True)
    assert a["config"]["model"] == b["config"]["model"] == "scene_blind"
    drop = lambda s: {k: v for k, v in s.items() if k != "token_counts"}  # noqa: E731
    assert [drop(s) for s in find_samples(tmp_path / "forked", "layered_vqa_sample")] == [
        drop(s) for s in find_samples(tmp_path / "fresh", "layered_vqa_sample")
    ]
    # the printed table is in the fork's stdout, as in the process's
    assert "layered_vqa_sample" in forked.stdout and "layered_vqa_sample" in fresh.stdout


def test_a_failing_run_exits_as_a_fresh_process_does(tmp_path):
    args = ["--model", "scene_blind", "--tasks", "no_such_task_anywhere", "--verbosity", "DEBUG"]
    forked, fresh = _harness(tmp_path, "forked", args, True), _harness(tmp_path, "fresh", args, False)
    assert forked.returncode == fresh.returncode != 0
    assert "no_such_task_anywhere" in forked.stdout + forked.stderr


def test_the_cli_runs_forked_with_its_exit_codes(tmp_path):
    cmd = [sys.executable, "-m", "lmms_scene.cli", "show", str(tmp_path / "absent")]
    forked = run_python(cmd, env=harness_env(), cwd=tmp_path)
    fresh = subprocess.run(cmd, capture_output=True, text=True, env=harness_env(), cwd=tmp_path, timeout=120)
    assert (
        forked.returncode == fresh.returncode == 2 and forked.stderr == fresh.stderr and forked.stdout == fresh.stdout
    )


def test_what_a_fork_cannot_reproduce_runs_as_a_fresh_process(monkeypatch, tmp_path):
    assert (
        run_python([sys.executable, "-m", "lmms_scene.cli", "--version"], env=harness_env()).returncode == 0
    )  # started
    cmd = [sys.executable, "-m", "lmms_eval", "--tasks", "list"]
    assert _FORK_SERVER.accepts(cmd, harness_env({"LMMS_SCENE_CLIP_MODEL": "x", "PATH": "/bin"}), None)
    # what the server's imports set (torch's KMP_* and inductor folder) is the same in a fresh process
    assert _FORK_SERVER.accepts(cmd, harness_env(_FORK_SERVER.set_by_imports), None)
    assert "TORCHINDUCTOR_CACHE_DIR" not in _FORK_SERVER.set_by_imports or not _FORK_SERVER.accepts(
        cmd, harness_env({"TORCHINDUCTOR_CACHE_DIR": "/elsewhere"}), None
    )
    # read when used: the task hook's switch (each time the harness indexes), a launcher's rank
    for extra in ({"LMMS_SCENE_NO_TASK_HOOK": "1"}, {"RANK": "1", "WORLD_SIZE": "2", "OMP_NUM_THREADS": "1"}):
        assert _FORK_SERVER.accepts(cmd, harness_env(extra), None), extra
    # read at import time: HF_HOME
    assert not _FORK_SERVER.accepts(cmd, harness_env({"HF_HOME": "/elsewhere"}), None)
    # applied again in the fork (tests/forkserver.py's REPLAYED) when the server had none;
    # a value the server had cannot be changed (test_toybench.py's harness run forks so)
    for extra in ({"PYTHONPATH": "/x"}, {"LMMS_SCENE_BENCHMARKS": "toybench:BENCHMARK"}):
        key = next(iter(extra))
        assert _FORK_SERVER.accepts(cmd, harness_env(extra), None) == (not _FORK_SERVER.env.get(key)), extra
    # but not a folder that holds another copy of what the server imported (an installed wheel)
    (tmp_path / "site" / "lmms_scene").mkdir(parents=True)
    why = _FORK_SERVER.refusal(cmd, harness_env({"PYTHONPATH": str(tmp_path / "site")}), None)
    assert not _FORK_SERVER.env.get("PYTHONPATH") and "PYTHONPATH shadows" in why and "lmms_scene" in why, why
    env = harness_env()
    assert not _FORK_SERVER.accepts([sys.executable, "-m", "pip", "list"], env, None)
    assert not _FORK_SERVER.accepts(["/usr/bin/python3", "-m", "lmms_eval"], env, None)
    assert not _FORK_SERVER.accepts(cmd, env, "input")
    monkeypatch.setenv(FORK_ENV, "0")
    assert not _FORK_SERVER.accepts(cmd, env, None)


def test_memoised_task_index_equals_the_harness_index_and_follows_yaml_edits(tmp_path, monkeypatch):
    import logging

    from lmms_scene import compat

    folder = tmp_path / "tasks"
    folder.mkdir()
    yaml = folder / "a.yaml"
    yaml.write_text("task: memo_probe_a\ndataset_path: x\noutput_type: generate_until\n")
    manager = compat.task_manager()
    harness_index = compat.unpatched(manager._get_task_and_group)
    monkeypatch.setattr(manager, "_get_task_and_group", harness_index)  # undone after the test

    def index():
        tm = manager.__new__(manager)
        tm.logger = logging.getLogger("memo-test")
        return manager._get_task_and_group(tm, str(folder))

    calls = []

    def counted(self, task_dir):
        calls.append(task_dir)
        return harness_index(self, task_dir)

    monkeypatch.setattr(manager, "_get_task_and_group", counted)
    assert index_memo.memoize_task_index() and index_memo.memoize_task_index()  # installed once
    first = index()
    assert "memo_probe_a" in first and first["memo_probe_a"] == {"type": "task", "yaml_path": str(yaml)}
    first["memo_probe_a"]["type"] = "changed by a caller"  # each caller gets its own copy
    assert index()["memo_probe_a"]["type"] == "task" and len(calls) == 1  # indexed once
    yaml.write_text("task: memo_probe_b\ndataset_path: x\noutput_type: generate_until\n")  # size changes too
    again = index()
    assert "memo_probe_b" in again and "memo_probe_a" not in again and len(calls) == 2


def test_the_memoised_index_is_shared_through_its_folder(tmp_path, monkeypatch):
    """With a folder, a process that finds the index of the same YAML files there reads it
    instead of indexing (the fork server and the xdist workers, tests/conftest.py)."""
    import logging

    from lmms_scene import compat

    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "a.yaml").write_text("task: memo_probe_c\ndataset_path: x\noutput_type: generate_until\n")
    manager = compat.task_manager()
    harness_index = compat.unpatched(manager._get_task_and_group)
    calls = []

    def counted(self, task_dir):
        calls.append(task_dir)
        return harness_index(self, task_dir)

    def index():
        tm = manager.__new__(manager)
        tm.logger = logging.getLogger("memo-test")
        return manager._get_task_and_group(tm, str(folder))

    monkeypatch.setitem(index_memo._DISK, "folder", None)
    monkeypatch.setattr(manager, "_get_task_and_group", counted)  # undone after the test
    assert index_memo.memoize_task_index(str(tmp_path / "cache"))
    first = index()
    assert "memo_probe_c" in first and len(calls) == 1 and len(list((tmp_path / "cache").glob("*.pickle"))) == 1
    monkeypatch.setattr(manager, "_get_task_and_group", counted)  # another process: the harness unpatched
    assert index_memo.memoize_task_index(str(tmp_path / "cache"))  # and a memo of its own
    assert index() == first and len(calls) == 1  # read from the folder, not indexed
    (folder / "a.yaml").write_text("task: memo_probe_d\ndataset_path: x\noutput_type: generate_until\n")
    assert "memo_probe_d" in index() and len(calls) == 2  # an edited file is indexed again
