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
"""

from __future__ import annotations

import functools
import inspect
import os
import warnings
from importlib import resources
from pathlib import Path

#: every task and group name lmms-scene defines must avoid the harness's built-ins,
#: which would silently win (tests check this against the installed harness).
TASK_PREFIXES = ("cooco", "snus", "layered_vqa", "scene_")

_PATCH_MARK = "__lmms_scene_task_path__"


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
    """
    if os.environ.get("LMMS_SCENE_NO_TASK_HOOK"):
        return False
    try:
        from lmms_eval.tasks import TaskManager
    except Exception as err:  # the harness itself is broken; not ours to report
        warnings.warn(f"lmms-scene: could not import lmms_eval.tasks ({err}); use --include_path", stacklevel=2)
        return False
    original = TaskManager.initialize_tasks
    if getattr(original, _PATCH_MARK, False):
        return True
    params = list(inspect.signature(original).parameters)
    if params[:3] != ["self", "include_path", "include_defaults"]:
        warnings.warn(
            "lmms-scene: this lmms-eval's TaskManager differs from the tested 0.7.x one, so lmms-scene's "
            "tasks are not registered automatically. Pass them explicitly: "
            'lmms_eval --include_path "$(lmms-scene tasks-path)" --tasks ...',
            stacklevel=2,
        )
        return False
    ours = tasks_path()

    @functools.wraps(original)
    def initialize_tasks(self, include_path=None, include_defaults=True):
        paths = [include_path] if isinstance(include_path, (str, os.PathLike)) else list(include_path or [])
        if not any(_same(p, ours) for p in paths):
            paths.append(str(ours))
        return original(self, include_path=paths, include_defaults=include_defaults)

    setattr(initialize_tasks, _PATCH_MARK, True)
    TaskManager.initialize_tasks = initialize_tasks
    return True
