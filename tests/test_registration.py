"""The three registration routes, the installed (non-editable) layout, and task names
that the harness's built-ins would shadow."""

from __future__ import annotations

import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import pytest
import yaml
from conftest import REPO, SELFTEST_TASKS, harness_env, run_python

from lmms_scene import cli
from lmms_scene.benchmarks import TASK_PREFIXES
from lmms_scene.registration import install_task_path_hook, tasks_path


class _YamlLoader(yaml.SafeLoader):
    pass


_YamlLoader.add_multi_constructor("!", lambda loader, suffix, node: None)


def our_task_names(root: Path) -> set[str]:
    """Task and group names declared in the YAMLs under ``root`` (read directly)."""
    names = set()
    for path in root.rglob("*.yaml"):
        doc = yaml.load(path.read_text(), Loader=_YamlLoader) or {}
        for key in ("task", "group"):
            if isinstance(doc.get(key), str):
                names.add(doc[key])
    return names


def test_tasks_path_cli_prints_the_task_folder(capsys):
    assert cli.main(["tasks-path"]) == 0
    printed = Path(capsys.readouterr().out.strip())
    assert printed == tasks_path()
    assert any(printed.rglob("*.yaml")), f"no task YAMLs under {printed}"


@pytest.mark.slow
def test_our_names_do_not_collide_with_builtin_tasks(monkeypatch, harness_index_memo):
    from lmms_eval.tasks import TaskManager

    # The harness's own index, without our hook (it may be installed in this process).
    unhooked = getattr(TaskManager.initialize_tasks, "__wrapped__", TaskManager.initialize_tasks)
    monkeypatch.setattr(TaskManager, "initialize_tasks", unhooked)
    builtin = set(TaskManager().all_tasks)
    assert len(builtin) > 100  # the harness's built-ins were really indexed
    ours = our_task_names(tasks_path())
    assert ours, "no task names found"
    assert not ours & builtin, f"built-in tasks would silently shadow ours: {sorted(ours & builtin)}"
    assert all(name.startswith(TASK_PREFIXES) for name in ours), sorted(ours)


def test_hook_appends_our_folder_once_and_keeps_user_paths(monkeypatch):
    from lmms_eval.tasks import TaskManager

    seen = []

    def fake_initialize(self, include_path=None, include_defaults=True):
        seen.append(include_path)
        return {}

    monkeypatch.setattr(TaskManager, "initialize_tasks", fake_initialize)
    assert install_task_path_hook() is True
    assert install_task_path_hook() is True  # idempotent: not wrapped twice
    tm = TaskManager.__new__(TaskManager)
    TaskManager.initialize_tasks(tm, include_path="/somewhere/else")
    TaskManager.initialize_tasks(tm, include_path=[str(tasks_path())])
    assert seen[0] == ["/somewhere/else", str(tasks_path())]
    assert seen[1] == [str(tasks_path())]


def test_hook_warns_and_leaves_an_unknown_harness_alone(monkeypatch):
    from lmms_eval.tasks import TaskManager

    def changed_signature(self, paths=None):
        return {}

    monkeypatch.setattr(TaskManager, "initialize_tasks", changed_signature)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert install_task_path_hook() is False
    assert TaskManager.initialize_tasks is changed_signature
    assert any("--include_path" in str(w.message) for w in caught)


def _list_tasks(env_extra: dict[str, str], include: Path | None) -> str:
    cmd = [sys.executable, "-m", "lmms_eval", "--tasks", "list"]
    if include:
        cmd += ["--include_path", str(include)]
    proc = run_python(cmd, capture_output=True, text=True, env=harness_env(env_extra), timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout + proc.stderr


@pytest.mark.e2e
def test_route_include_path_and_route_entry_point_list_our_tasks():
    ours = our_task_names(tasks_path())
    # Route 1: the documented --include_path, with our hook switched off.
    listed = _list_tasks({"LMMS_SCENE_NO_TASK_HOOK": "1"}, tasks_path())
    assert all(f" - {name}\n" in listed for name in ours), listed[-2000:]
    # Without any path and without the hook, the harness does not know them.
    bare = _list_tasks({"LMMS_SCENE_NO_TASK_HOOK": "1"}, None)
    assert not any(f" - {name}\n" in bare for name in ours)
    # Route 3: plain lmms_eval, through the lmms_eval.models entry point's hook.
    plain = _list_tasks({}, None)
    assert all(f" - {name}\n" in plain for name in ours)


@pytest.mark.e2e
def test_lmms_scene_eval_exit_codes(tmp_path):
    env = harness_env()
    base = [sys.executable, "-m", "lmms_scene.cli", "eval", "--model", "echo", "--output_path", str(tmp_path)]
    bad = run_python([*base, "--tasks", "no_such_task_anywhere"], capture_output=True, text=True, env=env, timeout=300)
    assert bad.returncode == 1, bad.stdout[-1500:] + bad.stderr[-1500:]
    assert "the evaluation failed" in bad.stderr
    # The same harness run that succeeds exits 0 (with a user include path beside ours).
    good = run_python(
        [*base, "--tasks", "scene_selftest", "--include_path", str(SELFTEST_TASKS)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert good.returncode == 0, good.stdout[-1500:] + good.stderr[-1500:]
    assert list(tmp_path.rglob("*_results.json"))


@pytest.mark.e2e
def test_non_editable_install_ships_tasks_templates_and_samples(tmp_path):
    """Build the wheel, install it into a folder, and ask the harness for our tasks."""
    wheel_dir, target = tmp_path / "wheel", tmp_path / "site"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheel_dir), str(REPO)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = wheel_dir.glob("lmms_scene-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    shipped_yaml = {n for n in names if n.startswith("lmms_scene/tasks/") and n.endswith(".yaml")}
    in_repo_yaml = {
        f"lmms_scene/tasks/{p.relative_to(REPO / 'tasks').as_posix()}" for p in (REPO / "tasks").rglob("*.yaml")
    }
    assert shipped_yaml == in_repo_yaml
    for pattern in ("_default_template_yaml", ".jinja", ".parquet"):
        in_repo = [p for p in (REPO / "tasks").rglob(f"*{pattern}")] + [
            p for p in (REPO / "templates").rglob(f"*{pattern}")
        ]
        if in_repo:
            assert any(n.endswith(pattern) for n in names), f"{pattern} files are not in the wheel"
    install = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr[-2000:]
    env = harness_env({"PYTHONPATH": str(target), "LMMS_SCENE_NO_TASK_HOOK": "1"})
    where = run_python(
        [sys.executable, "-m", "lmms_scene.cli", "tasks-path"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,  # not the checkout, which would shadow the installed package
    )
    installed = Path(where.stdout.strip())
    assert installed.is_relative_to(target), (where.stdout, where.stderr)
    listed = run_python(
        [sys.executable, "-m", "lmms_eval", "--tasks", "list", "--include_path", str(installed)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    out = listed.stdout + listed.stderr
    assert all(f" - {name}\n" in out for name in our_task_names(installed)), out[-2000:]


def test_scene_sample_group_lists_exactly_the_built_sample_tasks():
    from lmms_scene import benchmarks

    group = yaml.load((tasks_path() / "scene_sample.yaml").read_text(), Loader=_YamlLoader)
    built = sorted(t for bench in benchmarks.built() for t in bench.sample_tasks)
    assert built and sorted(group["task"]) == built


def test_every_task_declares_a_registered_benchmark_and_the_registry_names_every_task():
    from lmms_scene import benchmarks
    from lmms_scene.registration import our_task_configs

    configs = our_task_configs()
    for task, config in configs.items():
        declared = benchmarks.declared_benchmark(config)
        assert declared in benchmarks.names(), (task, config.get("metadata"))
        assert benchmarks.benchmark_of_task(task).name == declared
    for bench in benchmarks.built():
        listed = set(bench.tasks) | set(bench.sample_tasks)
        assert listed <= set(configs), sorted(listed - set(configs))


def test_demo_says_which_benchmarks_are_not_built(monkeypatch, capsys):
    import lmms_scene.evaluate as evaluate
    from lmms_scene import benchmarks

    monkeypatch.setattr(benchmarks.Benchmark, "built", lambda self: False)
    assert evaluate.demo("unused") == 1
    out = capsys.readouterr()
    assert "COOCO is not built yet" in out.out and "SNUS is not built yet" in out.out
    assert "nothing to run" in out.err


def test_a_registry_entry_names_its_task_folder_and_the_default_is_ours(tmp_path, monkeypatch):
    """A plugin benchmark's tasks need not live under tasks/<name>: the toy names its own
    folder (tests/toybench/tasks); lmms-scene's benchmarks keep tasks/<name>; built() and
    build_samples read the entry's folder."""
    import dataclasses

    import toybench

    from lmms_scene import benchmarks
    from lmms_scene.data import samples

    assert benchmarks.get("snus").task_folder == tasks_path() / "snus"
    toy = toybench.BENCHMARK
    assert toy.task_folder == REPO / "tests" / "toybench" / "tasks" and (toy.task_folder / "toybench.yaml").is_file()
    asks = dataclasses.replace(toy, sample_tasks=("toybench",))
    assert asks.built() and not dataclasses.replace(asks, task_dir="").built()  # tasks/toybench does not exist
    elsewhere = dataclasses.replace(asks, task_dir=str(tmp_path))
    monkeypatch.setattr(benchmarks, "BENCHMARKS", (*benchmarks.BENCHMARKS, elsewhere))
    monkeypatch.setattr(samples, "builders", lambda: {"toybench": lambda folder: [Path(folder) / "written"]})
    assert samples.build_samples(["toybench"]) == {"toybench": [tmp_path / "written"]}
    assert samples.build_samples(["toybench"], root=tmp_path / "r") == {
        "toybench": [tmp_path / "r" / "toybench" / "written"]
    }
