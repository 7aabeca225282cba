"""How the harness finds lmms-scene's tasks and models.

Three routes, from most to least explicit:

1. ``lmms_eval --include_path "$(lmms-scene tasks-path)" --tasks ...`` (the harness's
   documented way; always works);
2. ``lmms-scene eval ...``, which adds the path itself;
3. plain ``lmms_eval --tasks ...``: the harness loads our models through its
   ``lmms_eval.models`` entry-point group at start-up; that hook also appends our task
   folder to every ``TaskManager`` index. It only patches the harness when the
   harness looks exactly as tested (``TaskManager.initialize_tasks(include_path,
   include_defaults)``); otherwise it warns and points to ``--include_path``.

The same hook records where every indexed task's YAML lives, so tools can read what a
task declares (``metadata.benchmark``) whatever folder it came from
(:func:`task_config`), and makes the harness's printed results table show numbers only
(:mod:`lmms_scene.harness`).
"""

from __future__ import annotations

import os
import threading
import warnings
from collections.abc import Callable
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from lmms_scene import compat, provenance, settings
from lmms_scene.cache import cached

_PATCH_MARK = "__lmms_scene_task_path__"
#: task name -> YAML path, for every task the harness indexed in this process
_INDEXED: dict[str, str] = {}
_index_lock = threading.Lock()


def tasks_path() -> Path:
    """The folder holding lmms-scene's task YAMLs (inside the installed package)."""
    return Path(str(resources.files("lmms_scene.tasks")))


def _same(a: str | os.PathLike, b: Path) -> bool:
    try:
        return Path(a).resolve() == b.resolve()
    except OSError:
        return False


def install_task_path_hook() -> bool:
    """Make every ``lmms_eval.tasks.TaskManager`` also index our task folder.

    Returns True when the hook is (already) installed. Never raises: when the harness
    is not the shape this was tested on, it warns and leaves the harness untouched.
    :func:`lmms_scene.harness.install` calls this and then installs the harness hooks.
    """
    if settings.current().no_task_hook:
        return False
    ours = tasks_path()

    # the switch is read again each time the harness indexes: a process that set it after
    # the hook went in (a notebook, a fork of a process that imported the harness) gets it
    def enabled() -> bool:
        return not settings.current().no_task_hook

    installed = compat.install_task_index_hook(str(ours), lambda p: _same(p, ours), record_index, _PATCH_MARK, enabled)
    if installed is not True and installed != "shape":  # the harness itself is broken; not ours to report
        warnings.warn(f"lmms-scene: {installed}; use --include_path", stacklevel=2)
        return False
    if installed == "shape":
        warnings.warn(
            "lmms-scene: this lmms-eval's TaskManager differs from the tested 0.7.x one, so lmms-scene's "
            "tasks are not registered automatically. Pass them explicitly: "
            'lmms_eval --include_path "$(lmms-scene tasks-path)" --tasks ...',
            stacklevel=2,
        )
        return False
    return True


_VERSION_MARK = "_lmms_scene_true_version"


def install_version_fix() -> bool:
    """Make the results file and the banner record the harness's own version.

    lmms-eval 0.7.3 records ``git describe`` run from its site-packages folder as its
    commit (``git_hash``) and ``<branch>@<commit>`` as ``lmms_eval_version``: when the
    virtualenv lies inside another repository (a project checkout), that is the project's
    commit. Here the commit is the harness's only when it is a git checkout of lmms-eval,
    and the version is the installed distribution's (:func:`lmms_scene.provenance.harness_version`).

    The functions are replaced where they are defined (``lmms_eval.utils``) and, when the
    evaluator has already imported them by name, there too. The evaluator is not imported
    here: this runs while the harness loads its model registry, which may be in the
    middle of importing the evaluator."""

    def commit() -> str | None:
        return provenance.checkout_commit("lmms_eval")

    def branch() -> str | None:
        if commit() is None:
            return None
        return provenance._git(Path(compat.harness_folder()), "branch", "--show-current") or "detached"

    def version() -> str:
        return provenance.harness_version() or "unknown"

    installed = compat.install_version_functions(commit, branch, version, _VERSION_MARK)
    if installed is False:
        warnings.warn(
            "lmms-scene: this lmms-eval records its version differently from 0.7.3; results keep its own record",
            stacklevel=2,
        )
    return bool(installed)


#: what runs after each harness task index is recorded (:func:`after_index`)
_AFTER_INDEX: list[Callable[[Any], None]] = []


def after_index(callback: Callable[[Any], None]) -> None:
    """Call ``callback(index)`` after every harness task index (once registered; the
    pre-flight of the plain ``python -m lmms_eval`` route, :mod:`lmms_scene.preflight`)."""
    if callback not in _AFTER_INDEX:
        _AFTER_INDEX.append(callback)


def record_index(index: Any) -> None:
    """Remember the YAML path of every task in a harness task index (name -> entry), then
    run what :func:`after_index` registered."""
    if not isinstance(index, dict):
        return
    with _index_lock:
        for name, entry in index.items():
            path = entry.get("yaml_path") if isinstance(entry, dict) else None
            if isinstance(path, str) and entry.get("type") == "task":
                _INDEXED[str(name)] = path
    for callback in list(_AFTER_INDEX):
        callback(index)


# -- reading task YAMLs without the harness -------------------------------------------


class FunctionRef(str):
    """A ``!function module.fn`` reference read from a task YAML (kept as its name:
    reading what a task declares imports nothing); :func:`dump_task_yaml` writes it back."""


def _yaml_loader():
    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: FunctionRef(loader.construct_scalar(node)))
    return Loader


def dump_task_yaml(config: dict[str, Any]) -> str:
    """A task config as YAML text the harness reads (``FunctionRef`` as ``!function``)."""

    class Dumper(yaml.SafeDumper):
        pass

    Dumper.add_representer(FunctionRef, lambda dumper, ref: dumper.represent_scalar("!function", str(ref)))
    return yaml.dump(config, Dumper=Dumper, sort_keys=False, allow_unicode=True)


def read_task_yaml(path: str | os.PathLike) -> dict[str, Any]:
    """A task YAML with its ``include:`` chain merged (later keys win), ``!function``
    references kept as strings. Raises ``ValueError`` naming the file on bad YAML."""
    path = Path(path)
    try:
        config = yaml.load(path.read_text(encoding="utf-8"), Loader=_yaml_loader()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: not a readable task YAML ({exc})") from exc
    if not isinstance(config, dict):
        raise ValueError(f"{path}: a task YAML must be a mapping, got {type(config).__name__}")
    includes = config.pop("include", None)
    if includes is None:
        return config
    merged: dict[str, Any] = {}
    for inc in [includes] if isinstance(includes, str) else list(includes):
        target = Path(inc) if Path(inc).is_absolute() else path.parent / inc
        merged.update(read_task_yaml(target))
    merged.update(config)
    return merged


def _our_configs(root: str) -> dict[str, dict[str, Any]]:
    def read() -> dict[str, dict[str, Any]]:
        found: dict[str, dict[str, Any]] = {}
        for path in sorted(Path(root).rglob("*.yaml")):
            config = read_task_yaml(path)
            if isinstance(config.get("task"), str):
                found[config["task"]] = config | {"__yaml_path__": str(path)}
        return found

    return cached(("task-configs", root), read)


def our_task_configs() -> dict[str, dict[str, Any]]:
    """Every task lmms-scene ships: name -> merged YAML config (groups excluded)."""
    return _our_configs(str(tasks_path()))


def task_config(task: str) -> dict[str, Any] | None:
    """The merged YAML config of ``task``: one of ours, or one the harness indexed in
    this process (a user's ``--include_path`` folder), or None when unknown."""
    ours = our_task_configs().get(task)
    if ours is not None:
        return ours
    with _index_lock:
        path = _INDEXED.get(task)
    if path is None:
        return None
    try:
        return read_task_yaml(path) | {"__yaml_path__": path}
    except ValueError:
        return None
